/**
 * Request fields the current official SDKs send (Anthropic `output_config`, adaptive thinking,
 * top-level `cache_control`, routing hints; OpenAI's wider reasoning efforts, verbosity, cache
 * keys, safety identifiers, service tiers): what each codec accepts, carries and refuses.
 */
import { describe, expect, it } from "vitest";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import { anthropicMessagesCodec as anthropic } from "../../../src/protocol/anthropic-messages/index.ts";
import type { Codec } from "../../../src/protocol/codec.ts";
import { REQUEST_FEATURES, requestFeatures, withoutFeatures } from "../../../src/protocol/features.ts";
import { REASONING_EFFORTS, type NeutralRequest } from "../../../src/protocol/neutral.ts";
import { openAiChatCodec as chat } from "../../../src/protocol/openai-chat/index.ts";
import { openAiResponsesCodec as responses } from "../../../src/protocol/openai-responses/index.ts";
import { json, rejectOf as rejectCall } from "./error-helpers.ts";

const encode = (codec: Codec, req: NeutralRequest) => json(codec.encodeRequest(req, "upstream", { streamUsage: true })) as Record<string, unknown>;
const neutral = (extra: Partial<NeutralRequest> = {}): NeutralRequest => ({
  model: "public-model",
  messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
  stream: false,
  streamUsage: false,
  ...extra,
});
const anthropicBody = (extra: Record<string, unknown> = {}) => ({ model: "m", max_tokens: 1024, messages: [{ role: "user", content: "hi" }], ...extra });
const chatBody = (extra: Record<string, unknown> = {}) => ({ model: "m", messages: [{ role: "user", content: "hi" }], ...extra });
const responsesBody = (extra: Record<string, unknown> = {}) => ({ model: "m", input: "hi", ...extra });

/** A client's invalid_request. */
function rejectOf(fn: () => unknown): GatewayError {
  const err = rejectCall(fn);
  expect(err.code).toBe("invalid_request");
  return err;
}

const schema = { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false };

