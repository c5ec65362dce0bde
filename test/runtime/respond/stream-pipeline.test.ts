import { describe, expect, it } from "vitest";
import type { AttemptRecord } from "../../../src/context/attempt-record.ts";
import { createClientStream, MAX_SSE_BUFFER_CHARS } from "../../../src/respond/stream-pipeline.ts";
import type { ResponseStamp } from "../../../src/protocol/codec.ts";
import type { NeutralRequest } from "../../../src/protocol/neutral.ts";
import { openAiChatCodec } from "../../../src/protocol/openai-chat/index.ts";
import { startedAttempt, streamAttemptRecord } from "../support/attempt-scope.ts";
import { deltaChunk, parseClientSse, providerSse, usageChunk, type ClientEvent } from "../protocol/sse-helpers.ts";
import { mulberry32 } from "../traffic/helpers.ts";

/** The times streamAttemptRecord() opens its attempt with. */
const STARTED_AT = 1_000;
const HEADERS_AT = 1_040;
const DEADLINE_AT = 60_000;
const stamp: ResponseStamp = { id: "gw-7", created: 1_760_000_000, model: "public-model" };
const enc = new TextEncoder();

/** A clock that moves only when the test (or the fake upstream) sets it. */
class FakeClock {
  t = HEADERS_AT;
  now = (): number => this.t;
}


interface Upstream {
  readonly stream: ReadableStream<Uint8Array>;
  /** Reasons passed to the source's cancel, one entry per call. */
  readonly cancels: unknown[];
  /** How many chunks the pipeline has pulled so far. */
  pulled(): number;
}

interface UpstreamOptions {
  /** Error the stream after its chunks instead of closing it. */
  readonly errorAtEnd?: boolean;
  /** Never close: after the chunks, pulls hang until cancelled. */
  readonly hang?: boolean;
  /** Called before chunk `i` is handed over (i === chunks.length for the end/error). */
  readonly beforeChunk?: (i: number) => void;
}

/** A provider body: one chunk per pull, so the pipeline's pull loop is exercised chunk by chunk. */
function upstreamOf(chunks: readonly (string | Uint8Array)[], opts: UpstreamOptions = {}): Upstream {
  const cancels: unknown[] = [];
  let i = 0;
  const stream = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        opts.beforeChunk?.(i);
        if (i < chunks.length) {
          const c = chunks[i++]!;
          controller.enqueue(typeof c === "string" ? enc.encode(c) : c);
          return;
        }
        i++;
        if (opts.hang) return new Promise<void>(() => {});
        if (opts.errorAtEnd) controller.error(new Error("connection reset by peer"));
        else controller.close();
      },
      cancel(reason) {
        cancels.push(reason);
      },
    },
    { highWaterMark: 0 },
  );
  return { stream, cancels, pulled: () => i };
}

interface Harness {
  readonly client: ReadableStream<Uint8Array>;
  readonly sink: { readonly finished: AttemptRecord[] };
  readonly context: ReturnType<typeof startedAttempt>["context"];
  readonly releases: (number | undefined)[];
  readonly clock: FakeClock;
  readonly attempt: AttemptRecord;
}

function pipeline(upstream: ReadableStream<Uint8Array>, opts: { streamUsage?: boolean; clock?: FakeClock } = {}): Harness {
  const clock = opts.clock ?? new FakeClock();
  const attempt = streamAttemptRecord();
  const started = startedAttempt(clock, attempt, { deadlineAt: DEADLINE_AT });
  const request: NeutralRequest = {
    model: "public-model",
    messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
    stream: true,
    streamUsage: opts.streamUsage ?? true,
  };
  const client = createClientStream(upstream, {
    decoder: openAiChatCodec.createStreamDecoder(),
    encoder: openAiChatCodec.createStreamEncoder(stamp, request),
    attempt: started.attempt,
    clock,
  });
  return { client, sink: { finished: started.finished }, context: started.context, releases: started.releases, clock, attempt };
}

