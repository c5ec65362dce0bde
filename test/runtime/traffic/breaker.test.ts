import { describe, expect, it } from "vitest";
import {
  BreakerMachine,
  DEFAULT_BREAKER_CONFIG,
  parseBreakerData,
  resolveBreakerConfig,
  type BreakerConfigInput,
} from "../../../src/traffic/breaker.ts";

const base: BreakerConfigInput = {
  windowMs: 10_000,
  buckets: 10,
  minSamples: 4,
  failureRatio: 0.5,
  openMs: 5_000,
  halfOpenProbes: 2,
  halfOpenSuccesses: 3,
  permitTtlMs: 2_000,
};

function machine(overrides: BreakerConfigInput = {}): BreakerMachine {
  return new BreakerMachine(resolveBreakerConfig({ ...base, ...overrides }));
}

/** Trips a breaker at `now` with minSamples failures. */
function trip(m: BreakerMachine, now: number, n = 4): void {
  for (let i = 0; i < n; i++) m.record("failure", now);
  expect(m.state).toBe("open");
}

/** Trips and waits out the open interval: half-open at `now + openMs`. */
function halfOpen(m: BreakerMachine, now = 0): number {
  trip(m, now);
  const t = now + 5_000;
  expect(m.snapshot(t).state).toBe("half_open");
  return t;
}

describe("breaker config", () => {
  it("fills defaults and rejects out-of-range fields, naming each", () => {
    expect(resolveBreakerConfig()).toEqual(DEFAULT_BREAKER_CONFIG);
    expect(resolveBreakerConfig({ minSamples: 3, openMs: undefined })).toEqual({ ...DEFAULT_BREAKER_CONFIG, minSamples: 3 });
    expect(() => resolveBreakerConfig({ failureRatio: 0 })).toThrow(/failureRatio/);
    expect(() => resolveBreakerConfig({ failureRatio: 1.5 })).toThrow(RangeError);
    expect(() => resolveBreakerConfig({ buckets: 2.5, halfOpenProbes: 0, windowMs: -1 })).toThrow(/windowMs.*buckets.*halfOpenProbes/);
    expect(() => resolveBreakerConfig({ permitTtlMs: Number.POSITIVE_INFINITY })).toThrow(/permitTtlMs/);
    expect(resolveBreakerConfig({ openMs: 0 }).openMs).toBe(0);
  });
});

describe("BreakerMachine: closed", () => {
  it("allows everything and stays closed below minSamples, however bad the ratio", () => {
    const m = machine();
    for (let i = 0; i < 3; i++) m.record("failure", 100);
    expect(m.snapshot(100)).toMatchObject({ state: "closed", failures: 3, samples: 3 });
    expect(m.acquire(100)).toEqual({ allowed: true, probe: false });
  });

  it("opens exactly when samples >= minSamples and the failure ratio reaches the threshold", () => {
    const m = machine();
    m.record("success", 0);
    m.record("success", 0);
    m.record("failure", 0);
    expect(m.state).toBe("closed"); // 3 samples < 4
    m.record("success", 0);
    expect(m.state).toBe("closed"); // 1/4 = 0.25 < 0.5
    m.record("failure", 0);
    expect(m.state).toBe("closed"); // 2/5 = 0.4
    m.record("failure", 0);
    expect(m.state).toBe("open"); // 3/6 = 0.5 >= 0.5
    expect(m.snapshot(0)).toMatchObject({ state: "open", openUntil: 5_000, opens: 1, changedAt: 0 });
  });

  it("never opens on successes alone", () => {
    const m = machine({ minSamples: 1, failureRatio: 0.01 });
    for (let i = 0; i < 100; i++) m.record("success", i);
    expect(m.state).toBe("closed");
  });

  it("forgets old failures as the window rolls", () => {
    const m = machine();
    for (let i = 0; i < 3; i++) m.record("failure", 0);
    // Bucket [0, 1000) drops out once it starts at or before now - windowMs.
    expect(m.snapshot(9_999).samples).toBe(3);
    expect(m.snapshot(10_000).samples).toBe(0);
    m.record("failure", 10_000);
    expect(m.snapshot(10_000)).toMatchObject({ state: "closed", failures: 1, samples: 1 });
  });

  it("keeps samples spread over the window and rolls them off bucket by bucket", () => {
    const m = machine({ minSamples: 10, failureRatio: 0.9 });
    for (let t = 0; t < 9_000; t += 1_000) m.record("failure", t);
    expect(m.snapshot(9_000)).toMatchObject({ failures: 9, samples: 9, state: "closed" });
    m.record("failure", 9_000); // the tenth sample, with the first still in the window
    expect(m.snapshot(9_000)).toMatchObject({ state: "open", openUntil: 14_000 });
    const m2 = machine({ minSamples: 100 });
    for (let t = 0; t < 10_000; t += 1_000) m2.record("failure", t);
    expect(m2.snapshot(12_500).samples).toBe(7); // buckets starting at 0, 1000, 2000 are gone
  });

  it("batched reports are evaluated as a whole", () => {
    const m = machine();
    expect(m.recordMany(3, 1, 0)).toBe(true);
    expect(m.state).toBe("closed");
    m.recordMany(0, 4, 10);
    expect(m.state).toBe("open"); // 5/8
    expect(m.recordMany(1, 1, 20)).toBe(false); // ignored while open
    expect(machine().recordMany(0, 0, 0)).toBe(false);
    expect(machine().recordMany(Number.NaN, -3, 0)).toBe(false);
  });

  it("neutral outcomes never count", () => {
    const m = machine({ minSamples: 1 });
    for (let i = 0; i < 10; i++) expect(m.record("neutral", 0)).toBe(false);
    expect(m.snapshot(0)).toMatchObject({ state: "closed", samples: 0 });
  });

  it("a clock stepping backwards lands in the newest bucket", () => {
    const m = machine({ minSamples: 100 });
    m.record("failure", 5_000);
    m.record("failure", 3_000);
    expect(m.data().buckets).toEqual([{ start: 5_000, successes: 0, failures: 2 }]);
  });
});

