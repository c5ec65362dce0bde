/**
 * The Azure OpenAI codec: OpenAI Chat's encoder without the body's model, Chat's decoders reading
 * Azure's answers (content filter results, a first stream chunk without choices), and its
 * capability table in docs/protocols/azure-openai.md agreeing with what it carries.
 */
import { describe, expect, it } from "vitest";
import docsText from "../../../docs/protocols/azure-openai.md?raw";
import { azureOpenAiCodec } from "../../../src/protocol/azure-openai/index.ts";
import { REQUEST_FEATURES } from "../../../src/protocol/features.ts";
import { openAiChatCodec } from "../../../src/protocol/openai-chat/index.ts";
import type { NeutralEvent } from "../../../src/protocol/neutral.ts";

const request = openAiChatCodec.decodeRequest({
  model: "sluice-chat",
  stream: true,
  max_tokens: 30,
  temperature: 0.3,
  stop: ["END"],
  messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Weather?" }],
  tools: [{ type: "function", function: { name: "weather", parameters: { type: "object" } } }],
});

describe("the azure-openai codec", () => {
  it("encodes OpenAI Chat's body without a model: the deployment is in the address", () => {
    const body = azureOpenAiCodec.encodeRequest(request, "gpt-4o-prod", { streamUsage: true }) as Record<string, unknown>;
    const { model, ...chat } = openAiChatCodec.encodeRequest(request, "gpt-4o-prod", { streamUsage: true }) as Record<string, unknown>;
    expect(model).toBe("gpt-4o-prod");
    expect(body).toEqual(chat);
    expect(body).toMatchObject({ stream: true, stream_options: { include_usage: true }, max_completion_tokens: 30, stop: ["END"] });
    expect(azureOpenAiCodec.upstreamPath).toBe("/chat/completions");
    expect([...azureOpenAiCodec.rejectedBeforeProcessing]).toEqual([429]);
  });

  it("decodes a buffered answer with Azure's filter results, and a content-filtered stop", () => {
    const filters = { hate: { filtered: false, severity: "safe" } };
    const r = azureOpenAiCodec.decodeResponse({
      id: "chatcmpl-1",
      object: "chat.completion",
      created: 1,
      model: "gpt-4o-2024-08-06",
      prompt_filter_results: [{ prompt_index: 0, content_filter_results: filters }],
      choices: [{ index: 0, message: { role: "assistant", content: "Sunny." }, finish_reason: "content_filter", content_filter_results: filters }],
      usage: { prompt_tokens: 9, completion_tokens: 2, total_tokens: 11, prompt_tokens_details: { cached_tokens: 4 }, completion_tokens_details: { reasoning_tokens: 1 } },
    });
    expect(r).toMatchObject({ text: "Sunny.", stopReason: "content_filter", usage: { inputTokens: 9, outputTokens: 2, cachedInputTokens: 4, reasoningTokens: 1, source: "provider" } });
  });

  it("decodes a stream that opens with Azure's choiceless filter chunk and ends with usage", () => {
    const d = azureOpenAiCodec.createStreamDecoder();
    const chunks = [
      { choices: [], created: 0, id: "", model: "", object: "", prompt_filter_results: [{ prompt_index: 0, content_filter_results: {} }] },
      { id: "c", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] },
      { id: "c", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { content: "Hi" }, finish_reason: null, content_filter_results: {} }] },
      { id: "c", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] },
      { id: "c", object: "chat.completion.chunk", created: 1, model: "m", choices: [], usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } },
    ];
    const events: NeutralEvent[] = [];
    for (const c of chunks) events.push(...d.decode({ data: JSON.stringify(c) }));
    events.push(...d.decode({ data: "[DONE]" }), ...d.finish());
    expect(events.filter((e) => e.type === "text").map((e) => (e as { text: string }).text).join("")).toBe("Hi");
    expect(events.some((e) => e.type === "error")).toBe(false);
    expect(events).toContainEqual(expect.objectContaining({ usage: expect.objectContaining({ inputTokens: 3, outputTokens: 1 }) }));
  });

  it("carries OpenAI Chat's features but service_tier, verbosity and metadata", () => {
    const dropped = [...openAiChatCodec.carries].filter((f) => !azureOpenAiCodec.carries.has(f)).sort();
    expect(dropped).toEqual(["metadata", "openai_service_tier", "verbosity"]);
  });

  it("agrees with its capability table: each feature's field on a yes row when carried, on a no row when not", () => {
    const docs: string = docsText;
    const rows = docs
      .slice(docs.indexOf("| feature (OpenAI Chat field) |"))
      .split("\n")
      .filter((l) => l.startsWith("|") && !l.startsWith("|---"))
      .slice(1)
      .map((l) => l.split("|").map((c) => c.trim()));
    const fields = (answer: string) => new Set(rows.filter((r) => r[2] === answer).flatMap((r) => [...r[1]!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!)));
    const yes = fields("yes");
    const no = fields("no");
    expect(yes.size).toBeGreaterThan(5);
    for (const f of REQUEST_FEATURES) {
      const field = openAiChatCodec.paramName(f);
      if (azureOpenAiCodec.carries.has(f)) expect(yes, `${f} (${field}) is carried`).toContain(field);
      // A feature whose field also serves a carried one (reasoning_budget, as reasoning_effort) is that row's.
      else if (![...azureOpenAiCodec.carries].some((c) => openAiChatCodec.paramName(c) === field)) expect(no, `${f} (${field}) is not carried`).toContain(field);
    }
  });
});