async function readAll(stream: ReadableStream<Uint8Array>): Promise<string> {
  return new Response(stream).text();
}

/** Client events reduced to comparable values: the JSON chunk, "[DONE]" or ":comment". */
function simplify(events: ClientEvent[]): unknown[] {
  return events.map((e) => (e.kind === "done" ? "[DONE]" : e.kind === "comment" ? `:${e.text}` : e.value));
}

const deltas = (events: ClientEvent[]) =>
  events.flatMap((e) => (e.kind === "json" && Array.isArray(e.value.choices) && e.value.choices.length ? [(e.value.choices as { delta: unknown }[])[0]!.delta] : []));

const usageWire = { prompt_tokens: 11, completion_tokens: 4, total_tokens: 15, prompt_tokens_details: { cached_tokens: 8 } };
const usageNeutral = { inputTokens: 11, outputTokens: 4, cachedInputTokens: 8, reasoningTokens: undefined, source: "provider" };

/** A complete OpenAI stream, one SSE event per network chunk, with a keep-alive comment in between. */
const completeChunks = [
  `data: ${JSON.stringify(deltaChunk({ role: "assistant", content: "", refusal: null }))}\n\n`,
  ": OPENROUTER PROCESSING\n\n",
  `data: ${JSON.stringify(deltaChunk({ content: "" }))}\n\n`,
  `data: ${JSON.stringify(deltaChunk({ content: "Hello" }))}\n\n`,
  `data: ${JSON.stringify(deltaChunk({ content: ", world" }))}\n\n`,
  `data: ${JSON.stringify(deltaChunk({}, "stop"))}\n\n`,
  `data: ${JSON.stringify(usageChunk(usageWire))}\n\n`,
  "data: [DONE]\n\n",
];

