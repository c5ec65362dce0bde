import { describe, expect, it } from "vitest";
import { zodOnly } from "../../../src/protocol/fast-guard.ts";
import { invalidRequestFromZod } from "../../../src/protocol/invalid-request.ts";
import type { NeutralEvent } from "../../../src/protocol/neutral.ts";
import { chatRequestToNeutral, decodeChatRequest } from "../../../src/protocol/openai-chat/decode-request.ts";
import { fastChatRequest } from "../../../src/protocol/openai-chat/request-guard.ts";
import { chatMessageSchema, chatRequestSchema } from "../../../src/protocol/openai-chat/request-schema.ts";
import { chatResponseSchema, chatResponseToNeutral, decodeChatResponse, fastChatResponse } from "../../../src/protocol/openai-chat/response.ts";
import { chatChunkSchema, fastChatChunk, readChatChunk } from "../../../src/protocol/openai-chat/stream-chunk.ts";
import { chatStreamDecoder, createChatStreamDecoder } from "../../../src/protocol/openai-chat/stream.ts";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import { emptyTally, expectGuardWithinZod, keysOf, mutants, outcome, show, substitutions } from "./guard-corpus.ts";
import { deltaChunk, usageChunk } from "./sse-helpers.ts";

// ---- stream chunks ----------------------------------------------------------------------------

const fullUsage = {
  prompt_tokens: 20,
  completion_tokens: 7,
  total_tokens: 27,
  prompt_tokens_details: { cached_tokens: 16, cache_write_tokens: 2, audio_tokens: 0 },
  completion_tokens_details: { reasoning_tokens: 3, accepted_prediction_tokens: 0 },
};

/** Chunks as providers send them, every field the decoder reads in some form. */
const chunkSeeds: readonly Record<string, unknown>[] = [
  deltaChunk({ role: "assistant", content: "", refusal: null }),
  deltaChunk({ content: "Hello" }),
  deltaChunk({ reasoning_content: "Think", content: null }),
  deltaChunk({ role: null, content: null, reasoning_content: null, tool_calls: null }),
  deltaChunk({ tool_calls: [{ index: 0, id: "call_a", type: "function", function: { name: "get_weather", arguments: "" } }] }),
  deltaChunk({ tool_calls: [{ index: 0, function: { arguments: '{"ci' } }] }),
  deltaChunk({ tool_calls: [{ index: 1, id: null, function: null }, { index: 2, id: "call_c", function: { name: null, arguments: null } }] }),
  deltaChunk({}, "stop"),
  deltaChunk({ content: "end" }, "tool_calls"),
  { ...deltaChunk({ content: "x" }), usage: null },
  usageChunk(fullUsage),
  usageChunk({ prompt_tokens: 0, completion_tokens: 0 }),
  usageChunk({ prompt_tokens: 5, completion_tokens: 1, prompt_tokens_details: null, completion_tokens_details: null }),
  { id: "c", choices: [{ index: 0, delta: null, finish_reason: null }] },
  { id: "c", choices: [{ index: 0, finish_reason: "length" }, { index: 1, delta: { content: "second" }, finish_reason: null }] },
  { object: "chat.completion.chunk" },
  { error: { message: "overloaded", type: "server_error" } },
  { error: {} },
];

/**
 * An own `__proto__` key, which only JSON.parse makes: zod drops it from its copy and the guard
 * returns the input as it is, so these are compared by what the decoder makes of them.
 */
const protoChunks: readonly string[] = [
  '{"__proto__":{"choices":5},"choices":[]}',
  '{"choices":[{"delta":{"content":"a","__proto__":{"content":1}}}]}',
];

/** Event text the mutator does not make: not JSON objects, bad later choices, null where only absence is allowed. */
const rawChunks: readonly string[] = [
  "null",
  "[]",
  "1",
  '"text"',
  "{}",
  '{"choices":[{"delta":{"content":"a"}},{"delta":{"content":5}}]}',
  '{"choices":[{"delta":{"tool_calls":[{"index":0},{"index":-1}]}}]}',
  '{"choices":[{"delta":{"tool_calls":[{"index":1.5}]}}]}',
  '{"choices":[{"delta":{"tool_calls":[{"index":9007199254740992}]}}]}',
  '{"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":null}}',
  '{"usage":{"prompt_tokens":1,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":null}}}',
  '{"error":null}',
  '{"choices":null}',
];

const chunkPool = [...keysOf(chunkSeeds), ...Object.keys(chatChunkSchema.shape)];
const chunkCorpus: readonly unknown[] = [
  ...chunkSeeds,
  ...rawChunks.map((t) => JSON.parse(t) as unknown),
  ...chunkSeeds.flatMap((s) => substitutions(s, chunkPool)),
  ...mutants(chunkSeeds, 4000, 0x5eed_c4a7, chunkPool),
];

