import { describe, expect, it } from "vitest";
import type { AttemptRecord } from "../../../src/context/attempt-record.ts";
import type { Codec, ResponseStamp } from "../../../src/protocol/codec.ts";
import type { NeutralRequest } from "../../../src/protocol/neutral.ts";
import { anthropicMessagesCodec } from "../../../src/protocol/anthropic-messages/index.ts";
import { openAiChatCodec } from "../../../src/protocol/openai-chat/index.ts";
import { createClientStream, MAX_SSE_BUFFER_CHARS } from "../../../src/respond/stream-pipeline.ts";
import { deltaChunk, parseClientSse, parseTypedSse, providerSse, usageChunk, type ClientEvent } from "../protocol/sse-helpers.ts";
import { startedAttempt, streamAttemptRecord } from "../support/attempt-scope.ts";

const stamp: ResponseStamp = { id: "gw-7", created: 1_760_000_000, model: "public-model" };
const enc = new TextEncoder();

class StepClock {
  t = 1_040;
  now = (): number => this.t;
}


/** A provider body handing over the given chunks one per pull; the clock steps before each. */
function upstreamOf(chunks: readonly Uint8Array[], clock: StepClock, opts: { hang?: boolean } = {}): { stream: ReadableStream<Uint8Array>; cancels: unknown[] } {
  const cancels: unknown[] = [];
  let i = 0;
  const stream = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        clock.t = 2_000 + 10 * i;
        if (i < chunks.length) return controller.enqueue(chunks[i++]!);
        if (opts.hang) return new Promise<void>(() => {});
        controller.close();
      },
      cancel(reason) {
        cancels.push(reason);
      },
    },
    { highWaterMark: 0 },
  );
  return { stream, cancels };
}

interface Run {
  readonly text: string;
  readonly events: ClientEvent[];
  readonly record: AttemptRecord;
  readonly finished: number;
  readonly cancels: unknown[];
}

/** One provider stream through the pipeline, on the full path or the pass-through. */
async function run(chunks: readonly (string | Uint8Array)[], mode: "full" | "pass", opts: { streamUsage?: boolean; hang?: boolean; codec?: Codec } = {}): Promise<Run> {
  const codec = opts.codec ?? openAiChatCodec;
  const clock = new StepClock();
  const started = startedAttempt(clock, streamAttemptRecord(), { deadlineAt: 600_000 });
  const request: NeutralRequest = {
    model: "public-model",
    messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
    stream: true,
    streamUsage: opts.streamUsage ?? true,
  };
  const up = upstreamOf(
    chunks.map((c) => (typeof c === "string" ? enc.encode(c) : c)),
    clock,
    opts,
  );
  const decoder = codec.createStreamDecoder();
  const encoder = codec.createStreamEncoder(stamp, request);
  const passThrough = mode === "pass" ? codec.createPassThrough!(stamp, request, { decoder, encoder }) : undefined;
  if (mode === "pass") expect(passThrough).toBeDefined();
  const client = createClientStream(up.stream, {
    decoder,
    encoder,
    attempt: started.attempt,
    clock,
    passThrough,
  });
  const text = await new Response(client).text();
  // Chat's events, parsed; other protocols' tests parse the text their own way.
  const events = codec === openAiChatCodec ? parseClientSse(text) : [];
  return { text, events, record: started.finished[0]!, finished: started.finished.length, cancels: up.cancels };
}

/** What the gateway knows of an attempt: what the equivalence must keep. */
function facts(r: AttemptRecord) {
  return {
    outcome: r.outcome,
    errorCode: r.errorCode,
    evidence: r.evidence,
    usage: r.usage,
    stopReason: r.stopReason,
    firstContentAt: r.firstContentAt,
    outputChars: r.outputChars,
    toolCallsProposed: r.toolCallsProposed,
  };
}

type Json = Record<string, unknown>;
const chunksOf = (events: ClientEvent[]): Json[] => events.flatMap((e) => (e.kind === "json" ? [e.value] : []));
const choiceOf = (c: Json) => (c.choices as Json[] | undefined)?.[0];

