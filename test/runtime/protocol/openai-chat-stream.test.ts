import { describe, expect, it } from "vitest";
import type { ResponseStamp, StreamEncoder } from "../../../src/protocol/codec.ts";
import type { NeutralEvent, NeutralRequest } from "../../../src/protocol/neutral.ts";
import { openAiChatCodec } from "../../../src/protocol/openai-chat/index.ts";
import { deltaChunk, parseClientSse, usageChunk, type ClientEvent } from "./sse-helpers.ts";

const stamp: ResponseStamp = { id: "gw-1", created: 1_760_000_000, model: "public-model" };

function request(streamUsage: boolean): NeutralRequest {
  return { model: "public-model", messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }], stream: true, streamUsage };
}

/** Feeds `data` payloads (objects are JSON-encoded) to a fresh decoder; returns every event plus finish(). */
function decodeAll(payloads: readonly unknown[], finish = true): NeutralEvent[] {
  const d = openAiChatCodec.createStreamDecoder();
  const out: NeutralEvent[] = [];
  for (const p of payloads) out.push(...d.decode({ data: typeof p === "string" ? p : JSON.stringify(p) }));
  if (finish) out.push(...d.finish());
  return out;
}

function encodeAll(events: readonly NeutralEvent[], streamUsage: boolean): { text: string; encoder: StreamEncoder } {
  const encoder = openAiChatCodec.createStreamEncoder(stamp, request(streamUsage));
  let text = "";
  for (const ev of events) text += encoder.encode(ev);
  text += encoder.end();
  return { text, encoder };
}

const roleChunk = deltaChunk({ role: "assistant", content: "", refusal: null });
const usage = { prompt_tokens: 20, completion_tokens: 7, total_tokens: 27, prompt_tokens_details: { cached_tokens: 16 }, completion_tokens_details: { reasoning_tokens: 3 } };
const neutralUsage = { inputTokens: 20, outputTokens: 7, cachedInputTokens: 16, reasoningTokens: 3, source: "provider" } as const;