describe("createClientStream: complete streams", () => {
  it("re-encodes a complete stream for the client and ends with [DONE]", async () => {
    const up = upstreamOf(completeChunks);
    const h = pipeline(up.stream);
    const text = await readAll(h.client);
    const events = parseClientSse(text);
    const head = { id: "chatcmpl-gw-7", object: "chat.completion.chunk", created: 1_760_000_000, model: "public-model" };
    const choice = (delta: unknown, finish_reason: string | null = null) => ({ ...head, choices: [{ index: 0, delta, logprobs: null, finish_reason }], usage: null });
    expect(simplify(events)).toEqual([
      choice({ role: "assistant", content: "" }),
      ":keep-alive",
      choice({ content: "Hello" }),
      choice({ content: ", world" }),
      choice({}, "stop"),
      { ...head, choices: [], usage: { prompt_tokens: 11, completion_tokens: 4, total_tokens: 15, prompt_tokens_details: { cached_tokens: 8 } } },
      "[DONE]",
    ]);
    expect(text).not.toContain("PROVIDER");
    expect(text).not.toContain("provider-model");
    expect(up.cancels).toEqual([]);
  });

  it("finishes the attempt once with success, usage, stop reason, and releases with header latency", async () => {
    const up = upstreamOf(completeChunks);
    const h = pipeline(up.stream);
    await readAll(h.client);
    expect(h.sink.finished).toHaveLength(1);
    const a = h.sink.finished[0]!;
    expect(a.outcome).toBe("success");
    expect(a.errorCode).toBeUndefined();
    expect(a.stopReason).toBe("end_turn");
    expect(a.usage).toEqual(usageNeutral);
    expect(a.endedAt).toBe(h.clock.t);
    expect(h.releases).toEqual([HEADERS_AT - STARTED_AT]);
  });

  it("sets firstContentAt at the first non-empty content delta, not the role chunk, a comment or an empty delta", async () => {
    const clock = new FakeClock();
    // Chunk i is handed over at t = 2000 + 100·i: the first non-empty text is chunk 3.
    const up = upstreamOf(completeChunks, { beforeChunk: (i) => (clock.t = 2_000 + 100 * i) });
    const h = pipeline(up.stream, { clock });
    await readAll(h.client);
    expect(h.sink.finished[0]!.firstContentAt).toBe(2_300);
  });

  it("sets firstContentAt at the first tool call when the answer is only tool calls", async () => {
    const clock = new FakeClock();
    const chunks = providerSse([
      deltaChunk({ role: "assistant", content: null }),
      deltaChunk({ tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "lookup", arguments: "" } }] }),
      deltaChunk({ tool_calls: [{ index: 0, function: { arguments: '{"q":1}' } }] }),
      deltaChunk({}, "tool_calls"),
    ]).split(/(?<=\n\n)/);
    const up = upstreamOf(chunks, { beforeChunk: (i) => (clock.t = 5_000 + i) });
    const h = pipeline(up.stream, { clock });
    const events = parseClientSse(await readAll(h.client));
    expect(deltas(events)).toEqual([
      { role: "assistant", content: "" },
      { tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "lookup", arguments: "" } }] },
      { tool_calls: [{ index: 0, function: { arguments: '{"q":1}' } }] },
      {},
    ]);
    const a = h.sink.finished[0]!;
    expect(a.outcome).toBe("success");
    expect(a.stopReason).toBe("tool_use");
    expect(a.usage).toBeUndefined();
    expect(a.firstContentAt).toBe(5_001);
    // The proposal is recorded by name only (the audit's model.tool_call_proposed), never its arguments.
    expect(a.toolCallsProposed).toEqual(["lookup"]);
  });

  it("leaves firstContentAt unset for a stream with only heartbeats and empty deltas", async () => {
    const clock = new FakeClock();
    const up = upstreamOf(
      [
        ": ping\n\n",
        `data: ${JSON.stringify(deltaChunk({ role: "assistant", content: "" }))}\n\n`,
        ": ping\n\n",
        `data: ${JSON.stringify(deltaChunk({ content: "" }, "stop"))}\n\n`,
        "data: [DONE]\n\n",
      ],
      { beforeChunk: (i) => (clock.t = 3_000 + i) },
    );
    const h = pipeline(up.stream, { clock });
    const events = parseClientSse(await readAll(h.client));
    expect(events.filter((e) => e.kind === "comment")).toHaveLength(2);
    expect(events.at(-1)).toEqual({ kind: "done" });
    expect(h.sink.finished[0]!.firstContentAt).toBeUndefined();
  });

  it("passes heartbeats through as comments and drops usage when the client did not ask for it", async () => {
    const up = upstreamOf(completeChunks);
    const h = pipeline(up.stream, { streamUsage: false });
    const text = await readAll(h.client);
    const events = parseClientSse(text);
    expect(events.filter((e) => e.kind === "comment")).toEqual([{ kind: "comment", text: "keep-alive" }]);
    expect(text).not.toContain("usage");
    expect(events.at(-1)).toEqual({ kind: "done" });
    // The attempt still records usage for accounting.
    expect(h.sink.finished[0]!.usage).toEqual(usageNeutral);
  });
});

