/**
 * The Workers AI codec on its own: neutral requests → `run()` inputs, outputs (native, the older
 * tool-call shape, OpenAI chat completions) → neutral responses, streams → neutral events however
 * the bytes are split, and the embeddings wire.
 */
import { createParser } from "eventsource-parser";
import { describe, expect, it } from "vitest";
import type { NeutralEmbeddingRequest } from "../../../src/protocol/embeddings.ts";
import type { NeutralEvent, NeutralRequest } from "../../../src/protocol/neutral.ts";
import { builtinCodecs } from "../../../src/protocol/registry.ts";
import { workersAiCodec } from "../../../src/protocol/workers-ai/index.ts";
import { mulberry32 } from "../traffic/helpers.ts";
import { refusal } from "../support/refusal.ts";

const codec = workersAiCodec;
const MODEL = "@cf/meta/llama-3.1-8b-instruct";
const text = (t: string) => [{ type: "text" as const, text: t }];
const base: NeutralRequest = { model: "sluice-chat", messages: [{ role: "user", content: text("hi") }], stream: false, streamUsage: false };
const encode = (over: Partial<NeutralRequest>) => codec.encodeRequest({ ...base, ...over }, MODEL, { streamUsage: true }) as Record<string, unknown>;


describe("the registry", () => {
  it("knows workers-ai as a backend protocol only: no client can speak it", () => {
    expect(builtinCodecs.backend("workers-ai")).toBe(workersAiCodec);
    expect(builtinCodecs.ids().has("workers-ai")).toBe(true);
    expect(builtinCodecs.get("workers-ai" as never)).toBeUndefined();
  });
});