/** Feeds the same events to the public decoder and to one that reads chunks with zod alone. */
function bothDecoders(events: readonly string[]): { guarded: NeutralEvent[]; zod: NeutralEvent[] } {
  const run = (d: ReturnType<typeof createChatStreamDecoder>) => {
    const out: NeutralEvent[] = [];
    for (const data of events) out.push(...d.decode({ data }));
    out.push(...d.finish());
    return out;
  };
  return { guarded: run(createChatStreamDecoder()), zod: run(chatStreamDecoder(zodOnly(chatChunkSchema))) };
}

describe("openai-chat stream chunk guard", () => {
  it("vouches for every realistic chunk, so the common stream skips zod", () => {
    for (const seed of chunkSeeds) expect(fastChatChunk(seed), show(seed)).toBe(seed);
  });

  it("never vouches for a chunk zod rejects, and agrees with zod's value whenever it vouches", () => {
    const tally = emptyTally();
    for (const input of chunkCorpus) expectGuardWithinZod(fastChatChunk, chatChunkSchema, input, tally);
    // Both sides of the line were exercised, not just valid input.
    expect(tally.fast).toBeGreaterThan(1000);
    expect(tally.rejected).toBeGreaterThan(1000);
  });

  it("reads exactly what zod reads: the same chunk or the same refusal for every input", () => {
    for (const input of chunkCorpus) {
      const parsed = chatChunkSchema.safeParse(input);
      const read = readChatChunk(input);
      expect(read === undefined, show(input)).toBe(!parsed.success);
      if (parsed.success) expect(read).toEqual(parsed.data);
    }
  });

  it("decodes every stream to the same neutral events as zod alone, wherever the odd chunk sits", () => {
    const before = JSON.stringify(deltaChunk({ role: "assistant", content: "" }));
    const after = [JSON.stringify(deltaChunk({ content: "more" })), JSON.stringify(deltaChunk({}, "stop")), JSON.stringify(usageChunk(fullUsage)), "[DONE]"];
    const texts = [...chunkCorpus.map((c) => JSON.stringify(c) ?? "undefined"), ...rawChunks, ...protoChunks, "not json"];
    let protocolErrors = 0;
    for (const text of texts) {
      for (const events of [[text, "[DONE]"], [before, text, ...after]]) {
        const { guarded, zod } = bothDecoders(events);
        expect(guarded, text).toEqual(zod);
        if (guarded.some((e) => e.type === "error" && e.code === "upstream_protocol_error")) protocolErrors++;
      }
    }
    expect(protocolErrors).toBeGreaterThan(1000);
  });
});

// ---- buffered provider responses --------------------------------------------------------------

const body = (choices: unknown[], extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  id: "chatcmpl-P",
  object: "chat.completion",
  created: 1_111_111_111,
  model: "provider-model",
  system_fingerprint: "fp_1",
  choices,
  usage: { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17 },
  ...extra,
});

const responseSeeds: readonly Record<string, unknown>[] = [
  body([{ index: 0, message: { role: "assistant", content: "Hello.", refusal: null, annotations: [] }, logprobs: null, finish_reason: "stop" }]),
  body(
    [
      {
        index: 0,
        message: {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } },
            { id: "call_2", type: "function", function: { name: "get_time", arguments: "{}" } },
          ],
        },
        finish_reason: "tool_calls",
      },
    ],
    { usage: fullUsage },
  ),
  body([{ message: { content: null, refusal: "I can't." }, finish_reason: "content_filter" }], { usage: null }),
  body([{ message: {}, finish_reason: null }, { message: { content: "second" } }], { id: undefined }),
  { choices: [{ message: { content: "bare", tool_calls: null } }] },
];

const responsePool = [...keysOf(responseSeeds), ...Object.keys(chatResponseSchema.shape)];
const responseCorpus: readonly unknown[] = [
  ...responseSeeds,
  ...responseSeeds.flatMap((s) => substitutions(s, responsePool)),
  ...mutants(responseSeeds, 3000, 0x5eed_b0d7, responsePool),
  { choices: [] },
];

/** The decoding before the guard: zod, then the same mapping. */
const zodResponse = (input: unknown) => {
  const parsed = chatResponseSchema.safeParse(input);
  if (!parsed.success) {
    throw new GatewayError("upstream_protocol_error", "The provider returned a response the gateway could not read.", { cause: parsed.error });
  }
  return chatResponseToNeutral(parsed.data);
};