/** What a client reads from a Chat stream: text, reasoning, tool calls, finish, usage, error, ending. */
function observed(events: ClientEvent[]) {
  let text = "";
  let reasoning = "";
  const tools: Record<number, { id?: unknown; name?: unknown; args: string }> = {};
  let finish: unknown;
  let usage: unknown;
  let error: unknown;
  for (const c of chunksOf(events)) {
    if (c.error) error = c.error;
    if (c.usage) usage = c.usage;
    const choice = choiceOf(c);
    const delta = choice?.delta as Json | undefined;
    if (typeof delta?.content === "string") text += delta.content;
    if (typeof delta?.reasoning_content === "string") reasoning += delta.reasoning_content;
    for (const tc of (delta?.tool_calls as Json[] | undefined) ?? []) {
      const t = (tools[tc.index as number] ??= { args: "" });
      const fn = tc.function as Json | undefined;
      if (tc.id) t.id = tc.id;
      if (fn?.name) t.name = fn.name;
      if (typeof fn?.arguments === "string") t.args += fn.arguments;
    }
    if (choice?.finish_reason) finish = choice.finish_reason;
  }
  const done = events.some((e) => e.kind === "done");
  const last = events.at(-1);
  return { text, reasoning, tools, finish, usage, error, done, endsWithDone: last?.kind === "done", heartbeats: events.filter((e) => e.kind === "comment").length };
}

const usageWire = { prompt_tokens: 11, completion_tokens: 4, total_tokens: 15, prompt_tokens_details: { cached_tokens: 8, audio_tokens: 0 } };
const sse = (c: unknown) => `data: ${typeof c === "string" ? c : JSON.stringify(c)}\n\n`;

const complete = [
  sse(deltaChunk({ role: "assistant", content: "", refusal: null })),
  ": OPENROUTER PROCESSING\n\n",
  sse(deltaChunk({ content: "" })),
  sse(deltaChunk({ reasoning_content: "Think \"first\"\\n" })),
  sse(deltaChunk({ content: "Héllo 👋 \u2028" })),
  sse(deltaChunk({ content: ", \\u00e9 world\n" })),
  sse(deltaChunk({}, "stop")),
  sse(usageChunk(usageWire)),
  "data: [DONE]\n\n",
];

const tools = [
  sse(deltaChunk({ role: "assistant", content: null })),
  sse(deltaChunk({ tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "lookup", arguments: "" } }] })),
  sse(deltaChunk({ tool_calls: [{ index: 0, function: { arguments: '{"q":1}' } }] })),
  sse(deltaChunk({}, "tool_calls")),
  sse(usageChunk(usageWire)),
  "data: [DONE]\n\n",
];

/** Provider streams both paths must read the same way; each is one network chunk per event. */
const cases: Record<string, readonly string[]> = {
  complete,
  tools,
  "no finish reason before [DONE]": [sse(deltaChunk({ role: "assistant", content: "" })), sse(deltaChunk({ content: "Hi" })), "data: [DONE]\n\n"],
  "no usage": complete.filter((c) => !c.includes("prompt_tokens")),
  "a cut stream": complete.slice(0, 5),
  "cut after the finish": complete.slice(0, 7),
  "a provider error event": [...complete.slice(0, 5), sse({ error: { message: "overloaded", type: "server_error" } }), ...complete.slice(5)],
  "an unreadable event": [...complete.slice(0, 5), 'data: {"choices":[{"delta":{"content":"x"}}\n\n', ...complete.slice(5)],
  "an event of the wrong shape": [...complete.slice(0, 5), sse(deltaChunk({ content: 5 })), ...complete.slice(5)],
  "a bad escape in content": [...complete.slice(0, 4), 'data: {"id":"chatcmpl-PROVIDER","object":"chat.completion.chunk","created":1111111111,"model":"provider-model","choices":[{"index":0,"delta":{"content":"a\\qb"},"finish_reason":null}]}\n\n', ...complete.slice(5)],
  "finish and usage in one chunk": [complete[0]!, complete[4]!, sse({ ...deltaChunk({}, "length"), usage: usageWire }), "data: [DONE]\n\n"],
  "spaced JSON": [complete[0]!, sse(JSON.stringify(deltaChunk({ content: "spaced" }), null, 1).replaceAll("\n", " ")), complete[6]!, complete[8]!],
  "events after [DONE] are ignored": [...complete, sse(deltaChunk({ content: "late" }))],
};