describe("openai-chat stream decoder", () => {
  it("decodes a text stream: role chunk, content deltas, finish, usage chunk, [DONE]", () => {
    const events = decodeAll([
      roleChunk,
      deltaChunk({ content: "Hel" }),
      deltaChunk({ content: "lo" }),
      deltaChunk({ content: "" }),
      deltaChunk({}, "stop"),
      usageChunk(usage),
      "[DONE]",
    ]);
    expect(events).toEqual([
      { type: "start" },
      { type: "text", text: "Hel" },
      { type: "text", text: "lo" },
      { type: "stop", reason: "end_turn" },
      { type: "usage", usage: neutralUsage },
    ]);
  });

  it("decodes tool-call deltas: index/id/name first, then argument pieces, for two parallel calls", () => {
    const events = decodeAll([
      deltaChunk({ role: "assistant", content: null }),
      deltaChunk({ tool_calls: [{ index: 0, id: "call_a", type: "function", function: { name: "get_weather", arguments: "" } }] }),
      deltaChunk({ tool_calls: [{ index: 0, function: { arguments: '{"ci' } }] }),
      deltaChunk({ tool_calls: [{ index: 0, function: { arguments: 'ty":"Oslo"}' } }] }),
      deltaChunk({ tool_calls: [{ index: 1, id: "call_b", type: "function", function: { name: "get_time", arguments: "{}" } }] }),
      deltaChunk({}, "tool_calls"),
      "[DONE]",
    ]);
    expect(events).toEqual([
      { type: "start" },
      { type: "tool_call_start", index: 0, id: "call_a", name: "get_weather" },
      { type: "tool_call_args", index: 0, delta: '{"ci' },
      { type: "tool_call_args", index: 0, delta: 'ty":"Oslo"}' },
      { type: "tool_call_start", index: 1, id: "call_b", name: "get_time" },
      { type: "tool_call_args", index: 1, delta: "{}" },
      { type: "stop", reason: "tool_use" },
    ]);
  });

  it("decodes reasoning_content and maps length / content_filter finishes", () => {
    expect(decodeAll([deltaChunk({ reasoning_content: "thinking" }), deltaChunk({ content: "a" }), deltaChunk({}, "length"), "[DONE]"])).toEqual([
      { type: "start" },
      { type: "reasoning", text: "thinking" },
      { type: "text", text: "a" },
      { type: "stop", reason: "max_tokens" },
    ]);
    expect(decodeAll([deltaChunk({ content: "x" }, "content_filter"), "[DONE]"])).toEqual([
      { type: "start" },
      { type: "text", text: "x" },
      { type: "stop", reason: "content_filter" },
    ]);
  });

  it("accepts a finish chunk that also carries usage", () => {
    expect(decodeAll([{ ...deltaChunk({ content: "x" }, "stop"), usage }, "[DONE]"])).toEqual([
      { type: "start" },
      { type: "text", text: "x" },
      { type: "stop", reason: "end_turn" },
      { type: "usage", usage: neutralUsage },
    ]);
  });

  it("treats a usage: null field on ordinary chunks as no usage", () => {
    const events = decodeAll([{ ...deltaChunk({ content: "x" }), usage: null }, { ...deltaChunk({}, "stop"), usage: null }, "[DONE]"]);
    expect(events.some((e) => e.type === "usage")).toBe(false);
  });

  it("reports a stream that ends without [DONE] as upstream_stream_cut on finish()", () => {
    const events = decodeAll([roleChunk, deltaChunk({ content: "partial" })]);
    expect(events.at(-1)).toMatchObject({ type: "error", code: "upstream_stream_cut" });
    // Even after a finish_reason: completeness is [DONE], nothing else.
    const afterStop = decodeAll([roleChunk, deltaChunk({ content: "x" }), deltaChunk({}, "stop"), usageChunk(usage)]);
    expect(afterStop.at(-1)).toMatchObject({ type: "error", code: "upstream_stream_cut" });
    expect(decodeAll([])).toEqual([{ type: "error", code: "upstream_stream_cut", message: expect.any(String) }]);
  });

  it("yields nothing from finish() after [DONE], and ignores events after [DONE]", () => {
    const d = openAiChatCodec.createStreamDecoder();
    d.decode({ data: JSON.stringify(deltaChunk({ content: "x" }, "stop")) });
    expect(d.decode({ data: "[DONE]" })).toEqual([]);
    expect(d.decode({ data: JSON.stringify(deltaChunk({ content: "late" })) })).toEqual([]);
    expect(d.finish()).toEqual([]);
  });

  it("turns a mid-stream error chunk into one upstream_error event and then goes quiet", () => {
    const d = openAiChatCodec.createStreamDecoder();
    expect(d.decode({ data: JSON.stringify(deltaChunk({ content: "a" })) })).toHaveLength(2);
    const err = d.decode({ data: JSON.stringify({ error: { message: "Internal: secret-host-10.0.0.3 overloaded", type: "server_error", code: 500 } }) });
    expect(err).toEqual([{ type: "error", code: "upstream_error", message: expect.any(String) }]);
    // The provider's error text is not forwarded.
    expect((err[0] as { message: string }).message).not.toContain("secret-host");
    expect(d.decode({ data: JSON.stringify(deltaChunk({ content: "b" })) })).toEqual([]);
    expect(d.finish()).toEqual([]);
  });

  it("turns invalid JSON or a malformed chunk into upstream_protocol_error", () => {
    for (const bad of ["{not json", '{"choices":"nope"}', '{"choices":[{"delta":{"content":5}}]}', '{"choices":[{"delta":{"tool_calls":[{"index":-1}]}}]}', "null"]) {
      const d = openAiChatCodec.createStreamDecoder();
      const out = d.decode({ data: bad });
      expect(out, bad).toEqual([{ type: "error", code: "upstream_protocol_error", message: expect.any(String) }]);
      expect(d.decode({ data: "[DONE]" })).toEqual([]);
      expect(d.finish()).toEqual([]);
    }
  });

  it("emits start exactly once, even when the first chunk is a usage chunk", () => {
    const events = decodeAll([usageChunk(usage), deltaChunk({ content: "a" }), deltaChunk({}, "stop"), "[DONE]"]);
    expect(events.filter((e) => e.type === "start")).toHaveLength(1);
    expect(events[0]).toEqual({ type: "start" });
  });
});

/** The JSON payloads of a parsed client stream. */
const payloads = (events: ClientEvent[]) => events.flatMap((e) => (e.kind === "json" ? [e.value] : []));