describe("createClientStream: failures", () => {
  const lastEvent = (events: ClientEvent[]) => events.at(-1);
  const errorCodeOf = (ev: ClientEvent | undefined) =>
    ev?.kind === "json" ? (ev.value.error as { code?: unknown } | undefined)?.code : undefined;

  it("ends a stream without [DONE] with an error event, no [DONE], outcome stream_cut", async () => {
    const up = upstreamOf(completeChunks.slice(0, 6)); // through the finish chunk, but no [DONE]
    const h = pipeline(up.stream);
    // As the invoker leaves it when the headers arrive.
    h.attempt.evidence = { class: "success", reason: "ok", status: 200 };
    const text = await readAll(h.client);
    const events = parseClientSse(text);
    expect(text).not.toContain("[DONE]");
    expect(errorCodeOf(lastEvent(events))).toBe("upstream_stream_cut");
    expect(events.filter((e) => e.kind === "json" && "error" in e.value)).toHaveLength(1);
    expect(h.sink.finished).toHaveLength(1);
    expect(h.sink.finished[0]).toMatchObject({ outcome: "stream_cut", errorCode: "upstream_stream_cut", stopReason: "end_turn" });
    // The answer began and was cut: the provider may have done all of the work.
    expect(h.sink.finished[0]!.evidence).toEqual({ class: "unknown", reason: "stream_cut", status: 200 });
    // Not a success: the lease is released without a latency sample.
    expect(h.releases).toEqual([undefined]);
  });

  it("ends an upstream read error with an error event, outcome stream_cut", async () => {
    const up = upstreamOf(completeChunks.slice(0, 4), { errorAtEnd: true });
    const h = pipeline(up.stream);
    const text = await readAll(h.client);
    const events = parseClientSse(text);
    expect(deltas(events)).toEqual([{ role: "assistant", content: "" }, { content: "Hello" }]);
    expect(text).not.toContain("[DONE]");
    expect(errorCodeOf(lastEvent(events))).toBe("upstream_stream_cut");
    expect(h.sink.finished).toHaveLength(1);
    expect(h.sink.finished[0]).toMatchObject({ outcome: "stream_cut", errorCode: "upstream_stream_cut" });
  });

  it("reports a read error past the deadline as deadline_exceeded, outcome timeout", async () => {
    const clock = new FakeClock();
    const up = upstreamOf(completeChunks.slice(0, 4), {
      errorAtEnd: true,
      beforeChunk: (i) => (clock.t = i < 4 ? 2_000 + i : DEADLINE_AT),
    });
    const h = pipeline(up.stream, { clock });
    const text = await readAll(h.client);
    const events = parseClientSse(text);
    expect(text).not.toContain("[DONE]");
    expect(errorCodeOf(lastEvent(events))).toBe("deadline_exceeded");
    expect(h.sink.finished).toHaveLength(1);
    expect(h.sink.finished[0]).toMatchObject({ outcome: "timeout", errorCode: "deadline_exceeded", endedAt: DEADLINE_AT });
    expect(h.releases).toEqual([undefined]);
  });

  it("a stream the gateway's drain cuts says so (gateway_draining), and its attempt is not the backend's failure", async () => {
    let h: Harness | undefined;
    const up = upstreamOf(completeChunks, { beforeChunk: (i) => void (i === 4 && h!.context.abort("drain")) });
    h = pipeline(up.stream);
    const text = await readAll(h.client);
    expect(text).not.toContain("[DONE]");
    expect(errorCodeOf(lastEvent(parseClientSse(text)))).toBe("gateway_draining");
    expect(h.sink.finished).toHaveLength(1);
    expect(h.sink.finished[0]).toMatchObject({ outcome: "client_cancelled", errorCode: "gateway_draining" });
  });

  it("a read error just before the deadline is still a cut", async () => {
    const clock = new FakeClock();
    const up = upstreamOf(completeChunks.slice(0, 2), { errorAtEnd: true, beforeChunk: (i) => (clock.t = i < 2 ? 2_000 : DEADLINE_AT - 1) });
    const h = pipeline(up.stream, { clock });
    const events = parseClientSse(await readAll(h.client));
    expect(errorCodeOf(lastEvent(events))).toBe("upstream_stream_cut");
    expect(h.sink.finished[0]).toMatchObject({ outcome: "stream_cut" });
  });

  it("ends the stream at invalid JSON with a protocol error and stops reading the provider", async () => {
    const up = upstreamOf([...completeChunks.slice(0, 4), "data: {oops\n\n", ...completeChunks.slice(4)]);
    const h = pipeline(up.stream);
    const text = await readAll(h.client);
    const events = parseClientSse(text);
    expect(deltas(events)).toEqual([{ role: "assistant", content: "" }, { content: "Hello" }]);
    expect(errorCodeOf(lastEvent(events))).toBe("upstream_protocol_error");
    expect(text).not.toContain("[DONE]");
    expect(h.sink.finished).toHaveLength(1);
    expect(h.sink.finished[0]).toMatchObject({ outcome: "protocol_error", errorCode: "upstream_protocol_error" });
    expect(up.cancels).toHaveLength(1);
    expect(up.pulled()).toBe(5);
  });

  it("records a provider's mid-stream error event as upstream_error, not as a protocol error", async () => {
    const errorChunk = `data: ${JSON.stringify({ error: { message: "overloaded", type: "server_error" } })}\n\n`;
    const up = upstreamOf([...completeChunks.slice(0, 4), errorChunk, ...completeChunks.slice(4)]);
    const h = pipeline(up.stream);
    const text = await readAll(h.client);
    const events = parseClientSse(text);
    expect(errorCodeOf(lastEvent(events))).toBe("upstream_error");
    expect(text).not.toContain("[DONE]");
    expect(text).not.toContain("overloaded");
    expect(h.sink.finished).toHaveLength(1);
    expect(h.sink.finished[0]).toMatchObject({ outcome: "stream_cut", errorCode: "upstream_error" });
    expect(up.cancels).toHaveLength(1);
  });

  it("fails an oversized SSE event (no terminator past MAX_SSE_BUFFER_CHARS) as a protocol error", async () => {
    const piece = "x".repeat(64 * 1024);
    const pieces = Math.ceil(MAX_SSE_BUFFER_CHARS / piece.length) + 2;
    const chunks = [completeChunks[0]!, `data: {"choices":[{"delta":{"content":"`, ...Array.from({ length: pieces }, () => piece)];
    const up = upstreamOf(chunks, { hang: true });
    const h = pipeline(up.stream);
    const text = await readAll(h.client);
    const events = parseClientSse(text);
    expect(deltas(events)).toEqual([{ role: "assistant", content: "" }]);
    expect(errorCodeOf(lastEvent(events))).toBe("upstream_protocol_error");
    expect(text).not.toContain("[DONE]");
    expect(h.sink.finished).toHaveLength(1);
    expect(h.sink.finished[0]).toMatchObject({ outcome: "protocol_error", errorCode: "upstream_protocol_error" });
    expect(up.cancels).toHaveLength(1);
    // It stopped reading soon after the limit, not at the end of the (endless) body.
    expect(up.pulled()).toBeLessThanOrEqual(chunks.length);
  });

  it("accepts an event just under the size limit", async () => {
    const content = "y".repeat(MAX_SSE_BUFFER_CHARS - 1024);
    const up = upstreamOf(providerSse([deltaChunk({ content }), deltaChunk({}, "stop")]).match(/[\s\S]{1,65536}/g)!);
    const h = pipeline(up.stream);
    const events = parseClientSse(await readAll(h.client));
    expect(deltas(events)[1]).toEqual({ content });
    expect(events.at(-1)).toEqual({ kind: "done" });
    expect(h.sink.finished[0]!.outcome).toBe("success");
  });
});

