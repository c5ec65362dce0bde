import { noSettle } from "../support/executor-harness.ts";
/**
 * The request's one timer serves its deadline and its attempts' alarms (the wait for provider
 * headers): every limit still fires at its own time, and a request never holds more than one timer.
 */
import { describe, expect, it } from "vitest";
import { RequestContext } from "../../../src/context/request-context.ts";
import type { RequestRecord } from "../../../src/context/request-record.ts";
import { ManualScheduler } from "../admit/admission-support.ts";
import { FakeClock } from "../traffic/helpers.ts";

function context() {
  const clock = new FakeClock(10_000);
  const timers = new ManualScheduler(clock);
  const ended: RequestRecord[] = [];
  const ctx = new RequestContext({
    requestId: "req_t",
    receivedAt: clock.now(),
    clock,
    scheduler: timers,
    sink: { attemptFinished() {}, requestFinished: (r) => ended.push({ ...r }) },
    waitUntil: () => {},
    settle: noSettle,
    onUndoError: (err) => {
      throw err;
    },
  });
  return { clock, timers, ctx, ended };
}

describe("the request's timer", () => {
  it("fires an alarm at its time and the deadline at its own, with one timer at a time", () => {
    const t = context();
    t.ctx.setDeadline(10_000 + 600);
    const fired: number[] = [];
    t.ctx.alarm(10_000 + 100, () => fired.push(t.clock.now()));
    expect(t.timers.pending).toBe(1);
    t.timers.advance(99);
    expect(fired).toEqual([]);
    t.timers.advance(1);
    expect(fired).toEqual([10_100]);
    expect(t.ctx.ended).toBe(false);
    // Re-armed for the deadline.
    expect(t.timers.pending).toBe(1);
    t.timers.advance(500);
    expect(t.ctx.abortReason).toBe("deadline");
    expect(t.ended[0]).toMatchObject({ outcome: "cancelled", errorCode: "deadline_exceeded", endedAt: 10_600 });
    expect(t.timers.pending).toBe(0);
  });

  it("a cleared alarm never fires, and its early timer re-arms for the deadline when it goes off", () => {
    const t = context();
    t.ctx.setDeadline(10_000 + 600);
    let fired = false;
    const clear = t.ctx.alarm(10_000 + 100, () => (fired = true));
    clear();
    t.timers.advance(100);
    expect(fired).toBe(false);
    expect(t.ctx.ended).toBe(false);
    expect(t.timers.pending).toBe(1);
    t.timers.advance(500);
    expect(t.ctx.abortReason).toBe("deadline");
  });

  it("an alarm later than the deadline never fires: the deadline ends the request first", () => {
    const t = context();
    t.ctx.setDeadline(10_000 + 100);
    let fired = false;
    t.ctx.alarm(10_000 + 200, () => (fired = true));
    t.timers.advance(1_000);
    expect(t.ctx.abortReason).toBe("deadline");
    expect(fired).toBe(false);
    expect(t.timers.pending).toBe(0);
  });

  it("an earlier deadline set later still fires on time", () => {
    const t = context();
    t.ctx.setDeadline(10_000 + 600);
    t.ctx.setDeadline(10_000 + 50);
    expect(t.timers.pending).toBe(1);
    t.timers.advance(50);
    expect(t.ctx.abortReason).toBe("deadline");
  });

  it("the request's end cancels the timer and every alarm", () => {
    const t = context();
    t.ctx.setDeadline(10_000 + 600);
    let fired = false;
    t.ctx.alarm(10_000 + 100, () => (fired = true));
    t.ctx.finish({ kind: "completed" });
    expect(t.timers.pending).toBe(0);
    t.timers.advance(1_000);
    expect(fired).toBe(false);
    // An alarm asked for after the end is never armed.
    t.ctx.alarm(t.clock.now() + 10, () => (fired = true));
    t.timers.advance(100);
    expect(fired).toBe(false);
  });
});
