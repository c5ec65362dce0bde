import { describe, expect, it } from "vitest";
import { DrainController } from "../../../src/admit/drain.ts";

/** A budget wait the test ends by hand. */
function manualBudget() {
  const ends: (() => void)[] = [];
  return { wait: () => new Promise<void>((r) => ends.push(r)), endAll: () => ends.splice(0).forEach((e) => e()), pending: () => ends.length };
}

describe("DrainController", () => {
  it("refuses new requests while draining and reports an idle drain at once", async () => {
    const d = new DrainController({ now: () => 0 }, async () => {});
    expect(await d.drain(1000)).toEqual({ inFlightAtStart: 0, finished: 0, cancelled: 0, durationMs: 0 });
    expect(d.draining).toBe(true);
    expect(d.track()).toBeUndefined();
    d.resume();
    expect(d.track()).toBeDefined();
  });

  it("lets requests finish within the budget and marks the rest cancelled, with no timer per request", async () => {
    const budget = manualBudget();
    const d = new DrainController({ now: () => 0 }, budget.wait);
    const a = d.track()!;
    const b = d.track()!;
    const c = d.track()!;
    const report = d.drain(5000);
    a.done();
    a.done(); // idempotent
    budget.endAll(); // the budget runs out with b and c still in flight
    expect(await report).toMatchObject({ inFlightAtStart: 3, finished: 1, cancelled: 2 });
    // Each request reads the mark where it next wakes; nothing ran on its behalf meanwhile.
    expect([a.cancelled, b.cancelled, c.cancelled]).toEqual([false, true, true]);
    b.done();
    c.done();
    expect(d.inFlight).toBe(0);
  });

  it("returns as soon as the last request finishes", async () => {
    const d = new DrainController({ now: () => 0 }, () => new Promise<void>(() => {}));
    const a = d.track()!;
    const report = d.drain(60_000);
    a.done();
    expect(await report).toMatchObject({ inFlightAtStart: 1, finished: 1, cancelled: 0 });
    expect(d.inFlight).toBe(0);
  });

  it("answers two concurrent drains, each with its own report", async () => {
    const budget = manualBudget();
    const d = new DrainController({ now: () => 0 }, budget.wait);
    const a = d.track()!;
    const b = d.track()!;
    const first = d.drain(10_000);
    a.done();
    const second = d.drain(10_000);
    expect(budget.pending()).toBe(2);
    b.done(); // idle: both drains are answered, neither waits for its budget
    expect(await first).toMatchObject({ inFlightAtStart: 2, finished: 2, cancelled: 0 });
    expect(await second).toMatchObject({ inFlightAtStart: 1, finished: 1, cancelled: 0 });
  });

  it("after resume, new requests are not cancelled by an earlier drain", async () => {
    const budget = manualBudget();
    const d = new DrainController({ now: () => 0 }, budget.wait);
    const old = d.track()!;
    const report = d.drain(1);
    budget.endAll();
    expect(await report).toMatchObject({ cancelled: 1 });
    d.resume();
    const fresh = d.track()!;
    expect([old.cancelled, fresh.cancelled]).toEqual([true, false]);
  });
});