describe("Anthropic client: fields of the current SDK", () => {
  it("decodes output_config.effort and output_config.format", () => {
    for (const effort of ["low", "medium", "high", "xhigh", "max"] as const) {
      expect(anthropic.decodeRequest(anthropicBody({ output_config: { effort } })).reasoningEffort).toBe(effort);
    }
    for (const effort of ["none", "minimal"]) {
      expect(rejectOf(() => anthropic.decodeRequest(anthropicBody({ output_config: { effort } }))).param).toBe("output_config.effort");
    }
    const req = anthropic.decodeRequest(anthropicBody({ output_config: { effort: null, format: { type: "json_schema", schema } } }));
    expect(req.reasoningEffort).toBeUndefined();
    // Anthropic holds the output to the schema: strict. It has no name.
    expect(req.responseFormat).toEqual({ type: "json_schema", schema, strict: true });
    expect(requestFeatures(req)).toEqual(["json_schema"]);
    expect(anthropic.decodeRequest(anthropicBody({ output_config: { format: null } })).responseFormat).toBeUndefined();
    expect(rejectOf(() => anthropic.decodeRequest(anthropicBody({ output_config: { format: { type: "json_object" } } }))).param).toBe("output_config.format.type");
    expect(rejectOf(() => anthropic.decodeRequest(anthropicBody({ output_config: { verbosity: "low" } }))).param).toBe("output_config.verbosity");
  });

  it("decodes adaptive and between-tools thinking and the display setting", () => {
    const adaptive = anthropic.decodeRequest(anthropicBody({ thinking: { type: "adaptive", display: "omitted" } }));
    expect([adaptive.reasoningBudgetTokens, adaptive.reasoningDisplay]).toEqual(["adaptive", "omitted"]);
    expect(requestFeatures(adaptive)).toEqual(["reasoning_budget"]);
    const enabled = anthropic.decodeRequest(anthropicBody({ thinking: { type: "enabled", budget_tokens: 2048, display: "summarized" } }));
    expect([enabled.reasoningBudgetTokens, enabled.reasoningDisplay]).toEqual([2048, "summarized"]);
    const between = anthropic.decodeRequest(anthropicBody({ thinking: { type: "between_tools" } }));
    expect([between.reasoningBudgetTokens, between.reasoningDisplay]).toEqual(["between_tools", undefined]);
    expect(anthropic.decodeRequest(anthropicBody({ thinking: { type: "adaptive", display: null } })).reasoningDisplay).toBeUndefined();
  });

  it("decodes top-level cache_control and the routing fields that change price or place", () => {
    const req = anthropic.decodeRequest(
      anthropicBody({ cache_control: { type: "ephemeral", ttl: "1h" }, service_tier: "standard_only", speed: "fast", inference_geo: "us" }),
    );
    expect(req.cacheControl).toEqual({ type: "ephemeral", ttl: "1h" });
    expect([req.anthropicServiceTier, req.speed, req.inferenceGeo]).toEqual(["standard_only", "fast", "us"]);
    expect(requestFeatures(req).sort()).toEqual(["anthropic_service_tier", "inference_geo", "speed"]);
    const nulls = anthropic.decodeRequest(anthropicBody({ cache_control: null, speed: null, inference_geo: null, container: null, diagnostics: null }));
    expect([nulls.cacheControl, nulls.speed, nulls.inferenceGeo]).toEqual([undefined, undefined, undefined]);
    expect(rejectOf(() => anthropic.decodeRequest(anthropicBody({ service_tier: "priority" }))).param).toBe("service_tier");
    expect(rejectOf(() => anthropic.decodeRequest(anthropicBody({ speed: "warp" }))).param).toBe("speed");
  });

  it("refuses container and diagnostics, saying why", () => {
    const container = rejectOf(() => anthropic.decodeRequest(anthropicBody({ container: "container_abc" })));
    expect(container.param).toBe("container");
    expect(container.message).toContain("code-execution state");
    const diag = rejectOf(() => anthropic.decodeRequest(anthropicBody({ diagnostics: { previous_message_id: "msg_1" } })));
    expect(diag.param).toBe("diagnostics");
    expect(diag.message).toContain("not the provider's");
  });

  it("accepts system messages inside the conversation, in place", () => {
    const req = anthropic.decodeRequest(
      anthropicBody({
        system: "Top.",
        messages: [
          { role: "user", content: "hi" },
          { role: "assistant", content: "hello" },
          { role: "system", content: [{ type: "text", text: "Now be brief.", cache_control: { type: "ephemeral" } }] },
          { role: "user", content: "go" },
        ],
      }),
    );
    expect(req.messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "system", "user"]);
    expect(req.messages[3]).toEqual({ role: "system", content: [{ type: "text", text: "Now be brief.", cacheControl: { type: "ephemeral" } }] });
    // An empty system message adds nothing.
    expect(anthropic.decodeRequest(anthropicBody({ messages: [{ role: "system", content: "" }, { role: "user", content: "x" }] })).messages).toHaveLength(1);
    // Towards Chat the system message keeps its place.
    const wire = encode(chat, req);
    expect((wire.messages as { role: string }[]).map((m) => m.role)).toEqual(["system", "user", "assistant", "system", "user"]);
  });

  it("still accepts temperature, top_p and top_k from older clients", () => {
    const req = anthropic.decodeRequest(anthropicBody({ temperature: 0.3, top_p: 0.8, top_k: 5 }));
    expect([req.temperature, req.topP, req.topK]).toEqual([0.3, 0.8, 5]);
  });

  it("round-trips every new field Anthropic → Anthropic unchanged", () => {
    const body = anthropicBody({
      thinking: { type: "adaptive", display: "summarized" },
      output_config: { effort: "xhigh", format: { type: "json_schema", schema } },
      cache_control: { type: "ephemeral", ttl: "5m" },
      service_tier: "auto",
      speed: "fast",
      inference_geo: "eu",
    });
    const wire = encode(anthropic, anthropic.decodeRequest(body));
    expect(wire).toEqual({ ...body, model: "upstream", messages: [{ role: "user", content: "hi" }] });
    expect(encode(anthropic, anthropic.decodeRequest(anthropicBody({ thinking: { type: "between_tools" } }))).thinking).toEqual({ type: "between_tools" });
    expect(encode(anthropic, anthropic.decodeRequest(anthropicBody({ thinking: { type: "enabled", budget_tokens: 1024, display: "omitted" } }))).thinking).toEqual({
      type: "enabled",
      budget_tokens: 1024,
      display: "omitted",
    });
  });
});