describe("pass-through: the same facts and the same answer as the full path", () => {
  for (const [name, chunks] of Object.entries(cases)) {
    for (const streamUsage of [true, false]) {
      it(`${name} (include_usage ${streamUsage})`, async () => {
        const full = await run(chunks, "full", { streamUsage });
        const pass = await run(chunks, "pass", { streamUsage });
        expect(pass.finished).toBe(1);
        expect(facts(pass.record)).toEqual(facts(full.record));
        expect(observed(pass.events)).toEqual(observed(full.events));
        // The gateway's stamp on every chunk, the provider's nowhere.
        for (const c of chunksOf(pass.events).filter((c) => !c.error)) {
          expect(c).toMatchObject({ id: "chatcmpl-gw-7", created: stamp.created, model: "public-model" });
          if (!streamUsage) expect("usage" in c).toBe(false);
        }
        expect(pass.text).not.toContain("PROVIDER");
        expect(pass.text).not.toContain("provider-model");
        expect(pass.text).not.toContain("1111111111");
        // Nor the provider's other fields: the client's chunks hold what the full path's do.
        expect(pass.text).not.toContain("fp_x");
        for (const c of chunksOf(pass.events).filter((c) => !c.error)) {
          expect(Object.keys(c).sort()).toEqual(["choices", "created", "id", "model", "object", ...(streamUsage ? ["usage"] : [])]);
        }
      });
    }
  }

  it("forwards the usage chunk only when the client asked, with the gateway's reading of it", async () => {
    const asked = observed((await run(complete, "pass", { streamUsage: true })).events);
    expect(asked.usage).toEqual({ prompt_tokens: 11, completion_tokens: 4, total_tokens: 15, prompt_tokens_details: { cached_tokens: 8 } });
    const notAsked = await run(complete, "pass", { streamUsage: false });
    expect(observed(notAsked.events).usage).toBeUndefined();
    expect(chunksOf(notAsked.events).some((c) => Array.isArray(c.choices) && c.choices.length === 0)).toBe(false);
    // The gateway still read it.
    expect(notAsked.record.usage?.inputTokens).toBe(11);
  });

  it("ends a cut stream with an error event and no [DONE], as a stream cut with unknown evidence", async () => {
    const r = await run(complete.slice(0, 6), "pass");
    const o = observed(r.events);
    expect(o.done).toBe(false);
    expect(o.error).toMatchObject({ code: "upstream_stream_cut" });
    expect(r.record).toMatchObject({ outcome: "stream_cut", errorCode: "upstream_stream_cut", evidence: { class: "unknown", reason: "stream_cut" } });
  });

  it("ends on a provider error event and reads no further", async () => {
    const r = await run([complete[0]!, sse({ error: { message: "overloaded" } }), ...complete.slice(4)], "pass");
    expect(observed(r.events)).toMatchObject({ done: false, text: "", error: { code: "upstream_error" } });
    expect(r.record).toMatchObject({ outcome: "stream_cut", errorCode: "upstream_error" });
  });

  it("fails an oversized event as a protocol error, as the full path does", async () => {
    const piece = "x".repeat(64 * 1024);
    const pieces = Math.ceil(MAX_SSE_BUFFER_CHARS / piece.length) + 2;
    const chunks = [complete[0]!, `data: {"choices":[{"delta":{"content":"`, ...Array.from({ length: pieces }, () => piece)];
    const r = await run(chunks, "pass", { hang: true });
    expect(observed(r.events)).toMatchObject({ done: false, error: { code: "upstream_protocol_error" } });
    expect(r.record).toMatchObject({ outcome: "protocol_error", errorCode: "upstream_protocol_error" });
    expect(r.cancels).toHaveLength(1);
  });

  it("forwards a plain delta of a shape it has parsed before as the provider wrote its string", async () => {
    const escaped = sse(JSON.stringify(deltaChunk({ content: "é!" })).replace("é", String.raw`\u00e9`));
    const chunks = [complete[0]!, sse(deltaChunk({ content: "Hi " })), escaped, complete[6]!, complete[8]!];
    const pass = await run(chunks, "pass");
    const full = await run(chunks, "full");
    // The full path decodes and re-escapes the string; the pass-through keeps the provider's escape.
    expect(pass.text).toContain(String.raw`"\u00e9!"`);
    expect(full.text).not.toContain(String.raw`\u00e9`);
    expect(observed(pass.events).text).toBe("Hi é!");
    expect(facts(pass.record)).toEqual(facts(full.record));
  });

  it("turns provider comments into the gateway's heartbeat and leaves their text behind", async () => {
    const r = await run(complete, "pass");
    expect(r.events.filter((e) => e.kind === "comment")).toEqual([{ kind: "comment", text: "keep-alive" }]);
    expect(r.text).not.toContain("OPENROUTER");
  });
});

