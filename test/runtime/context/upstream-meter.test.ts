/**
 * A request's upstream wait: the union of the times an upstream call was outstanding, so the
 * gateway's own time is the rest of its duration; attempts, retries and sub-requests feed it.
 */
import { describe, expect, it } from "vitest";
import { RequestContext } from "../../../src/context/request-context.ts";
import type { RequestRecord } from "../../../src/context/request-record.ts";
import { UpstreamMeter } from "../../../src/context/upstream-meter.ts";
import { ManualScheduler } from "../admit/admission-support.ts";
import { noSettle } from "../support/executor-harness.ts";
import { attemptRecord } from "../telemetry/fixtures.ts";
import { FakeClock } from "../traffic/helpers.ts";

function context(clock: FakeClock, parent?: RequestContext) {
  const ended: RequestRecord[] = [];
  const ctx = new RequestContext({
    requestId: parent ? "req_child" : "req_u",
    receivedAt: clock.now(),
    clock,
    scheduler: new ManualScheduler(clock),
    sink: { attemptFinished() {}, requestFinished: (r) => ended.push({ ...r }) },
    waitUntil: () => {},
    settle: noSettle,
    onUndoError: (err) => {
      throw err;
    },
    parent,
  });
  return { ctx, ended };
}

describe("the upstream meter", () => {
  it("counts overlapping waits once, and an open wait up to now", () => {
    const clock = new FakeClock(1_000);
    const m = new UpstreamMeter(clock);
    expect(m.used).toBe(false);
    const a = m.begin();
    clock.advance(10);
    const b = m.begin();
    clock.advance(5);
    a();
    a();
    clock.advance(5);
    expect(m.waitedMs()).toBe(20);
    b();
    clock.advance(30);
    expect(m.waitedMs()).toBe(20);
    m.begin();
    clock.advance(7);
    expect(m.waitedMs()).toBe(27);
    expect(m.used).toBe(true);
    expect(m.freeze(clock.now() + 3)).toBe(30);
    clock.advance(100);
    expect(m.waitedMs()).toBe(30);
  });

  it("reports a sub-request's waits to its parent", () => {
    const clock = new FakeClock(1_000);
    const parent = new UpstreamMeter(clock);
    const child = new UpstreamMeter(clock, parent);
    const end = child.begin();
    clock.advance(12);
    end();
    expect(parent.waitedMs()).toBe(12);
    expect(child.waitedMs()).toBe(12);
  });
});

describe("a request's timing", () => {
  it("splits a buffered request with a retry into the gateway's time and the attempts' waits", () => {
    const clock = new FakeClock(10_000);
    const { ctx, ended } = context(clock);
    clock.advance(3);
    const first = ctx.openAttempt(attemptRecord({ id: "a1", startedAt: clock.now(), headersAt: undefined, endedAt: undefined, outcome: "in_progress" }));
    // Holds taken before the send (a ledger reservation) are the gateway's time.
    clock.advance(2);
    first.start();
    clock.advance(40);
    first.record.headersAt = clock.now();
    first.finish("upstream_status");
    clock.advance(4);
    const second = ctx.openAttempt(attemptRecord({ id: "a2", startedAt: clock.now(), headersAt: undefined, endedAt: undefined, outcome: "in_progress" }));
    second.start();
    clock.advance(25);
    second.record.headersAt = clock.now();
    clock.advance(5);
    second.finish("success");
    clock.advance(1);
    const t = ctx.timing();
    expect(t).toEqual({ totalMs: 80, upstreamMs: 70, gatewayMs: 10, firstByteMs: 25 });
    ctx.finish({ kind: "completed" });
    expect(ended[0]!.upstreamMs).toBe(70);
  });

  it("counts a stream's open attempt up to the headers, and to its end in the record", () => {
    const clock = new FakeClock(10_000);
    const { ctx, ended } = context(clock);
    clock.advance(2);
    const a = ctx.openAttempt(attemptRecord({ startedAt: clock.now(), headersAt: undefined, endedAt: undefined, outcome: "in_progress" }));
    a.start();
    clock.advance(8);
    a.record.headersAt = clock.now();
    expect(ctx.timing()).toEqual({ totalMs: 10, upstreamMs: 8, gatewayMs: 2, firstByteMs: 8 });
    // Waiting for the provider between events is upstream time.
    clock.advance(500);
    a.finish("success");
    clock.advance(1);
    ctx.finish({ kind: "completed" });
    expect(ended[0]).toMatchObject({ endedAt: 10_511, upstreamMs: 508 });
    // Once ended, the timing is the request's whole.
    clock.advance(50);
    expect(ctx.timing()).toEqual({ totalMs: 511, upstreamMs: 508, gatewayMs: 3, firstByteMs: 8 });
  });

  it("has no upstream figure for a refusal, and counts a sub-request's wait in its parent's", () => {
    const clock = new FakeClock(10_000);
    const parent = context(clock);
    const child = context(clock, parent.ctx);
    clock.advance(4);
    const end = child.ctx.upstream.begin();
    clock.advance(20);
    end();
    child.ctx.finish({ kind: "completed" });
    expect(parent.ctx.timing()).toMatchObject({ totalMs: 24, upstreamMs: 20, gatewayMs: 4 });
    const refused = context(clock);
    clock.advance(2);
    refused.ctx.finish({ kind: "completed" });
    expect(refused.ctx.timing()).toEqual({ totalMs: 2, upstreamMs: undefined, gatewayMs: 2, firstByteMs: undefined });
    expect(refused.ended[0]!.upstreamMs).toBeUndefined();
  });
});