describe("Anthropic backend: efforts, structured output and hints from other clients", () => {
  it("carries the efforts Anthropic has and refuses the others by the client-agnostic name", () => {
    for (const effort of ["low", "medium", "high", "xhigh", "max"] as const) {
      expect(encode(anthropic, neutral({ reasoningEffort: effort })).output_config).toEqual({ effort });
    }
    for (const effort of ["none", "minimal"] as const) {
      const err = rejectOf(() => encode(anthropic, neutral({ reasoningEffort: effort })));
      expect(err.message).toBe(`reasoning effort '${effort}' is not supported by this model's backend.`);
      expect(err.status).toBe(400);
    }
  });

  it("sends a JSON schema format as output_config.format, without its name; refuses what it cannot express", () => {
    const wire = encode(anthropic, neutral({ responseFormat: { type: "json_schema", name: "weather", schema, strict: false }, reasoningEffort: "high" }));
    expect(wire.output_config).toEqual({ effort: "high", format: { type: "json_schema", schema } });
    expect(rejectOf(() => encode(anthropic, neutral({ responseFormat: { type: "json_schema", name: "w" } }))).message).toContain("without a schema");
    expect(rejectOf(() => encode(anthropic, neutral({ responseFormat: { type: "json_schema", name: "w", schema, description: "d" } }))).message).toContain(
      "description",
    );
    expect(encode(anthropic, neutral({ responseFormat: { type: "text" } }))).not.toHaveProperty("output_config");
  });

  it("does not add a budget to the default max_tokens for adaptive thinking", () => {
    expect(encode(anthropic, neutral({ reasoningBudgetTokens: "adaptive" })).max_tokens).toBe(4096);
    expect(encode(anthropic, neutral({ reasoningBudgetTokens: 2000 })).max_tokens).toBe(6096);
  });

  it("sends safety_identifier as metadata.user_id when there is no user, and leaves OpenAI cache hints out", () => {
    const wire = encode(anthropic, neutral({ safetyIdentifier: "hash-1", promptCacheKey: "k", promptCacheRetention: "24h" }));
    expect(wire.metadata).toEqual({ user_id: "hash-1" });
    expect(Object.keys(wire).sort()).toEqual(["max_tokens", "messages", "metadata", "model"]);
    expect(encode(anthropic, neutral({ safetyIdentifier: "hash-1", user: "u-1" })).metadata).toEqual({ user_id: "u-1" });
  });
});

describe("OpenAI clients: fields of the current SDK", () => {
  it("accept every reasoning effort of OpenAI's union and carry it to both OpenAI protocols", () => {
    expect(REASONING_EFFORTS).toEqual(["none", "minimal", "low", "medium", "high", "xhigh", "max"]);
    for (const effort of REASONING_EFFORTS) {
      const fromChat = chat.decodeRequest(chatBody({ reasoning_effort: effort }));
      const fromResponses = responses.decodeRequest(responsesBody({ reasoning: { effort } }));
      expect([fromChat.reasoningEffort, fromResponses.reasoningEffort]).toEqual([effort, effort]);
      expect(encode(chat, fromResponses).reasoning_effort).toBe(effort);
      expect(encode(responses, fromChat).reasoning).toEqual({ effort });
    }
  });

  it("Chat: verbosity, cache hints, safety identifier and service tier are carried to OpenAI backends", () => {
    const body = chatBody({ verbosity: "low", prompt_cache_key: "tenant-1", prompt_cache_retention: "24h", safety_identifier: "hash-1", service_tier: "flex" });
    const req = chat.decodeRequest(body);
    expect(req).toMatchObject({ verbosity: "low", promptCacheKey: "tenant-1", promptCacheRetention: "24h", safetyIdentifier: "hash-1", openAiServiceTier: "flex" });
    expect(requestFeatures(req).sort()).toEqual(["openai_service_tier", "verbosity"]);
    expect(encode(chat, req)).toMatchObject({ verbosity: "low", prompt_cache_key: "tenant-1", prompt_cache_retention: "24h", safety_identifier: "hash-1", service_tier: "flex" });
    expect(encode(responses, req)).toMatchObject({
      text: { verbosity: "low" },
      prompt_cache_key: "tenant-1",
      prompt_cache_retention: "24h",
      safety_identifier: "hash-1",
      service_tier: "flex",
    });
    const nulls = chat.decodeRequest(chatBody({ verbosity: null, prompt_cache_key: null, prompt_cache_retention: null, safety_identifier: null, service_tier: null }));
    expect(requestFeatures(nulls)).toEqual([]);
    expect(rejectOf(() => chat.decodeRequest(chatBody({ service_tier: "ultrafast" }))).param).toBe("service_tier");
    expect(rejectOf(() => chat.decodeRequest(chatBody({ verbosity: "terse" }))).param).toBe("verbosity");
  });

  it("Responses: text.verbosity beside text.format, and the Responses-only 'ultrafast' tier", () => {
    const req = responses.decodeRequest(responsesBody({ text: { format: { type: "json_object" }, verbosity: "high" }, service_tier: "ultrafast", safety_identifier: "s" }));
    expect(req).toMatchObject({ verbosity: "high", openAiServiceTier: "ultrafast", responseFormat: { type: "json_object" }, safetyIdentifier: "s" });
    expect(encode(responses, req)).toMatchObject({ text: { format: { type: "json_object" }, verbosity: "high" }, service_tier: "ultrafast" });
    // Chat has no 'ultrafast': refused, never mapped to another (differently priced) tier.
    expect(rejectOf(() => encode(chat, req)).message).toBe("service tier 'ultrafast' is not supported by this model's backend.");
  });

  it("a schema without a name (from an Anthropic client) goes to OpenAI backends named 'response'", () => {
    const req = anthropic.decodeRequest(anthropicBody({ output_config: { format: { type: "json_schema", schema } } }));
    expect(encode(chat, req).response_format).toEqual({ type: "json_schema", json_schema: { name: "response", schema, strict: true } });
    expect((encode(responses, req).text as Record<string, unknown>).format).toEqual({ type: "json_schema", name: "response", schema, strict: true });
  });

  it("request-level cache_control is left out towards OpenAI backends", () => {
    const req = anthropic.decodeRequest(anthropicBody({ cache_control: { type: "ephemeral" } }));
    expect(encode(chat, req)).not.toHaveProperty("cache_control");
    expect(encode(responses, req)).not.toHaveProperty("cache_control");
  });
});