describe("createClientStream: a throw inside the pipeline", () => {
  for (const where of ["decoder", "encoder"] as const) {
    it(`from the ${where}: the attempt and the request still end once, and the client sees an error`, async () => {
      const up = upstreamOf(completeChunks);
      const clock = new FakeClock();
      const started = startedAttempt(clock, streamAttemptRecord(), { deadlineAt: DEADLINE_AT });
      const req: NeutralRequest = { model: "public-model", messages: [], stream: true, streamUsage: true };
      const decoder = openAiChatCodec.createStreamDecoder();
      const encoder = openAiChatCodec.createStreamEncoder(stamp, req);
      let n = 0;
      const boom = () => {
        if (++n === 3) throw new TypeError(`${where} bug`);
      };
      const client = createClientStream(up.stream, {
        decoder: where === "decoder" ? { decode: (e) => (boom(), decoder.decode(e)), finish: () => decoder.finish() } : decoder,
        encoder: where === "encoder" ? { encode: (e) => (boom(), encoder.encode(e)), end: () => encoder.end() } : encoder,
        attempt: started.attempt,
        clock,
      });
      await expect(readAll(client)).rejects.toThrow(`${where} bug`);
      expect(started.finished).toHaveLength(1);
      expect(started.finished[0]).toMatchObject({ outcome: "gateway_error", errorCode: "internal_error" });
      expect(started.requests).toMatchObject([{ outcome: "error", errorCode: "internal_error" }]);
      // The load lease went back with the attempt, and the provider's body was cancelled.
      expect(started.releases).toEqual([undefined]);
      expect(up.cancels).toHaveLength(1);
    });
  }
});