describe("openai-chat buffered response guard", () => {
  it("vouches for every realistic body", () => {
    for (const seed of responseSeeds) expect(fastChatResponse(seed), show(seed)).toBe(seed);
  });

  it("never vouches for a body zod rejects; decodeChatResponse gives the same response or error as zod alone", () => {
    const tally = emptyTally();
    for (const input of responseCorpus) {
      expectGuardWithinZod(fastChatResponse, chatResponseSchema, input, tally);
      expect(outcome(() => decodeChatResponse(input)), show(input)).toEqual(outcome(() => zodResponse(input)));
    }
    expect(tally.fast).toBeGreaterThan(500);
    expect(tally.rejected).toBeGreaterThan(500);
  });

  it("decodes a body with an own __proto__ key (which zod drops) the same either way", () => {
    const input = JSON.parse('{"__proto__":{"choices":[]},"choices":[{"message":{"content":"x"}}]}') as unknown;
    expect(fastChatResponse(input)).toBe(input);
    expect(decodeChatResponse(input)).toEqual(zodResponse(input));
  });
});

// ---- client requests --------------------------------------------------------------------------

/** Requests inside the guard's subset. */
const simpleRequests: readonly Record<string, unknown>[] = [
  { model: "public-model", messages: [{ role: "user", content: "hi" }] },
  {
    model: "public-model",
    messages: [
      { role: "system", content: "Be brief." },
      { role: "developer", content: "Use metric units.", name: "ops" },
      { role: "user", content: "Weather?", name: "ana" },
      { role: "assistant", content: "Where?" },
      { role: "assistant", content: "", name: "bot" },
      { role: "user", content: "" },
    ],
    stream: true,
    stream_options: { include_usage: true, include_obfuscation: false },
    max_tokens: 256,
    temperature: 0.7,
    top_p: 1,
    user: "user-1",
    n: 1,
  },
  {
    model: "m",
    messages: [{ role: "user", content: "go" }],
    stream: false,
    max_completion_tokens: 100,
    presence_penalty: -2,
    frequency_penalty: 2,
    seed: -42,
    stop: ["\n\n", "END", "x", "y"],
    reasoning_effort: "low",
    logprobs: false,
    store: null,
  },
  {
    model: "m",
    messages: [{ role: "user", content: "go" }],
    stream: null,
    stream_options: null,
    max_tokens: null,
    max_completion_tokens: null,
    temperature: null,
    top_p: null,
    presence_penalty: null,
    frequency_penalty: null,
    seed: null,
    stop: null,
    reasoning_effort: null,
    n: null,
    logprobs: null,
    store: null,
  },
  { model: "m", messages: [{ role: "user", content: "go" }], stop: "STOP", temperature: 2, top_p: 0 },
  // Valid to zod and the guard, refused after validation: both paths must throw the same error.
  { model: "m", messages: [{ role: "user", content: "go" }], max_tokens: 10, max_completion_tokens: 20 },
  { model: "m", messages: [{ role: "user", content: "go" }], stream: false, stream_options: { include_usage: true } },
  { model: "m", messages: [{ role: "tool", content: "42", tool_call_id: "call_1" }] },
];

/** Valid requests outside the subset (zod decides them); mutants of these cross into it. */
const richRequests: readonly Record<string, unknown>[] = [
  {
    model: "m",
    messages: [
      { role: "user", content: [{ type: "text", text: "what is this?" }, { type: "image_url", image_url: { url: "https://x/cat.png", detail: "high" } }] },
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "look", arguments: "{}" } }] },
      { role: "tool", content: [{ type: "text", text: "a cat" }], tool_call_id: "call_1" },
      { role: "assistant", content: [{ type: "refusal", refusal: "no" }], refusal: null },
    ],
    tools: [{ type: "function", function: { name: "look", description: "Looks.", parameters: { type: "object" }, strict: true } }],
    tool_choice: { type: "function", function: { name: "look" } },
    parallel_tool_calls: false,
  },
  {
    model: "m",
    messages: [{ role: "system", content: [{ type: "text", text: "sys" }] }, { role: "user", content: "hi" }],
    response_format: { type: "json_schema", json_schema: { name: "out", schema: { type: "object" }, strict: null } },
    metadata: { team: "a" },
    service_tier: "flex",
    verbosity: "low",
    prompt_cache_key: "k",
    prompt_cache_retention: "24h",
    safety_identifier: "s",
  },
];