describe("pass-through framing", () => {
  const whole = complete.join("");
  const bytes = enc.encode(whole);

  it("gives the same client bytes and facts wherever the provider's bytes are split", async () => {
    const reference = await run([bytes], "pass");
    expect(reference.record.outcome).toBe("success");
    for (let cut = 1; cut < bytes.length; cut++) {
      const r = await run([bytes.slice(0, cut), bytes.slice(cut)], "pass");
      expect(r.text, `split at byte ${cut}`).toBe(reference.text);
      expect(facts(r.record)).toEqual({ ...facts(reference.record), firstContentAt: r.record.firstContentAt });
      expect(r.record.outputChars).toBe(reference.record.outputChars);
    }
  });

  it("reads CRLF line endings as LF ones", async () => {
    const lf = await run([whole], "pass");
    const crlf = await run([whole.replaceAll("\n", "\r\n")], "pass");
    expect(crlf.text).toBe(lf.text);
    expect(facts(crlf.record)).toEqual(facts(lf.record));
  });

  it("keeps a multi-line data field as one event, one data line per line", async () => {
    const chunk = deltaChunk({ content: "multi" });
    const multi = `data: ${JSON.stringify(chunk, null, 1).split("\n").join("\ndata: ")}\n\n`;
    const chunks = [complete[0]!, multi, complete[6]!, complete[8]!];
    const full = await run(chunks, "full");
    const pass = await run(chunks, "pass");
    expect(observed(pass.events).text).toBe("multi");
    expect(facts(pass.record)).toEqual(facts(full.record));
  });
});