describe("BreakerMachine: open", () => {
  it("refuses everything until openUntil, ignoring outcomes meanwhile", () => {
    const m = machine();
    trip(m, 1_000);
    expect(m.acquire(1_000)).toEqual({ allowed: false, probe: false });
    expect(m.record("success", 2_000)).toBe(false);
    expect(m.record("failure", 2_000, "probe-1")).toBe(false);
    expect(m.acquire(5_999)).toEqual({ allowed: false, probe: false });
    expect(m.snapshot(5_999)).toMatchObject({ state: "open", openUntil: 6_000, samples: 0 });
  });

  it("turns half-open at openUntil, dated openUntil however late it is observed", () => {
    const m = machine();
    trip(m, 1_000);
    expect(m.snapshot(60_000)).toMatchObject({ state: "half_open", changedAt: 6_000, openUntil: undefined, permitsOutstanding: 0 });
  });

  it("with openMs 0, goes half-open on the next call", () => {
    const m = machine({ openMs: 0 });
    trip(m, 1_000);
    expect(m.acquire(1_000).probe).toBe(true);
  });
});

describe("BreakerMachine: half-open", () => {
  it("hands out at most halfOpenProbes permits however many ask", () => {
    const m = machine();
    const t = halfOpen(m);
    const answers = Array.from({ length: 50 }, () => m.acquire(t));
    const granted = answers.filter((a) => a.allowed);
    expect(granted).toHaveLength(2);
    expect(granted.every((a) => a.probe && typeof a.permitId === "string")).toBe(true);
    expect(new Set(granted.map((a) => a.permitId)).size).toBe(2);
    expect(answers.filter((a) => !a.allowed).every((a) => !a.probe && a.permitId === undefined)).toBe(true);
    expect(m.snapshot(t)).toMatchObject({ permitsOutstanding: 2, halfOpenProbes: 2 });
  });

  it("a released permit frees its slot", () => {
    const m = machine();
    const t = halfOpen(m);
    const a = m.acquire(t);
    m.acquire(t);
    expect(m.acquire(t).allowed).toBe(false);
    expect(m.record("neutral", t, a.permitId)).toBe(true);
    expect(m.snapshot(t)).toMatchObject({ state: "half_open", permitsOutstanding: 1, probeSuccesses: 0 });
    expect(m.acquire(t).allowed).toBe(true);
  });

  it("expires a permit whose outcome never came, so a lost probe cannot wedge it", () => {
    const m = machine();
    const t = halfOpen(m);
    const lost1 = m.acquire(t);
    m.acquire(t);
    expect(m.acquire(t + 1_999).allowed).toBe(false);
    const fresh = m.acquire(t + 2_000);
    expect(fresh.allowed && fresh.probe).toBe(true);
    // The expired permit's late report is an ordinary non-probe outcome: ignored while half-open.
    expect(m.record("failure", t + 2_001, lost1.permitId)).toBe(false);
    expect(m.state).toBe("half_open");
  });

  it("closes after halfOpenSuccesses probe successes, with an empty window", () => {
    const m = machine();
    let t = halfOpen(m);
    for (let i = 0; i < 3; i++) {
      const p = m.acquire(t);
      expect(m.state).toBe("half_open");
      m.record("success", ++t, p.permitId);
    }
    expect(m.snapshot(t)).toMatchObject({ state: "closed", samples: 0, failures: 0, permitsOutstanding: 0, probeSuccesses: 0, changedAt: t });
    expect(m.acquire(t)).toEqual({ allowed: true, probe: false });
    // Closed again: the window starts from scratch.
    for (let i = 0; i < 3; i++) m.record("failure", t);
    expect(m.state).toBe("closed");
  });

  it("re-opens on one probe failure, for another full open interval", () => {
    const m = machine();
    const t = halfOpen(m);
    const a = m.acquire(t);
    const b = m.acquire(t);
    m.record("success", t + 10, a.permitId);
    m.record("failure", t + 20, b.permitId);
    expect(m.snapshot(t + 20)).toMatchObject({ state: "open", openUntil: t + 5_020, opens: 2, probeSuccesses: 0, permitsOutstanding: 0 });
    // The next half-open period needs its successes from scratch.
    const t2 = t + 5_020;
    expect(m.snapshot(t2).state).toBe("half_open");
    expect(m.snapshot(t2).probeSuccesses).toBe(0);
  });

  it("ignores outcomes without a live permit and permit ids of earlier periods", () => {
    const m = machine();
    const t = halfOpen(m);
    const old = m.acquire(t);
    m.record("failure", t, old.permitId); // re-open
    const t2 = t + 5_000;
    const fresh = m.acquire(t2);
    expect(fresh.permitId).not.toBe(old.permitId);
    expect(m.record("failure", t2, old.permitId)).toBe(false);
    expect(m.record("failure", t2)).toBe(false);
    expect(m.record("success", t2, "made-up")).toBe(false);
    expect(m.snapshot(t2)).toMatchObject({ state: "half_open", permitsOutstanding: 1 });
  });

  it("a probe outcome arriving after the breaker closed counts as an ordinary sample", () => {
    const m = machine({ halfOpenProbes: 2, halfOpenSuccesses: 1 });
    const t = halfOpen(m);
    const a = m.acquire(t);
    const b = m.acquire(t);
    m.record("success", t, a.permitId);
    expect(m.state).toBe("closed");
    expect(m.record("failure", t, b.permitId)).toBe(true);
    expect(m.snapshot(t)).toMatchObject({ state: "closed", failures: 1, samples: 1 });
  });
});

describe("BreakerMachine: persistence", () => {
  it("continues from its data exactly, and data() is a copy", () => {
    const cfg = resolveBreakerConfig(base);
    const m = new BreakerMachine(cfg);
    const t = halfOpen(m);
    const p = m.acquire(t);
    const saved = JSON.parse(JSON.stringify(m.data()));
    const again = new BreakerMachine(cfg, parseBreakerData(JSON.stringify(saved)));
    expect(again.snapshot(t)).toEqual(m.snapshot(t));
    again.record("failure", t, p.permitId);
    expect(again.state).toBe("open");
    expect(m.state).toBe("half_open");
  });

  it("restarts closed from missing or malformed data rather than wedging", () => {
    for (const bad of [undefined, "", "{", "null", "[]", JSON.stringify({ state: "open" }), JSON.stringify({ ...parseBreakerData(undefined), state: "weird" })]) {
      expect(parseBreakerData(bad)).toMatchObject({ state: "closed", buckets: [], permits: [] });
    }
  });
});
