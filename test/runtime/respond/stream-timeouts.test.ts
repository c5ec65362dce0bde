import { describe, expect, it } from "vitest";
import type { AttemptRecord } from "../../../src/context/attempt-record.ts";
import { startedAttempt } from "../support/attempt-scope.ts";
import { createClientStream } from "../../../src/respond/stream-pipeline.ts";
import { openAiChatCodec } from "../../../src/protocol/openai-chat/index.ts";

const enc = new TextEncoder();
const chunk = (delta: Record<string, unknown>) => `data: ${JSON.stringify({ choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;

/** Upstream the test writes to: each `send` is one chunk; it never ends unless `end` is called. */
function controlledUpstream() {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let cancelled = false;
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
    },
    cancel() {
      cancelled = true;
    },
  });
  return { stream, send: (piece: string) => controller.enqueue(enc.encode(piece)), end: () => controller.close(), cancelled: () => cancelled };
}

/** Timers the test fires by hand, on a clock the test moves. */
function fakeTimers() {
  let now = 1_000;
  const armed: { at: number; fire: () => void; cancelled: boolean }[] = [];
  return {
    clock: { now: () => now },
    wait: (ms: number) => {
      let fire!: () => void;
      const done = new Promise<void>((r) => (fire = r));
      const t = { at: now + Math.max(0, ms), fire, cancelled: false };
      armed.push(t);
      return { done, cancel: () => void (t.cancelled = true) };
    },
    /** Lets what was sent be read at the current time, then moves the clock to `at`, firing every live timer due by then. */
    async advanceTo(at: number) {
      await settle();
      now = at;
      for (const t of armed) if (!t.cancelled && t.at <= at) t.fire();
      await settle();
    },
    /** Delays of the timers armed so far, in order. */
    delays: () => armed.map((t) => t.at),
    live: () => armed.filter((t) => !t.cancelled && t.at > now).length,
  };
}

/**
 * Lets pending work run: the pipeline's pulls and the timer callbacks. A reader in the runtime
 * (`Response.text()`) pulls again only after a turn of its own event loop, so a few turns.
 */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise((r) => setTimeout(r, 0));
}

/** A stream under the timeouts; the client reads it to its end unless `consume` is false. */
function run(consume = true) {
  const timers = fakeTimers();
  const record: AttemptRecord = { id: "att", requestId: "req", snapshotRevision: 1, logicalModel: "m", modelRevision: 1, pool: "p", backendId: "b", backendName: "b", upstreamModel: "u", startedAt: 0, outcome: "in_progress" };
  const { attempt, finished } = startedAttempt(timers.clock, record);
  const up = controlledUpstream();
  const client = createClientStream(up.stream, {
    decoder: openAiChatCodec.createStreamDecoder(),
    encoder: openAiChatCodec.createStreamEncoder({ id: "x", created: 1, model: "m" }, { model: "m", messages: [], stream: true, streamUsage: false }),
    attempt,
    clock: timers.clock,
    timeouts: { firstTokenMs: 500, idleMs: 200 },
    wait: timers.wait,
  });
  const text = consume ? new Response(client).text() : Promise.resolve("");
  return { client, text, finished, timers, up };
}

describe("stream timeouts", () => {
  it("measures the first-token limit from the stream's start and heartbeats do not reset it", async () => {
    const r = run();
    r.up.send(": ping\n\n");
    await r.timers.advanceTo(1_200);
    r.up.send(": ping\n\n");
    await r.timers.advanceTo(1_499);
    expect(r.finished).toEqual([]);
    await r.timers.advanceTo(1_500);
    const text = await r.text;
    expect(text).toContain(": keep-alive");
    expect(text).toContain('"code":"upstream_timeout"');
    expect(text).not.toContain("[DONE]");
    // One timer, armed at the start for 500 ms: the heartbeats never moved it.
    expect(r.timers.delays()).toEqual([1_500]);
    expect(r.finished[0]).toMatchObject({ outcome: "timeout", errorCode: "upstream_timeout", endedAt: 1_500 });
    expect(r.up.cancelled()).toBe(true);
  });

  it("switches to the idle limit after content and measures it from the last content delta", async () => {
    const r = run();
    r.up.send(chunk({ role: "assistant", content: "" }));
    await r.timers.advanceTo(1_100);
    r.up.send(chunk({ content: "Hi" }));
    await r.timers.advanceTo(1_250);
    r.up.send(": ping\n\n");
    await r.timers.advanceTo(1_299);
    expect(r.finished).toEqual([]);
    await r.timers.advanceTo(1_300);
    const text = await r.text;
    expect(text).toContain('"content":"Hi"');
    expect(text).toContain('"code":"upstream_timeout"');
    // The first content brought the limit forward (idle 200 ms < first token 500 ms): re-armed once.
    expect(r.timers.delays()).toEqual([1_500, 1_300]);
    expect(r.finished[0]).toMatchObject({ outcome: "timeout", endedAt: 1_300 });
  });

  it("never cuts a stream that keeps producing, and leaves no timer behind", async () => {
    const r = run();
    r.up.send(chunk({ role: "assistant", content: "a" }));
    await r.timers.advanceTo(1_150);
    r.up.send(chunk({ content: "b" }));
    // Armed for the first token, brought forward by the first content to 1,200; that timer fires,
    // finds the limit moved to 1,350 and re-arms for the rest.
    await r.timers.advanceTo(1_200);
    expect(r.timers.delays()).toEqual([1_500, 1_200, 1_350]);
    await r.timers.advanceTo(1_300);
    r.up.send(`data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\ndata: [DONE]\n\n`);
    r.up.end();
    const text = await r.text;
    expect(text).toContain("data: [DONE]");
    expect(r.finished[0]).toMatchObject({ outcome: "success" });
    expect(r.timers.live()).toBe(0);
  });

  it("does not time out while the client is not reading", async () => {
    const { client, finished, timers, up } = run(false);
    const reader = client.getReader();
    up.send(chunk({ role: "assistant", content: "a" }));
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('"content":"a"');
    // The client pauses well past the idle limit; the provider has already sent the rest.
    up.send(chunk({ content: "b" }));
    await timers.advanceTo(2_000);
    expect(finished).toEqual([]);
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('"content":"b"');
    await reader.cancel();
  });
});
