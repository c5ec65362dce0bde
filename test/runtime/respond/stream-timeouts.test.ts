import { describe, expect, it } from "vitest";
import type { AttemptRecord } from "../../../src/context/attempt-record.ts";
import { startedAttempt } from "../support/attempt-scope.ts";
import { createClientStream } from "../../../src/respond/stream-pipeline.ts";
import { openAiChatCodec } from "../../../src/protocol/openai-chat/index.ts";

const enc = new TextEncoder();
const chunk = (delta: Record<string, unknown>) => `data: ${JSON.stringify({ choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;

/** Upstream that hands out the given SSE pieces, one per pull, then hangs until cancelled. */
function hangingUpstream(pieces: string[]) {
  let cancelled = false;
  const stream = new ReadableStream<Uint8Array>(
    {
      pull(c) {
        const p = pieces.shift();
        if (p !== undefined) c.enqueue(enc.encode(p));
        else return new Promise<void>(() => {});
      },
      cancel() {
        cancelled = true;
      },
    },
    { highWaterMark: 0 },
  );
  return { stream, cancelled: () => cancelled };
}

function run(pieces: string[], expireAfterWaits: number) {
  let t = 1_000;
  const clock = { now: () => t };
  const record: AttemptRecord = { id: "att", requestId: "req", snapshotRevision: 1, logicalModel: "m", modelRevision: 1, pool: "p", backendId: "b", backendName: "b", upstreamModel: "u", startedAt: 0, outcome: "in_progress" };
  const { attempt, finished } = startedAttempt(clock, record);
  const waits: number[] = [];
  const up = hangingUpstream(pieces);
  const client = createClientStream(up.stream, {
    decoder: openAiChatCodec.createStreamDecoder(),
    encoder: openAiChatCodec.createStreamEncoder({ id: "x", created: 1, model: "m" }, { model: "m", messages: [], stream: true, streamUsage: false }),
    attempt,
    clock,
    timeouts: { firstTokenMs: 500, idleMs: 200 },
    // Each wait "passes" only once the test allows it; time moves by 50 ms per read meanwhile.
    wait: (ms) => {
      waits.push(ms);
      t += 50;
      return { done: waits.length > expireAfterWaits ? Promise.resolve() : new Promise<void>(() => {}), cancel: () => {} };
    },
  });
  return { client, finished, waits, cancelled: up.cancelled };
}

describe("stream timeouts", () => {
  it("measures the first-token limit from the stream's start and heartbeats do not reset it", async () => {
    const r = run([": ping\n\n", ": ping\n\n"], 2);
    const text = await new Response(r.client).text();
    expect(text).toContain(": keep-alive");
    expect(text).toContain('"code":"upstream_timeout"');
    expect(text).not.toContain("[DONE]");
    // 500 ms from the start, less the time already spent: heartbeats never moved the limit.
    expect(r.waits).toEqual([500, 450, 400]);
    expect(r.finished[0]).toMatchObject({ outcome: "timeout", errorCode: "upstream_timeout" });
    expect(r.cancelled()).toBe(true);
  });

  it("switches to the idle limit after content and measures it from the last content delta", async () => {
    const r = run([chunk({ role: "assistant", content: "" }), chunk({ content: "Hi" }), ": ping\n\n"], 3);
    const text = await new Response(r.client).text();
    expect(text).toContain('"content":"Hi"');
    expect(text).toContain('"code":"upstream_timeout"');
    expect(r.waits.slice(2)).toEqual([200, 150]);
    expect(r.finished[0]?.outcome).toBe("timeout");
  });
});