describe("features of the new fields", () => {
  it("each codec carries the ones its protocol has, and names every feature", () => {
    for (const f of ["verbosity", "openai_service_tier"] as const) {
      expect([chat.carries.has(f), responses.carries.has(f), anthropic.carries.has(f)], f).toEqual([true, true, false]);
    }
    for (const f of ["anthropic_service_tier", "speed", "inference_geo", "reasoning_budget"] as const) {
      expect([chat.carries.has(f), responses.carries.has(f), anthropic.carries.has(f)], f).toEqual([false, false, true]);
    }
    for (const f of ["reasoning_effort", "json_schema"] as const) {
      expect([chat.carries.has(f), responses.carries.has(f), anthropic.carries.has(f)], f).toEqual([true, true, true]);
    }
    for (const codec of [chat, responses, anthropic]) for (const f of REQUEST_FEATURES) expect(codec.paramName(f), `${codec.id} ${f}`).toMatch(/^[a-z_.]+$/);
    expect([chat.paramName("verbosity"), chat.paramName("openai_service_tier")]).toEqual(["verbosity", "service_tier"]);
    expect([anthropic.paramName("anthropic_service_tier"), anthropic.paramName("reasoning_effort")]).toEqual(["service_tier", "output_config.effort"]);
  });

  it("a downgrade removes them; dropping the budget drops the display setting with it", () => {
    const req = neutral({
      verbosity: "low",
      openAiServiceTier: "priority",
      anthropicServiceTier: "auto",
      speed: "fast",
      inferenceGeo: "us",
      reasoningBudgetTokens: "adaptive",
      reasoningDisplay: "omitted",
    });
    expect(requestFeatures(req).sort()).toEqual(["anthropic_service_tier", "inference_geo", "openai_service_tier", "reasoning_budget", "speed", "verbosity"]);
    const dropped = withoutFeatures(req, new Set(requestFeatures(req)));
    expect(requestFeatures(dropped)).toEqual([]);
    expect(dropped.reasoningDisplay).toBeUndefined();
  });
});

describe("usage detail fields", () => {
  it("Chat reads and writes prompt_tokens_details.cache_write_tokens", () => {
    const res = chat.decodeResponse({
      id: "c",
      object: "chat.completion",
      created: 1,
      model: "x",
      choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }],
      usage: { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110, prompt_tokens_details: { cached_tokens: 40, cache_write_tokens: 50 } },
    });
    expect(res.usage).toMatchObject({ inputTokens: 100, cachedInputTokens: 40, cacheWriteInputTokens: 50 });
    const stamp = { id: "0123456789abcdef0123456789abcdef", created: 1, model: "public-model" };
    const wire = json(chat.encodeResponse(res, stamp)) as { usage: Record<string, unknown> };
    expect(wire.usage.prompt_tokens_details).toEqual({ cached_tokens: 40, cache_write_tokens: 50 });
    // An Anthropic provider's cache writes and thinking tokens reach a Chat client.
    const fromAnthropic = anthropic.decodeResponse({
      id: "msg_1",
      type: "message",
      role: "assistant",
      model: "x",
      content: [{ type: "text", text: "ok" }],
      stop_reason: "end_turn",
      stop_sequence: null,
      usage: { input_tokens: 10, cache_read_input_tokens: 20, cache_creation_input_tokens: 30, output_tokens: 9, output_tokens_details: { thinking_tokens: 4 } },
    });
    const chatUsage = (json(chat.encodeResponse(fromAnthropic, stamp)) as { usage: Record<string, unknown> }).usage;
    expect(chatUsage).toMatchObject({
      prompt_tokens: 60,
      prompt_tokens_details: { cached_tokens: 20, cache_write_tokens: 30 },
      completion_tokens_details: { reasoning_tokens: 4 },
    });
  });
});