describe("Anthropic Messages pass-through: the full path's events, byte for byte but a string's escapes", () => {
  const ev = (type: string, body: Record<string, unknown> = {}) => `event: ${type}\ndata: ${JSON.stringify({ type, ...body })}\n\n`;
  const delta = (index: number, d: Record<string, unknown>) => ev("content_block_delta", { index, delta: d });
  const text = (index: number, t: string) => delta(index, { type: "text_delta", text: t });
  const start = ev("message_start", {
    message: { id: "msg_PROVIDER", type: "message", role: "assistant", model: "provider-model", content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 25, output_tokens: 1, cache_read_input_tokens: 3 } },
  });
  const ending = [ev("message_delta", { delta: { stop_reason: "tool_use", stop_sequence: null }, usage: { output_tokens: 15 } }), ev("message_stop")];
  const complete = [
    start,
    ev("content_block_start", { index: 0, content_block: { type: "thinking", thinking: "", signature: "" } }),
    delta(0, { type: "thinking_delta", thinking: "Let me " }),
    delta(0, { type: "thinking_delta", thinking: "think \"hard\"\n" }),
    delta(0, { type: "signature_delta", signature: "sig-1" }),
    ev("content_block_stop", { index: 0 }),
    ev("content_block_start", { index: 1, content_block: { type: "text", text: "" } }),
    text(1, "Héllo"),
    ev("ping"),
    text(1, " wörld 👋 \u2028"),
    text(1, ""),
    text(1, "!"),
    ev("content_block_stop", { index: 1 }),
    ev("content_block_start", { index: 2, content_block: { type: "tool_use", id: "toolu_1", name: "lookup", input: {} } }),
    delta(2, { type: "input_json_delta", partial_json: '{"q":' }),
    delta(2, { type: "input_json_delta", partial_json: "1}" }),
    ev("content_block_stop", { index: 2 }),
    ...ending,
  ];
  // A server tool's block is skipped: the text block after it is the client's index 1, not 2.
  const skipped = [
    start,
    ev("content_block_start", { index: 0, content_block: { type: "text", text: "" } }),
    text(0, "a"),
    text(0, "b"),
    ev("content_block_stop", { index: 0 }),
    ev("content_block_start", { index: 1, content_block: { type: "server_tool_use", id: "srvtoolu_1", name: "web_search", input: {} } }),
    delta(1, { type: "input_json_delta", partial_json: '{"query":"x"}' }),
    ev("content_block_stop", { index: 1 }),
    ev("content_block_start", { index: 2, content_block: { type: "text", text: "" } }),
    text(2, "c"),
    text(2, "d"),
    text(2, "e"),
    ev("content_block_stop", { index: 2 }),
    ev("message_delta", { delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 5 } }),
    ev("message_stop"),
  ];
  const cases: Record<string, readonly string[]> = {
    complete,
    "a skipped block renumbers the blocks after it": skipped,
    "a cut stream": complete.slice(0, 10),
    "cut after the stop": complete.slice(0, -1),
    "a provider error event": [...complete.slice(0, 9), ev("error", { error: { type: "overloaded_error", message: "Overloaded" } }), ...complete.slice(9)],
    "an unreadable event": [...complete.slice(0, 9), 'event: content_block_delta\ndata: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"x"}\n\n', ...complete.slice(9)],
    "a delta of the wrong shape": [...complete.slice(0, 9), text(1, 5 as unknown as string), ...complete.slice(9)],
    "a bad escape in a delta": [...complete.slice(0, 9), 'event: content_block_delta\ndata: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"a\\qb"}}\n\n', ...complete.slice(9)],
    "a delta to a block never opened": [...complete.slice(0, 9), text(7, "x"), ...complete.slice(9)],
    "text after the stop": [...complete.slice(0, -2), ending[0]!, text(1, "late"), text(1, "later"), ending[1]!],
    "events after message_stop are ignored": [...complete, text(1, "late")],
    "spaced JSON": [...complete.slice(0, 8), `event: content_block_delta\ndata: ${JSON.stringify({ type: "content_block_delta", index: 1, delta: { type: "text_delta", text: "sp" } }, null, 1).replaceAll("\n", " ")}\n\n`, ...complete.slice(8)],
  };
  const anthropic = { codec: anthropicMessagesCodec };
  const events = (r: Run) => parseTypedSse(r.text);

  for (const [name, chunks] of Object.entries(cases)) {
    it(name, async () => {
      const full = await run(chunks, "full", anthropic);
      const pass = await run(chunks, "pass", anthropic);
      expect(pass.finished).toBe(1);
      expect(facts(pass.record)).toEqual(facts(full.record));
      expect(events(pass)).toEqual(events(full));
      expect(pass.text).not.toContain("PROVIDER");
      expect(pass.text).not.toContain("provider-model");
    });
  }

  it("forwards a delta of the shape just parsed as the provider wrote its string", async () => {
    const escaped = text(1, "é!").replace("é", String.raw`\u00e9`);
    // The block's first delta opens the client's block, the second teaches the shape, the third is forwarded.
    const chunks = [...complete.slice(0, 8), text(1, " and "), escaped, ...complete.slice(12)];
    const pass = await run(chunks, "pass", anthropic);
    const full = await run(chunks, "full", anthropic);
    expect(pass.text).toContain(String.raw`"\u00e9!"`);
    expect(full.text).not.toContain(String.raw`\u00e9`);
    expect(events(pass)).toEqual(events(full));
    expect(facts(pass.record)).toEqual(facts(full.record));
  });

  it("gives the same client bytes and facts wherever the provider's bytes are split", async () => {
    const bytes = enc.encode(skipped.join(""));
    const reference = await run([bytes], "pass", anthropic);
    expect(reference.record.outcome).toBe("success");
    expect(events(reference)).toEqual(events(await run([bytes], "full", anthropic)));
    for (let cut = 1; cut < bytes.length; cut++) {
      const r = await run([bytes.slice(0, cut), bytes.slice(cut)], "pass", anthropic);
      expect(r.text, `split at byte ${cut}`).toBe(reference.text);
      expect(facts(r.record)).toEqual({ ...facts(reference.record), firstContentAt: r.record.firstContentAt });
    }
  });
});
