import { describe, expect, it } from "vitest";
import { DrainController } from "../../../src/traffic/drain.ts";

describe("DrainController", () => {
  it("refuses new requests while draining and reports an idle drain at once", async () => {
    const d = new DrainController({ now: () => 0 }, async () => {});
    expect(await d.drain(1000)).toEqual({ inFlightAtStart: 0, finished: 0, cancelled: 0, durationMs: 0 });
    expect(d.draining).toBe(true);
    expect(d.track()).toBeUndefined();
    d.resume();
    expect(d.track()).toBeDefined();
  });

  it("lets requests finish within the budget and has the rest cancel themselves", async () => {
    let release: () => void = () => {};
    const budget = new Promise<void>((r) => (release = r));
    const ticks = new Set<() => void>();
    const d = new DrainController({ now: () => 0 }, () => budget, (_ms, fn) => {
      ticks.add(fn);
      return () => ticks.delete(fn);
    });
    const a = d.track()!;
    const b = d.track()!;
    const c = d.track()!;
    const report = d.drain(5000);
    a.done();
    a.done(); // idempotent
    release(); // the budget runs out with b and c still in flight
    expect(await report).toMatchObject({ inFlightAtStart: 3, finished: 1, cancelled: 2 });
    expect([b.signal.aborted, c.signal.aborted]).toEqual([false, false]);
    for (const tick of ticks) tick(); // each request's own watcher runs in its own context
    expect([a.signal.aborted, b.signal.aborted, c.signal.aborted]).toEqual([false, true, true]);
  });

  it("returns as soon as the last request finishes", async () => {
    const d = new DrainController({ now: () => 0 }, () => new Promise<void>(() => {}));
    const a = d.track()!;
    const report = d.drain(60_000);
    a.done();
    expect(await report).toMatchObject({ inFlightAtStart: 1, finished: 1, cancelled: 0 });
    expect(d.inFlight).toBe(0);
  });
});