describe("createClientStream: client cancel", () => {
  it("cancelling between chunks records client_cancelled and cancels the provider body", async () => {
    const up = upstreamOf(completeChunks);
    const h = pipeline(up.stream);
    const reader = h.client.getReader();
    const first = await reader.read();
    expect(first.done).toBe(false);
    await reader.cancel("client went away");
    expect(up.cancels).toHaveLength(1);
    expect(h.sink.finished).toHaveLength(1);
    expect(h.sink.finished[0]).toMatchObject({ outcome: "client_cancelled", errorCode: "client_closed" });
    // A client cancel is not the backend's fault: the latency sample is still reported.
    expect(h.releases).toEqual([HEADERS_AT - STARTED_AT]);
  });

  it("cancelling while a read is waiting on the provider settles once and aborts the provider", async () => {
    const up = upstreamOf(completeChunks.slice(0, 2), { hang: true });
    const h = pipeline(up.stream);
    const reader = h.client.getReader();
    await reader.read(); // role chunk
    await reader.read(); // keep-alive comment
    const pending = reader.read(); // waits on the hanging provider
    await reader.cancel(new Error("disconnect"));
    expect(await pending).toEqual({ done: true, value: undefined });
    expect(up.cancels).toHaveLength(1);
    expect(h.sink.finished).toHaveLength(1);
    expect(h.sink.finished[0]).toMatchObject({ outcome: "client_cancelled", errorCode: "client_closed" });
    // Let any in-flight pull settle; the record must not change.
    await new Promise((r) => setTimeout(r, 0));
    expect(h.sink.finished).toHaveLength(1);
    expect(h.attempt.outcome).toBe("client_cancelled");
  });

  it("a cancel through pipeTo (as the HTTP layer does) also reaches the provider", async () => {
    const up = upstreamOf(completeChunks.slice(0, 3), { hang: true });
    const h = pipeline(up.stream);
    const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
    const piped = h.client.pipeTo(writable).catch(() => {});
    const reader = readable.getReader();
    await reader.read();
    await reader.cancel("gone");
    await piped;
    expect(up.cancels).toHaveLength(1);
    expect(h.sink.finished).toHaveLength(1);
    expect(h.sink.finished[0]!.outcome).toBe("client_cancelled");
  });

  it("a cancel after the stream finished changes nothing", async () => {
    const up = upstreamOf(completeChunks);
    const h = pipeline(up.stream);
    const reader = h.client.getReader();
    for (;;) if ((await reader.read()).done) break;
    await reader.cancel("late");
    expect(h.sink.finished).toHaveLength(1);
    expect(h.sink.finished[0]!.outcome).toBe("success");
    expect(up.cancels).toEqual([]);
  });
});

/** A seeded RNG as a function, so every random case is reproducible. */
const seededRandom = (seed: number): (() => number) => {
  const r = mulberry32(seed);
  return () => r.next();
};

