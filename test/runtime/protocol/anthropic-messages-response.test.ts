import { describe, expect, it } from "vitest";
import { anthropicMessagesCodec } from "../../../src/protocol/anthropic-messages/index.ts";
import type { ResponseStamp } from "../../../src/protocol/codec.ts";
import type { NeutralResponse, StopReason } from "../../../src/protocol/neutral.ts";
import { openAiChatCodec } from "../../../src/protocol/openai-chat/index.ts";
import { rejectOf } from "./error-helpers.ts";

const stamp: ResponseStamp = { id: "chatcmpl-gw-req123", created: 1_760_000_000, model: "public-model" };

const decode = (body: unknown) => anthropicMessagesCodec.decodeResponse(body);
const encode = (res: NeutralResponse) => anthropicMessagesCodec.encodeResponse(res, stamp) as Record<string, unknown>;

/** A realistic provider body; `over` replaces top-level keys. */
function providerBody(content: unknown[], over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: "msg_01PROVIDERxyz",
    type: "message",
    role: "assistant",
    model: "claude-provider-2025",
    content,
    stop_reason: "end_turn",
    stop_sequence: null,
    stop_details: null,
    container: null,
    usage: {
      input_tokens: 12,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
      cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 },
      output_tokens: 5,
      service_tier: "standard",
    },
    ...over,
  };
}


const usage = (over: Record<string, unknown> = {}) => ({ inputTokens: 12, outputTokens: 5, source: "provider" as const, ...over });

describe("anthropic-messages decodeResponse", () => {
  it("decodes a text answer; input tokens include cache reads and writes", () => {
    expect(decode(providerBody([{ type: "text", text: "Hello there.", citations: null }]))).toEqual({
      providerId: "msg_01PROVIDERxyz",
      text: "Hello there.",
      toolCalls: [],
      stopReason: "end_turn",
      stopSequence: undefined,
      usage: { inputTokens: 12, outputTokens: 5, cachedInputTokens: 0, cacheWriteInputTokens: 0, reasoningTokens: undefined, source: "provider" },
    });
  });

  it("adds cache reads and writes into inputTokens and keeps them apart", () => {
    const res = decode(
      providerBody([{ type: "text", text: "x" }], {
        usage: { input_tokens: 50, cache_read_input_tokens: 2000, cache_creation_input_tokens: 300, output_tokens: 40, output_tokens_details: { thinking_tokens: 25 } },
      }),
    );
    expect(res.usage).toEqual({
      inputTokens: 2350,
      outputTokens: 40,
      cachedInputTokens: 2000,
      cacheWriteInputTokens: 300,
      reasoningTokens: 25,
      source: "provider",
    });
    const nulls = decode(providerBody([], { usage: { input_tokens: 7, output_tokens: 1, cache_read_input_tokens: null, cache_creation_input_tokens: null } }));
    expect(nulls.usage).toEqual({ inputTokens: 7, outputTokens: 1, cachedInputTokens: undefined, cacheWriteInputTokens: undefined, reasoningTokens: undefined, source: "provider" });
  });

  it("keeps usage unknown (undefined), never zero, when the provider reports none", () => {
    expect(decode(providerBody([{ type: "text", text: "x" }], { usage: undefined })).usage).toBeUndefined();
    expect(decode(providerBody([{ type: "text", text: "x" }], { usage: null })).usage).toBeUndefined();
  });

  it("joins text blocks, keeps thinking with signatures, and turns tool_use into tool calls", () => {
    const res = decode(
      providerBody(
        [
          { type: "thinking", thinking: "User wants weather.", signature: "EqQBSig" },
          { type: "redacted_thinking", data: "EmwRedacted" },
          { type: "text", text: "Let me " },
          { type: "text", text: "check." },
          { type: "tool_use", id: "toolu_01A", name: "get_weather", input: { city: "Oslo", units: ["c"] }, caller: { type: "direct" } },
          { type: "tool_use", id: "toolu_01B", name: "get_time", input: {} },
        ],
        { stop_reason: "tool_use" },
      ),
    );
    expect(res.text).toBe("Let me check.");
    expect(res.reasoning).toEqual([
      { text: "User wants weather.", signature: "EqQBSig" },
      { text: "", signature: "anthropic-redacted-thinking:EmwRedacted" },
    ]);
    expect(res.toolCalls).toEqual([
      { id: "toolu_01A", name: "get_weather", arguments: '{"city":"Oslo","units":["c"]}' },
      { id: "toolu_01B", name: "get_time", arguments: "{}" },
    ]);
    expect(res.stopReason).toBe("tool_use");
  });

  it("maps every stop_reason, and keeps the matched stop sequence", () => {
    const cases: [string | null, StopReason][] = [
      ["end_turn", "end_turn"],
      ["max_tokens", "max_tokens"],
      ["model_context_window_exceeded", "max_tokens"],
      ["stop_sequence", "stop_sequence"],
      ["tool_use", "tool_use"],
      ["refusal", "content_filter"],
      ["pause_turn", "other"],
      ["something_new", "other"],
      [null, "other"],
    ];
    for (const [reason, stop] of cases) {
      expect(decode(providerBody([{ type: "text", text: "x" }], { stop_reason: reason })).stopReason, String(reason)).toBe(stop);
    }
    const seq = decode(providerBody([{ type: "text", text: "x" }], { stop_reason: "stop_sequence", stop_sequence: "END" }));
    expect([seq.stopReason, seq.stopSequence]).toEqual(["stop_sequence", "END"]);
  });

  it("skips block types Sluice never asks for", () => {
    const res = decode(providerBody([{ type: "server_tool_use", id: "srvtoolu_1", name: "web_search", input: {} }, { type: "text", text: "ok" }]));
    expect(res.text).toBe("ok");
    expect(res.toolCalls).toEqual([]);
  });

  it("throws upstream_protocol_error on a malformed body", () => {
    for (const bad of [
      null,
      "text",
      {},
      { content: "nope" },
      providerBody([{ type: "text", text: 5 }]),
      providerBody([{ type: "tool_use", name: "f", input: {} }]),
      providerBody([{ text: "no type" }]),
      providerBody([], { usage: { input_tokens: -1, output_tokens: 1 } }),
      { type: "error", error: { type: "overloaded_error", message: "Overloaded" } },
    ]) {
      const err = rejectOf(() => decode(bad));
      expect(err.code).toBe("upstream_protocol_error");
      expect(err.status).toBe(502);
    }
  });
});

