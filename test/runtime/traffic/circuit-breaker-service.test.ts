import { describe, expect, it } from "vitest";
import { parseBreakerData, type BreakerConfigInput, type BreakerData, type BreakerReport } from "../../../src/traffic/breaker.ts";
import { CircuitBreakerService, type BreakerStore } from "../../../src/traffic/circuit-breaker-service.ts";
import { FakeClock } from "../support/fixtures.ts";

/** Opens on the first failure and is due for probing at once (openMs 0), 2 probe slots. */
const cfg: BreakerConfigInput = { minSamples: 1, failureRatio: 0.5, openMs: 0, halfOpenProbes: 2, halfOpenSuccesses: 1, permitTtlMs: 60_000 };

/** A store in memory that logs what it was asked, so the tests see reads, writes and transactions. */
class MemoryBreakerStore implements BreakerStore {
  data: string | undefined;
  readonly log: string[] = [];
  #inTransaction = false;
  transaction<T>(fn: () => T): T {
    this.log.push("begin");
    this.#inTransaction = true;
    try {
      return fn();
    } finally {
      this.#inTransaction = false;
      this.log.push("end");
    }
  }
  load(): BreakerData {
    this.log.push(this.#inTransaction ? "load" : "load outside a transaction");
    return parseBreakerData(this.data);
  }
  save(data: BreakerData): void {
    this.log.push(this.#inTransaction ? "save" : "save outside a transaction");
    this.data = JSON.stringify(data);
  }
}

describe("CircuitBreakerService", () => {
  const make = () => {
    const store = new MemoryBreakerStore();
    const clock = new FakeClock();
    return { store, clock, breaker: new CircuitBreakerService(store, clock) };
  };

  it("loads, applies and saves each change in one transaction, so the next call continues from it", () => {
    const { store, breaker } = make();
    expect(breaker.report("failure", undefined, cfg)).toMatchObject({ state: "half_open", opens: 1 });
    expect(store.log).toEqual(["begin", "load", "save", "end"]);
    const first = breaker.acquire(cfg);
    expect(first).toMatchObject({ allowed: true, probe: true, snapshot: { state: "half_open", permitsOutstanding: 1 } });
    expect(breaker.acquire(cfg)).toMatchObject({ allowed: true, probe: true, snapshot: { permitsOutstanding: 2 } });
    expect(breaker.acquire(cfg)).toMatchObject({ allowed: false, snapshot: { permitsOutstanding: 2 } });
    expect(breaker.report("success", first.permitId, cfg).state).toBe("closed");
    expect(breaker.reportMany({ successes: 3, failures: 0 }, cfg)).toMatchObject({ state: "closed", samples: 3 });
  });

  it("reads the state without a transaction and without saving", () => {
    const { store, breaker } = make();
    breaker.reportMany({ successes: 1, failures: 0 }, cfg);
    store.log.length = 0;
    expect(breaker.state(cfg)).toMatchObject({ state: "closed", samples: 1 });
    expect(store.log).toEqual(["load outside a transaction"]);
  });

  it("takes each call's time from its clock", () => {
    const { clock, breaker } = make();
    const opened = breaker.report("failure", undefined, { ...cfg, openMs: 1_000 });
    expect(opened).toMatchObject({ state: "open", openUntil: clock.now() + 1_000 });
    clock.advance(1_000);
    expect(breaker.state({ ...cfg, openMs: 1_000 }).state).toBe("half_open");
  });

  it("treats a null permit id as none: the outcome is an ordinary sample", () => {
    const { breaker } = make();
    expect(breaker.report("success", null as unknown as string, cfg)).toMatchObject({ state: "closed", samples: 1 });
  });

  it("rejects an unknown outcome and an invalid config before anything is read or written", () => {
    const { store, breaker } = make();
    expect(() => breaker.report("maybe" as BreakerReport, undefined, cfg)).toThrow(new TypeError("unknown breaker outcome: maybe"));
    expect(() => breaker.report("maybe" as BreakerReport, undefined, { failureRatio: 2 })).toThrow(TypeError);
    expect(() => breaker.acquire({ failureRatio: 2 })).toThrow(RangeError);
    expect(() => breaker.reportMany({ successes: 1, failures: 0 }, { minSamples: 0 })).toThrow(RangeError);
    expect(() => breaker.state({ openMs: -1 })).toThrow(RangeError);
    expect(store.log).toEqual([]);
  });
});