/** Splits `bytes` at the given sorted, distinct cut points. */
function splitAt(bytes: Uint8Array, cuts: readonly number[]): Uint8Array[] {
  const out: Uint8Array[] = [];
  let prev = 0;
  for (const c of cuts) {
    out.push(bytes.slice(prev, c));
    prev = c;
  }
  out.push(bytes.slice(prev));
  return out;
}

function randomCuts(rand: () => number, length: number): number[] {
  // Mostly a few cuts, sometimes many, so both coarse and fine fragmentation are covered.
  const n = rand() < 0.2 ? Math.floor(rand() * length) : 1 + Math.floor(rand() * 12);
  const cuts = new Set<number>();
  for (let i = 0; i < n; i++) cuts.add(1 + Math.floor(rand() * (length - 1)));
  return [...cuts].sort((a, b) => a - b);
}

const isContinuationByte = (b: number) => (b & 0xc0) === 0x80;

describe("createClientStream: property — byte boundaries never change the result", () => {
  const text = "héllo 日本 🙂";
  const call = { index: 0, id: "call_ü", type: "function", function: { name: "lookup", arguments: "" } };
  const body = [
    deltaChunk({ role: "assistant", content: "" }),
    deltaChunk({ content: text }),
    deltaChunk({ content: " — ça va? 👍🏽" }),
    deltaChunk({ tool_calls: [call] }),
    deltaChunk({ tool_calls: [{ index: 0, function: { arguments: '{"q":"日本' } }] }),
    deltaChunk({ tool_calls: [{ index: 0, function: { arguments: ' 🙂"}' } }] }),
    deltaChunk({}, "tool_calls"),
    usageChunk(usageWire),
  ];
  const fixtures: Record<string, string> = {
    "LF, one event per line pair": providerSse(body),
    "CRLF line endings": providerSse(body, { eol: "\r\n" }),
    "bare CR line endings": providerSse(body, { eol: "\r" }),
    "comments, id/retry fields, multi-line data": [
      ": hello from the provider\n\n",
      `data: ${JSON.stringify(body[0])}\n\n`,
      `: keep-alive ✓\r\n\r\n`,
      `id: 1\nretry: 3000\ndata: ${JSON.stringify(body[1])}\n\n`,
      // One JSON value spread over two data lines (joined with "\n", which JSON allows as whitespace).
      `data: {"choices":[{"index":0,"delta":{"content":"多行"},\ndata: "finish_reason":null}]}\n\n`,
      `data: ${JSON.stringify(body[2])}\r\n\r\n`,
      `data: ${JSON.stringify(body[6])}\n\n`,
      `data: ${JSON.stringify(body[7])}\n\n`,
      "data: [DONE]\n\n",
    ].join(""),
    "cut stream (no [DONE])": providerSse(body.slice(0, 4), { done: false }),
    "invalid JSON mid-stream": providerSse([body[0], body[1], "{\"choices\":[{\"delta\":{\"content\":\"é", body[2]]),
  };

  async function run(chunks: readonly Uint8Array[]) {
    const up = upstreamOf(chunks);
    const h = pipeline(up.stream);
    const out = await readAll(h.client);
    const a = h.sink.finished;
    return { events: simplify(parseClientSse(out)), outcomes: a.map((r) => [r.outcome, r.errorCode, r.stopReason, r.usage]) };
  }

  for (const [name, sse] of Object.entries(fixtures)) {
    it(`${name}: 250 random splits decode exactly like the whole body`, async () => {
      const bytes = enc.encode(sse);
      const whole = await run([bytes]);
      expect(whole.events.length).toBeGreaterThan(2);
      expect(whole.outcomes).toHaveLength(1);

      const rand = seededRandom(0x5eed ^ sse.length);
      let insideMultiByte = 0;
      const splits: number[][] = [
        Array.from({ length: bytes.length - 1 }, (_, i) => i + 1), // every single byte
      ];
      for (let i = 0; i < 250; i++) splits.push(randomCuts(rand, bytes.length));
      for (const cuts of splits) {
        insideMultiByte += cuts.filter((c) => isContinuationByte(bytes[c]!)).length;
        const got = await run(splitAt(bytes, cuts));
        expect(got, `cuts ${JSON.stringify(cuts)}`).toEqual(whole);
      }
      // The splits really did land inside UTF-8 sequences (and, for CRLF, between \r and \n).
      expect(insideMultiByte).toBeGreaterThan(50);
    });
  }

  it("the unsplit fixtures decode to the expected content", async () => {
    for (const name of ["LF, one event per line pair", "CRLF line endings", "bare CR line endings"]) {
      const up = upstreamOf([fixtures[name]!]);
      const h = pipeline(up.stream);
      const events = parseClientSse(await readAll(h.client));
      expect(deltas(events), name).toEqual([
        { role: "assistant", content: "" },
        { content: text },
        { content: " — ça va? 👍🏽" },
        { tool_calls: [{ ...call, function: { name: "lookup", arguments: "" } }] },
        { tool_calls: [{ index: 0, function: { arguments: '{"q":"日本' } }] },
        { tool_calls: [{ index: 0, function: { arguments: ' 🙂"}' } }] },
        {},
      ]);
      expect(events.at(-1), name).toEqual({ kind: "done" });
      expect(h.sink.finished[0], name).toMatchObject({ outcome: "success", stopReason: "tool_use", usage: usageNeutral });
    }
    const mixed = parseClientSse(await readAll(pipeline(upstreamOf([fixtures["comments, id/retry fields, multi-line data"]!]).stream).client));
    expect(deltas(mixed)).toEqual([{ role: "assistant", content: "" }, { content: text }, { content: "多行" }, { content: " — ça va? 👍🏽" }, {}]);
    expect(mixed.filter((e) => e.kind === "comment")).toHaveLength(2);
    expect(mixed.at(-1)).toEqual({ kind: "done" });
  });
});