const requestSeeds = [...simpleRequests, ...richRequests];
const messageKeys = [...new Set(chatMessageSchema.options.flatMap((o) => Object.keys(o.shape)))];
const requestPool = [...new Set([...keysOf(requestSeeds), ...Object.keys(chatRequestSchema.shape), ...messageKeys])];
const requestCorpus: readonly unknown[] = [
  ...requestSeeds,
  ...requestSeeds.flatMap((s) => substitutions(s, requestPool)),
  ...mutants(requestSeeds, 5000, 0x5eed_12e9, requestPool),
  JSON.parse('{"__proto__":{"x":1},"model":"m","messages":[{"role":"user","content":"hi"}]}') as unknown,
  JSON.parse('{"model":"m","messages":[{"role":"user","content":"hi","__proto__":{}}]}') as unknown,
  // Holes: `every` would skip them, zod reads them as undefined.
  { model: "m", messages: [{ role: "user", content: "a" }, , { role: "user", content: "b" }] },
  { model: "m", messages: [{ role: "user", content: "a" }], stop: ["a", , "b"] },
];

/** The decoding before the guard: zod with reportInput, then the same mapping. */
const zodRequest = (input: unknown) => {
  const parsed = chatRequestSchema.safeParse(input, { reportInput: true });
  if (!parsed.success) throw invalidRequestFromZod(parsed.error);
  return chatRequestToNeutral(parsed.data);
};

describe("openai-chat request guard", () => {
  it("vouches for every request in its subset and for none outside it", () => {
    for (const seed of simpleRequests) expect(fastChatRequest(seed), show(seed)).toBe(seed);
    for (const seed of richRequests) expect(fastChatRequest(seed), show(seed)).toBeUndefined();
  });

  it("never vouches for a body zod rejects, and agrees with zod's value whenever it vouches", () => {
    const tally = emptyTally();
    for (const input of requestCorpus) expectGuardWithinZod(fastChatRequest, chatRequestSchema, input, tally);
    expect(tally.fast).toBeGreaterThan(1000);
    expect(tally.rejected).toBeGreaterThan(1000);
    expect(tally.deferredValid).toBeGreaterThan(100);
  });

  it("decodeChatRequest gives the same neutral request or the same client error as zod alone", () => {
    for (const input of requestCorpus) {
      expect(outcome(() => decodeChatRequest(input)), show(input)).toEqual(outcome(() => zodRequest(input)));
    }
  });

  it("accepts no top-level or message key the strict schema does not know", () => {
    const base = { model: "m", messages: [{ role: "user", content: "hi" }] };
    const values: unknown[] = [null, undefined, true, false, 0, 1, 2, -1, 0.5, 3, "", "x", "low", [], ["a"], {}];
    const tally = emptyTally();
    for (const key of [...Object.keys(chatRequestSchema.shape), ...messageKeys, "extra", "functions", "top_k"]) {
      for (const v of values) {
        expectGuardWithinZod(fastChatRequest, chatRequestSchema, { ...base, [key]: v }, tally, key);
        for (const role of ["system", "developer", "user", "assistant", "tool"]) {
          const m = { role, content: "c", ...(role === "tool" ? { tool_call_id: "t" } : {}), [key]: v };
          expectGuardWithinZod(fastChatRequest, chatRequestSchema, { ...base, messages: [m] }, tally, `${role}.${key}`);
        }
      }
    }
    expect(tally.fast).toBeGreaterThan(100);
  });

  it("checks every key zod reads, even one a `for...in` walk would not see", () => {
    const hidden = <T extends object>(o: T, key: string, value: unknown): T => Object.defineProperty(o, key, { value, enumerable: false });
    const inputs: unknown[] = [];
    for (const value of [5, "x", null, {}, [], "low", 1]) {
      for (const key of Object.keys(chatRequestSchema.shape)) inputs.push(hidden({ model: "m", messages: [{ role: "user", content: "hi" }] }, key, value));
      for (const key of messageKeys) {
        for (const role of ["system", "developer", "user", "assistant", "tool"]) {
          const m = hidden({ role, content: "c", ...(role === "tool" ? { tool_call_id: "t" } : {}) }, key, value);
          inputs.push({ model: "m", messages: [m] });
        }
      }
    }
    let rejected = 0;
    for (const input of inputs) {
      // A hidden key is not copied as hidden by zod, so compare acceptance and the decoded request, not the raw values.
      const zodAccepts = chatRequestSchema.safeParse(input).success;
      if (fastChatRequest(input) !== undefined) expect(zodAccepts, show(input)).toBe(true);
      if (!zodAccepts) rejected++;
      expect(outcome(() => decodeChatRequest(input))).toEqual(outcome(() => zodRequest(input)));
    }
    expect(rejected).toBeGreaterThan(100);
  });
});