describe("anthropic-messages encodeResponse", () => {
  const base: NeutralResponse = { text: "Hello.", toolCalls: [], stopReason: "end_turn", usage: usage() };

  it("writes an Anthropic message stamped with a msg_ id from the gateway id and the public model", () => {
    expect(encode({ ...base, providerId: "msg_01PROVIDER" })).toEqual({
      id: "msg_gw-req123",
      type: "message",
      role: "assistant",
      model: "public-model",
      content: [{ type: "text", text: "Hello." }],
      stop_reason: "end_turn",
      stop_sequence: null,
      usage: { input_tokens: 12, cache_creation_input_tokens: null, cache_read_input_tokens: null, output_tokens: 5 },
    });
  });

  it("subtracts cache reads and writes from input_tokens and reports them apart", () => {
    const body = encode({ ...base, usage: usage({ inputTokens: 2350, cachedInputTokens: 2000, cacheWriteInputTokens: 300, outputTokens: 40, reasoningTokens: 25 }) });
    expect(body.usage).toEqual({
      input_tokens: 50,
      cache_creation_input_tokens: 300,
      cache_read_input_tokens: 2000,
      output_tokens: 40,
      output_tokens_details: { thinking_tokens: 25 },
    });
    // An OpenAI provider reports cached reads only.
    expect(encode({ ...base, usage: usage({ inputTokens: 100, cachedInputTokens: 64 }) }).usage).toEqual({
      input_tokens: 36,
      cache_creation_input_tokens: null,
      cache_read_input_tokens: 64,
      output_tokens: 5,
    });
  });

  it("leaves usage out when it is unknown rather than writing zeros", () => {
    const body = encode({ ...base, usage: undefined });
    expect(body).not.toHaveProperty("usage");
    expect(JSON.stringify(body)).not.toContain("input_tokens");
  });

  it("orders thinking, text, tool_use; omits empty text beside tool calls; parses arguments", () => {
    const body = encode({
      text: "",
      reasoning: [{ text: "plan", signature: "EqSig" }, { text: "", signature: "anthropic-redacted-thinking:EmwR" }, { text: "unsigned" }],
      toolCalls: [
        { id: "call_1", name: "lookup", arguments: '{"q":"x","n":[1,2]}' },
        { id: "call_2", name: "ping", arguments: "" },
      ],
      stopReason: "tool_use",
      usage: usage(),
    });
    expect(body.content).toEqual([
      { type: "thinking", thinking: "plan", signature: "EqSig" },
      { type: "redacted_thinking", data: "EmwR" },
      { type: "thinking", thinking: "unsigned", signature: "" },
      { type: "tool_use", id: "call_1", name: "lookup", input: { q: "x", n: [1, 2] } },
      { type: "tool_use", id: "call_2", name: "ping", input: {} },
    ]);
    expect(body.stop_reason).toBe("tool_use");
    const withText = encode({ ...base, text: "Calling.", toolCalls: [{ id: "c", name: "f", arguments: "{}" }], stopReason: "tool_use" });
    expect(withText.content).toEqual([
      { type: "text", text: "Calling." },
      { type: "tool_use", id: "c", name: "f", input: {} },
    ]);
    // An empty answer without tool calls still has its (empty) text block.
    expect(encode({ ...base, text: "" }).content).toEqual([{ type: "text", text: "" }]);
  });

  it("maps every neutral stop reason, with the stop sequence", () => {
    const cases: [StopReason, string][] = [
      ["end_turn", "end_turn"],
      ["max_tokens", "max_tokens"],
      ["stop_sequence", "stop_sequence"],
      ["tool_use", "tool_use"],
      ["content_filter", "refusal"],
      ["other", "end_turn"],
    ];
    for (const [stop, reason] of cases) expect(encode({ ...base, stopReason: stop }).stop_reason, stop).toBe(reason);
    expect(encode({ ...base, stopReason: "stop_sequence", stopSequence: "END" })).toMatchObject({ stop_reason: "stop_sequence", stop_sequence: "END" });
    // A provider that finished tool calls with a plain "stop" still reports tool_use.
    const quirky = encode({ ...base, toolCalls: [{ id: "c", name: "f", arguments: "{}" }], stopReason: "end_turn" });
    expect(quirky.stop_reason).toBe("tool_use");
  });

  it("drops a truncated tool call after max_tokens, and refuses invalid arguments otherwise", () => {
    const cut = encode({ ...base, text: "Let me", toolCalls: [{ id: "c", name: "f", arguments: '{"q":"unfinish' }], stopReason: "max_tokens" });
    expect(cut.content).toEqual([{ type: "text", text: "Let me" }]);
    expect(cut.stop_reason).toBe("max_tokens");
    for (const args of ['{"q":', "[1]", "42"]) {
      const err = rejectOf(() => encode({ ...base, toolCalls: [{ id: "c", name: "f", arguments: args }], stopReason: "tool_use" }));
      expect(err.code, args).toBe("upstream_protocol_error");
    }
  });

  it("round-trips a provider body through decode → encode with only the stamp changed", () => {
    const provider = providerBody(
      [
        { type: "thinking", thinking: "t", signature: "EqS" },
        { type: "text", text: "Answer" },
        { type: "tool_use", id: "toolu_1", name: "f", input: { a: 1 } },
      ],
      { stop_reason: "tool_use", usage: { input_tokens: 10, cache_read_input_tokens: 90, cache_creation_input_tokens: 5, output_tokens: 7 } },
    );
    expect(encode(decode(provider))).toEqual({
      id: "msg_gw-req123",
      type: "message",
      role: "assistant",
      model: "public-model",
      content: provider.content,
      stop_reason: "tool_use",
      stop_sequence: null,
      usage: { input_tokens: 10, cache_creation_input_tokens: 5, cache_read_input_tokens: 90, output_tokens: 7 },
    });
  });

  it("serves an OpenAI provider's answer to an Anthropic client", () => {
    const neutral = openAiChatCodec.decodeResponse({
      id: "chatcmpl-P",
      object: "chat.completion",
      created: 1,
      model: "gpt-x",
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: null, tool_calls: [{ id: "call_9", type: "function", function: { name: "get", arguments: '{"k":"v"}' } }] },
          finish_reason: "tool_calls",
        },
      ],
      usage: { prompt_tokens: 30, completion_tokens: 9, total_tokens: 39, prompt_tokens_details: { cached_tokens: 20 } },
    });
    expect(encode(neutral)).toMatchObject({
      content: [{ type: "tool_use", id: "call_9", name: "get", input: { k: "v" } }],
      stop_reason: "tool_use",
      usage: { input_tokens: 10, cache_read_input_tokens: 20, cache_creation_input_tokens: null, output_tokens: 9 },
    });
  });
});