describe("createClientStream: provider deviations that are not failures", () => {
  it("ignores unknown SSE fields and bad retry values, as the SSE spec says", async () => {
    const up = upstreamOf([
      `event: message\nfoo: bar\ndata: ${JSON.stringify(deltaChunk({ role: "assistant", content: "" }))}\n\n`,
      `retry: soon\ndata: ${JSON.stringify(deltaChunk({ content: "ok" }))}\n\n`,
      `data: ${JSON.stringify(deltaChunk({}, "stop"))}\n\n`,
      "data: [DONE]\n\n",
    ]);
    const h = pipeline(up.stream, { streamUsage: false });
    const events = parseClientSse(await readAll(h.client));
    expect(deltas(events)).toEqual([{ role: "assistant", content: "" }, { content: "ok" }, {}]);
    expect(events.at(-1)?.kind).toBe("done");
    expect(h.sink.finished[0]?.outcome).toBe("success");
  });

  it("gives the client a finish and [DONE] when the provider ends properly without a finish_reason", async () => {
    const up = upstreamOf([
      `data: ${JSON.stringify(deltaChunk({ role: "assistant", content: "" }))}\n\n`,
      `data: ${JSON.stringify(deltaChunk({ content: "all here" }))}\n\n`,
      "data: [DONE]\n\n",
    ]);
    const h = pipeline(up.stream, { streamUsage: false });
    const events = parseClientSse(await readAll(h.client));
    const last = events.filter((e) => e.kind === "json").at(-1);
    expect(last?.kind === "json" && (last.value.choices as { finish_reason: string }[])[0]?.finish_reason).toBe("stop");
    expect(events.at(-1)?.kind).toBe("done");
    expect(h.sink.finished[0]).toMatchObject({ outcome: "success", stopReason: "other" });
  });
});