describe("workers-ai request encoding", () => {
  it("writes scoped prompts: developer as system, parts joined, history with tool calls and results, never a null content", () => {
    const inputs = encode({
      messages: [
        { role: "developer", content: [...text("Be brief."), ...text("Answer in French.")] },
        { role: "user", content: text("Weather in Paris?"), name: "ann" },
        { role: "assistant", content: [{ type: "reasoning", text: "think" }], toolCalls: [{ id: "call_1", name: "weather", arguments: '{"city":"Paris"}' }] },
        { role: "tool", toolCallId: "call_1", content: text("18°C") },
      ],
    });
    expect(inputs).toEqual({
      messages: [
        { role: "system", content: "Be brief.\nAnswer in French." },
        { role: "user", content: "Weather in Paris?", name: "ann" },
        { role: "assistant", content: "", tool_calls: [{ id: "call_1", type: "function", function: { name: "weather", arguments: '{"city":"Paris"}' } }] },
        { role: "tool", tool_call_id: "call_1", content: "18°C" },
      ],
    });
    expect(inputs).not.toHaveProperty("model");
  });

  it("sends images as OpenAI parts, which the vision models take", () => {
    const inputs = encode({ messages: [{ role: "user", content: [...text("what is this"), { type: "image", url: "data:image/png;base64,AAAA", detail: "low" }] }] });
    expect(inputs.messages).toEqual([{ role: "user", content: [{ type: "text", text: "what is this" }, { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } }] }]);
  });

  it("maps the output cap, sampling, tools, tool choice, JSON mode and streaming to the inputs' own fields", () => {
    const inputs = encode({
      stream: true,
      maxOutputTokens: 300,
      temperature: 1.5,
      topP: 0.9,
      topK: 40,
      seed: 7,
      presencePenalty: 0.1,
      frequencyPenalty: 0.2,
      tools: [{ name: "weather", description: "Current weather", parameters: { type: "object", properties: { city: { type: "string" } } }, strict: true }],
      toolChoice: { type: "tool", name: "weather" },
      responseFormat: { type: "json_schema", name: "answer", schema: { type: "object", properties: { a: { type: "string" } } }, strict: true },
    });
    expect(inputs).toMatchObject({
      stream: true,
      max_tokens: 300,
      temperature: 1.5,
      top_p: 0.9,
      top_k: 40,
      seed: 7,
      presence_penalty: 0.1,
      frequency_penalty: 0.2,
      tools: [{ type: "function", function: { name: "weather", description: "Current weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }],
      tool_choice: { type: "function", function: { name: "weather" } },
      // The bare schema: no OpenAI name/strict envelope.
      response_format: { type: "json_schema", json_schema: { type: "object", properties: { a: { type: "string" } } } },
    });
    expect(inputs).not.toHaveProperty("stream_options");
    expect(encode({ toolChoice: { type: "required" }, responseFormat: { type: "json_object" } })).toMatchObject({ tool_choice: "required", response_format: { type: "json_object" } });
  });

  it("carries only the features the inputs have fields for", () => {
    for (const f of ["top_k", "seed", "presence_penalty", "frequency_penalty", "temperature_above_1", "json_object", "json_schema"] as const) expect(codec.carries.has(f), f).toBe(true);
    for (const f of ["stop_sequences", "reasoning_effort", "reasoning_budget", "parallel_tool_calls", "metadata", "verbosity", "openai_service_tier", "tool_result_error"] as const) expect(codec.carries.has(f), f).toBe(false);
    expect(codec.rejectedBeforeProcessing).toEqual(new Set([429]));
  });
});

describe("workers-ai buffered answers", () => {
  it("reads the native shape with its usage", () => {
    expect(codec.decodeResponse({ response: "Bonjour !", usage: { prompt_tokens: 12, completion_tokens: 4, total_tokens: 16 } })).toEqual({
      text: "Bonjour !",
      toolCalls: [],
      stopReason: "end_turn",
      usage: { inputTokens: 12, outputTokens: 4, cachedInputTokens: undefined, cacheWriteInputTokens: undefined, reasoningTokens: undefined, source: "provider" },
    });
  });

  it("leaves usage unknown, never zero, when the output has none", () => {
    expect(codec.decodeResponse({ response: "ok" }).usage).toBeUndefined();
  });

  it("reads both tool call shapes: OpenAI's, and the older one whose arguments are an object (given an id)", () => {
    const r = codec.decodeResponse({
      response: null,
      tool_calls: [
        { id: "chatcmpl-tool-1", type: "function", function: { name: "weather", arguments: '{"city":"Paris"}' } },
        { name: "time", arguments: { zone: "CET" } },
      ],
    });
    expect(r.stopReason).toBe("tool_use");
    expect(r.text).toBe("");
    expect(r.toolCalls[0]).toEqual({ id: "chatcmpl-tool-1", name: "weather", arguments: '{"city":"Paris"}' });
    expect(r.toolCalls[1]).toMatchObject({ name: "time", arguments: '{"zone":"CET"}' });
    expect(r.toolCalls[1]!.id).toMatch(/^call_[0-9a-f]{32}$/);
  });

  it("writes out a response JSON mode already parsed, and reads a finish reason where the model gives one", () => {
    expect(codec.decodeResponse({ response: { a: "b" } }).text).toBe('{"a":"b"}');
    expect(codec.decodeResponse({ response: "cut", finish_reason: "length" }).stopReason).toBe("max_tokens");
  });

  it("reads an OpenAI chat completion with the Chat decoder", () => {
    const r = codec.decodeResponse({ id: "x", object: "chat.completion", choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop" }], usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } });
    expect(r).toMatchObject({ text: "hi", stopReason: "end_turn", usage: { inputTokens: 3, outputTokens: 1 } });
  });

  it("refuses what is no answer as upstream_protocol_error", () => {
    for (const body of [null, "text", {}, { response: "x", usage: { prompt_tokens: -1, completion_tokens: 1 } }, { tool_calls: [{ arguments: {} }] }]) {
      expect(refusal(() => codec.decodeResponse(body)).code, JSON.stringify(body)).toBe("upstream_protocol_error");
    }
  });
});

/** The neutral events of SSE text fed in the given chunks, as the stream pipeline feeds them. */
function decode(chunks: readonly Uint8Array[]): NeutralEvent[] {
  const decoder = codec.createStreamDecoder();
  const utf8 = new TextDecoder();
  const out: NeutralEvent[] = [];
  const parser = createParser({ onEvent: (e) => out.push(...decoder.decode({ event: e.event, data: e.data })) });
  for (const c of chunks) parser.feed(utf8.decode(c, { stream: true }));
  parser.feed(utf8.decode());
  out.push(...decoder.finish());
  return out;
}
const sse = (...events: readonly unknown[]) => events.map((e) => `data: ${typeof e === "string" ? e : JSON.stringify(e)}\n\n`).join("");
const bytes = (s: string) => new TextEncoder().encode(s);

describe("workers-ai streams", () => {
  const native = sse({ response: "héllo ", p: "abc" }, { response: "日本 🙂" }, { response: "", usage: { prompt_tokens: 9, completion_tokens: 5, total_tokens: 14 } }, "[DONE]");

  it("decodes text pieces, then the stop and the usage of the last piece at [DONE]", () => {
    expect(decode([bytes(native)])).toEqual([
      { type: "start" },
      { type: "text", text: "héllo " },
      { type: "text", text: "日本 🙂" },
      { type: "stop", reason: "end_turn" },
      { type: "usage", usage: { inputTokens: 9, outputTokens: 5, cachedInputTokens: undefined, cacheWriteInputTokens: undefined, reasoningTokens: undefined, source: "provider" } },
    ]);
  });

  it("decodes the same events however the bytes are split: inside characters, lines and CRLF pairs", () => {
    const r = mulberry32(0xa1);
    for (const text of [native, native.replaceAll("\n", "\r\n")]) {
      const all = bytes(text);
      const whole = decode([all]);
      for (let run = 0; run < 300; run++) {
        const chunks: Uint8Array[] = [];
        for (let i = 0; i < all.length; ) {
          const n = 1 + Math.floor(r.next() * 7);
          chunks.push(all.subarray(i, i + n));
          i += n;
        }
        expect(decode(chunks)).toEqual(whole);
      }
    }
  });

  it("reports a stream that ends without [DONE] as cut, never as finished", () => {
    const events = decode([bytes(sse({ response: "half" }))]);
    expect(events.at(-1)).toEqual({ type: "error", code: "upstream_stream_cut", message: expect.any(String) });
    expect(events.some((e) => e.type === "stop")).toBe(false);
  });

  it("reports an unreadable piece as a protocol error and reads nothing after it", () => {
    const events = decode([bytes(sse({ response: "a" }, "{not json", { response: "b" }, "[DONE]"))]);
    expect(events).toEqual([{ type: "start" }, { type: "text", text: "a" }, { type: "error", code: "upstream_protocol_error", message: expect.any(String) }]);
  });

  it("decodes OpenAI-style tool call pieces: start with id and name, argument fragments, the empty closing piece", () => {
    const events = decode([
      bytes(
        sse(
          { response: "", tool_calls: [{ index: 0, id: "call_w", type: "function", function: { name: "weather" } }] },
          { tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] },
          { tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] },
          { tool_calls: [{ id: null, type: null, function: { name: null, arguments: null } }] },
          { response: "", usage: { prompt_tokens: 20, completion_tokens: 8, total_tokens: 28 } },
          "[DONE]",
        ),
      ),
    ]);
    expect(events).toEqual([
      { type: "start" },
      { type: "tool_call_start", index: 0, id: "call_w", name: "weather" },
      { type: "tool_call_args", index: 0, delta: '{"city":' },
      { type: "tool_call_args", index: 0, delta: '"Paris"}' },
      { type: "stop", reason: "tool_use" },
      { type: "usage", usage: expect.objectContaining({ inputTokens: 20, outputTokens: 8 }) },
    ]);
  });

  it("decodes whole calls of the older shape, one index each", () => {
    const events = decode([bytes(sse({ tool_calls: [{ name: "a", arguments: { x: 1 } }, { name: "b", arguments: {} }] }, "[DONE]"))]);
    expect(events.filter((e) => e.type.startsWith("tool_call"))).toEqual([
      { type: "tool_call_start", index: 0, id: expect.stringMatching(/^call_/), name: "a" },
      { type: "tool_call_args", index: 0, delta: '{"x":1}' },
      { type: "tool_call_start", index: 1, id: expect.stringMatching(/^call_/), name: "b" },
      { type: "tool_call_args", index: 1, delta: "{}" },
    ]);
  });

  it("hands a stream of OpenAI chunks to the Chat decoder", () => {
    const events = decode([
      bytes(sse({ id: "x", object: "chat.completion.chunk", choices: [{ index: 0, delta: { role: "assistant", content: "Hi" }, finish_reason: null }] }, { id: "x", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] }, "[DONE]")),
    ]);
    expect(events).toEqual([{ type: "start" }, { type: "text", text: "Hi" }, { type: "stop", reason: "end_turn" }]);
    expect(decode([bytes(sse({ id: "x", choices: [{ index: 0, delta: { content: "Hi" }, finish_reason: null }] }))]).at(-1)).toMatchObject({ type: "error", code: "upstream_stream_cut" });
  });
});

describe("workers-ai embeddings", () => {
  const wire = codec.embeddings!;
  const req = (over: Partial<NeutralEmbeddingRequest>): NeutralEmbeddingRequest => ({ model: "sluice-embed", inputs: ["a"], encodingFormat: "float", ...over });

  it("sends one text as a string and a batch as a list", () => {
    expect(wire.encodeRequest(req({ inputs: ["hello"] }), "@cf/baai/bge-base-en-v1.5")).toEqual({ text: "hello" });
    expect(wire.encodeRequest(req({ inputs: ["a", "b"], user: "u-1" }), "@cf/baai/bge-base-en-v1.5")).toEqual({ text: ["a", "b"] });
  });

  it("refuses token ids and a shortened size, which the models cannot take", () => {
    expect(refusal(() => wire.encodeRequest(req({ inputs: [[1, 2, 3]] }), "m"))).toMatchObject({ code: "invalid_request", param: "input" });
    expect(refusal(() => wire.encodeRequest(req({ dimensions: 256 }), "m"))).toMatchObject({ code: "invalid_request", param: "dimensions" });
  });

  it("reads one vector per input in order, with usage unknown unless reported", () => {
    const r = wire.decodeResponse({ shape: [2, 3], data: [[0.5, -1, 0.25], [1, 2, 3]], pooling: "mean" }, 2);
    expect(r.vectors.map((v) => Array.from(v))).toEqual([[0.5, -1, 0.25], [1, 2, 3]]);
    expect(r.inputTokens).toBeUndefined();
    expect(wire.decodeResponse({ shape: [1, 1], data: [[1]], usage: { prompt_tokens: 4 } }, 1).inputTokens).toBe(4);
  });

  it("refuses a wrong count or a vector that is not one", () => {
    for (const [body, n] of [[{ data: [[1]] }, 2], [{ data: [[1], []] }, 2], [{ data: [[1, "x"]] }, 1], [{ shape: [1, 1] }, 1]] as const) {
      expect(refusal(() => wire.decodeResponse(body, n)).code, JSON.stringify(body)).toBe("upstream_protocol_error");
    }
  });
});