describe("openai-chat stream encoder", () => {
  const happy: NeutralEvent[] = [
    { type: "start" },
    { type: "text", text: "héllo \"quoted\"\n日本 🙂" },
    { type: "tool_call_start", index: 0, id: "call_1", name: "lookup" },
    { type: "tool_call_args", index: 0, delta: '{"q":' },
    { type: "tool_call_args", index: 0, delta: '"x"}' },
    { type: "reasoning", text: "hmm" },
    { type: "stop", reason: "tool_use" },
    { type: "usage", usage: neutralUsage },
  ];

  it("writes stamped chunks, a usage chunk and [DONE] when the client asked for usage", () => {
    const events = parseClientSse(encodeAll(happy, true).text);
    expect(events.at(-1)).toEqual({ kind: "done" });
    expect(events.filter((e) => e.kind === "done")).toHaveLength(1);
    const chunks = payloads(events);
    expect(chunks).toHaveLength(happy.length);
    for (const c of chunks) {
      expect(c.id).toBe("chatcmpl-gw-1");
      expect(c.object).toBe("chat.completion.chunk");
      expect(c.created).toBe(1_760_000_000);
      expect(c.model).toBe("public-model");
      expect(c).toHaveProperty("usage");
    }
    const deltas = chunks.slice(0, -1).map((c) => (c.choices as { delta: unknown }[])[0]!.delta);
    expect(deltas).toEqual([
      { role: "assistant", content: "" },
      { content: "héllo \"quoted\"\n日本 🙂" },
      { tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "lookup", arguments: "" } }] },
      { tool_calls: [{ index: 0, function: { arguments: '{"q":' } }] },
      { tool_calls: [{ index: 0, function: { arguments: '"x"}' } }] },
      { reasoning_content: "hmm" },
      {},
    ]);
    const finishes = chunks.slice(0, -1).map((c) => (c.choices as { finish_reason: unknown }[])[0]!.finish_reason);
    expect(finishes).toEqual([null, null, null, null, null, null, "tool_calls"]);
    for (const c of chunks.slice(0, -1)) expect(c.usage).toBeNull();
    expect(chunks.at(-1)).toEqual({
      id: "chatcmpl-gw-1",
      object: "chat.completion.chunk",
      created: 1_760_000_000,
      model: "public-model",
      choices: [],
      usage: {
        prompt_tokens: 20,
        completion_tokens: 7,
        total_tokens: 27,
        prompt_tokens_details: { cached_tokens: 16 },
        completion_tokens_details: { reasoning_tokens: 3 },
      },
    });
  });

  it("writes no usage chunk and no usage key at all when the client did not ask", () => {
    const { text, encoder } = encodeAll(happy, false);
    const events = parseClientSse(text);
    expect(events.at(-1)).toEqual({ kind: "done" });
    const chunks = payloads(events);
    expect(chunks).toHaveLength(happy.length - 1);
    for (const c of chunks) expect(c).not.toHaveProperty("usage");
    expect(text).not.toContain("usage");
    expect(encoder.encode({ type: "usage", usage: neutralUsage })).toBe("");
  });

  it("writes [DONE] only after a stop", () => {
    const { text } = encodeAll([{ type: "start" }, { type: "text", text: "cut short" }], true);
    const events = parseClientSse(text);
    expect(events.some((e) => e.kind === "done")).toBe(false);
    expect(text).not.toContain("[DONE]");
    const empty = openAiChatCodec.createStreamEncoder(stamp, request(false));
    expect(empty.end()).toBe("");
  });

  it("writes an error event and no [DONE] after an error, even following a stop", () => {
    for (const code of ["upstream_stream_cut", "upstream_protocol_error", "upstream_error", "deadline_exceeded"] as const) {
      const { text } = encodeAll(
        [{ type: "start" }, { type: "text", text: "x" }, { type: "stop", reason: "end_turn" }, { type: "error", code, message: "The stream failed." }],
        true,
      );
      const events = parseClientSse(text);
      expect(events.some((e) => e.kind === "done"), code).toBe(false);
      expect(events.at(-1)).toEqual({
        kind: "json",
        value: { error: { message: "The stream failed.", type: "server_error", param: null, code } },
      });
    }
  });

  it("writes a heartbeat as an SSE comment", () => {
    const encoder = openAiChatCodec.createStreamEncoder(stamp, request(true));
    const text = encoder.encode({ type: "heartbeat" });
    expect(text.startsWith(":")).toBe(true);
    expect(parseClientSse(text)).toEqual([{ kind: "comment", text: "keep-alive" }]);
    // A heartbeat alone neither completes nor fails the stream.
    expect(encoder.end()).toBe("");
  });

  it("round-trips: decoder output → encoder → decoder yields the same events", () => {
    const providerEvents = decodeAll(
      [
        roleChunk,
        deltaChunk({ content: "héllo 日本 🙂" }),
        deltaChunk({ tool_calls: [{ index: 0, id: "c", type: "function", function: { name: "f", arguments: "" } }] }),
        deltaChunk({ tool_calls: [{ index: 0, function: { arguments: "{}" } }] }),
        deltaChunk({}, "tool_calls"),
        usageChunk(usage),
        "[DONE]",
      ],
      true,
    );
    const { text } = encodeAll(providerEvents, true);
    const client = parseClientSse(text).map((e) => (e.kind === "done" ? "[DONE]" : e.kind === "json" ? e.value : ""));
    expect(decodeAll(client)).toEqual(providerEvents);
  });
});

describe("OpenAI Chat stream decoder: deltas of a learnt shape", () => {
  /** Each event decoded on its own (after the role chunk, which teaches no shape): no shape learnt from earlier deltas. */
  function alone(events: readonly string[]): NeutralEvent[][] {
    return events.map((data, i) => {
      if (i === 0) return [...openAiChatCodec.createStreamDecoder().decode({ data })];
      const d = openAiChatCodec.createStreamDecoder();
      d.decode({ data: events[0]! });
      return [...d.decode({ data })];
    });
  }

  const raw = (delta: Record<string, unknown>, swap?: [string, string]) => {
    const text = JSON.stringify(deltaChunk(delta));
    return swap ? text.replace(swap[0], swap[1]) : text;
  };

  it("reads each delta as parsing it alone would, whatever its string holds", () => {
    const events = [
      raw({ role: "assistant", content: "" }),
      raw({ content: "Hello" }),
      raw({ content: "" }),
      raw({ content: "é 👋 \u2028 \"quoted\" back\\slash\nline" }),
      raw({ content: "é!" }, ["é", String.raw`\u00e9`]),
      raw({ content: "ab" }, ["ab", String.raw`\ud83d\udc4b`]),
      raw({ content: "xy" }, ["xy", String.raw`\q`]),
      raw({ content: "xy" }, ['"xy"', '"x\ty"']),
      raw({ content: "xy" }, ['"xy"', '"x"y"']),
      raw({ content: 5 }),
      raw({ content: null }),
      raw({ reasoning_content: "think" }),
      raw({ reasoning_content: "more" }),
      raw({ content: "both", reasoning_content: "both" }),
      raw({ content: "x", tool_calls: [{ index: 0, function: { arguments: "{}" } }] }),
      JSON.stringify({ ...deltaChunk({ content: "extra" }), extra: 1 }),
      raw({ content: "after" }),
      JSON.stringify({ ...deltaChunk({ content: "u" }), usage: { prompt_tokens: 1, completion_tokens: 1 } }),
      JSON.stringify(deltaChunk({ content: "fin" }, "stop")),
    ];
    const d = openAiChatCodec.createStreamDecoder();
    const reference = alone(events);
    const sequential = events.map((data) => [...d.decode({ data })]);
    // A decoder stops at the first unreadable event: compare the stream up to it, then each later
    // event on its own decoder that learnt the content and reasoning shapes first.
    const firstBad = reference.findIndex((evs) => evs.some((e) => e.type === "error"));
    expect(firstBad).toBeGreaterThan(4);
    expect(sequential.slice(0, firstBad + 1)).toEqual(reference.slice(0, firstBad + 1));
    for (let i = firstBad; i < events.length; i++) {
      const learnt = openAiChatCodec.createStreamDecoder();
      for (const data of events.slice(0, 5)) learnt.decode({ data });
      learnt.decode({ data: events[11]! });
      learnt.decode({ data: events[12]! });
      expect(learnt.decode({ data: events[i]! }), `event ${i}: ${events[i]}`).toEqual(reference[i]);
    }
  });
});
