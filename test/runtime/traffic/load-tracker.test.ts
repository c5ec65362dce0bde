import { describe, expect, it } from "vitest";
import { LoadTracker } from "../../../src/traffic/load-tracker.ts";
import { FakeClock } from "./helpers.ts";

describe("LoadTracker in-flight", () => {
  it("counts attempts per backend and releases them", () => {
    const t = new LoadTracker(new FakeClock());
    expect(t.inFlight("a")).toBe(0);
    const r1 = t.begin("a");
    const r2 = t.begin("a");
    const r3 = t.begin("b");
    expect(t.inFlight("a")).toBe(2);
    expect(t.inFlight("b")).toBe(1);
    r1();
    expect(t.inFlight("a")).toBe(1);
    r2();
    r3();
    expect(t.inFlight("a")).toBe(0);
    expect(t.inFlight("b")).toBe(0);
  });

  it("release is idempotent and cannot release another attempt's count", () => {
    const clock = new FakeClock();
    const t = new LoadTracker(clock);
    const first = t.begin("a");
    t.begin("a");
    first(100);
    first(900);
    first();
    expect(t.inFlight("a")).toBe(1);
    // Only the first call's sample counts.
    expect(t.latencyMs("a")).toBe(100);
  });

  it("release without a latency records no sample", () => {
    const t = new LoadTracker(new FakeClock());
    t.begin("a")();
    expect(t.latencyMs("a")).toBeUndefined();
    expect(t.inFlight("a")).toBe(0);
  });

  it("reads do not create entries", () => {
    const t = new LoadTracker(new FakeClock());
    t.inFlight("x");
    t.latencyMs("y");
    expect(t.size).toBe(0);
  });
});

describe("LoadTracker EWMA", () => {
  it("takes the first sample as is", () => {
    const t = new LoadTracker(new FakeClock(), { halfLifeMs: 1000 });
    t.observe("a", 250);
    expect(t.latencyMs("a")).toBe(250);
  });

  it("matches hand-computed time-decayed values", () => {
    const clock = new FakeClock(0);
    const t = new LoadTracker(clock, { halfLifeMs: 1000, freshnessMs: 60_000 });
    t.observe("a", 100);
    clock.advance(1000);
    // One half-life later: (100 * 0.5 + 200) / (0.5 + 1) = 250 / 1.5
    t.observe("a", 200);
    expect(t.latencyMs("a")).toBeCloseTo(250 / 1.5, 10);
    // Same instant: the new sample counts fully, nothing is discarded: (250 + 300) / 2.5 = 220
    t.observe("a", 300);
    expect(t.latencyMs("a")).toBeCloseTo(220, 10);
    clock.advance(2000);
    // Two half-lives: decay 0.25 -> (550 * 0.25 + 20) / (2.5 * 0.25 + 1) = 157.5 / 1.625
    t.observe("a", 20);
    expect(t.latencyMs("a")).toBeCloseTo(157.5 / 1.625, 10);
  });

  it("converges to a classic EWMA with alpha = 1 - 2^(-dt/halfLife) for evenly spaced samples", () => {
    const clock = new FakeClock(0);
    const halfLifeMs = 500;
    const dt = 100;
    const t = new LoadTracker(clock, { halfLifeMs });
    const alpha = 1 - Math.pow(2, -dt / halfLifeMs);
    for (let i = 0; i < 400; i++) {
      t.observe("a", 100);
      clock.advance(dt);
    }
    const before = t.latencyMs("a")!;
    expect(before).toBeCloseTo(100, 10);
    t.observe("a", 1100);
    expect(t.latencyMs("a")).toBeCloseTo(100 + alpha * 1000, 6);
  });

  it("reacts within a few half-lives to a backend that slows down", () => {
    const clock = new FakeClock(0);
    const t = new LoadTracker(clock, { halfLifeMs: 1000 });
    for (let i = 0; i < 50; i++) {
      t.observe("a", 100);
      clock.advance(100);
    }
    for (let i = 0; i < 30; i++) {
      t.observe("a", 1000);
      clock.advance(100);
    }
    // 3 s of slow samples = 3 half-lives: old weight is 1/8 of what it was, so > 850 ms.
    expect(t.latencyMs("a")!).toBeGreaterThan(850);
  });

  it("ignores invalid samples", () => {
    const t = new LoadTracker(new FakeClock());
    t.observe("a", 100);
    t.observe("a", Number.NaN);
    t.observe("a", -5);
    t.observe("a", Number.POSITIVE_INFINITY);
    expect(t.latencyMs("a")).toBe(100);
  });

  it("does not amplify old samples if the clock steps backwards", () => {
    const clock = new FakeClock(10_000);
    const t = new LoadTracker(clock, { halfLifeMs: 1000 });
    t.observe("a", 100);
    clock.set(5_000);
    t.observe("a", 300);
    expect(t.latencyMs("a")).toBeCloseTo(200, 10);
  });
});

describe("LoadTracker freshness", () => {
  it("returns undefined once the newest sample is older than freshnessMs", () => {
    const clock = new FakeClock(0);
    const t = new LoadTracker(clock, { freshnessMs: 5000, halfLifeMs: 1000 });
    t.observe("a", 400);
    clock.advance(5000);
    expect(t.latencyMs("a")).toBe(400);
    clock.advance(1);
    expect(t.latencyMs("a")).toBeUndefined();
  });

  it("a new sample after expiry starts a fresh average (the stale one does not leak back)", () => {
    const clock = new FakeClock(0);
    const t = new LoadTracker(clock, { freshnessMs: 5000, halfLifeMs: 10_000 });
    t.observe("a", 5000);
    clock.advance(6000);
    t.observe("a", 40);
    expect(t.latencyMs("a")).toBe(40);
  });

  it("release samples refresh the entry", () => {
    const clock = new FakeClock(0);
    const t = new LoadTracker(clock, { freshnessMs: 1000 });
    const release = t.begin("a");
    clock.advance(3000);
    release(80);
    expect(t.latencyMs("a")).toBe(80);
  });

  it("validates options", () => {
    const clock = new FakeClock();
    expect(() => new LoadTracker(clock, { halfLifeMs: 0 })).toThrow(RangeError);
    expect(() => new LoadTracker(clock, { halfLifeMs: Number.POSITIVE_INFINITY })).toThrow(RangeError);
    expect(() => new LoadTracker(clock, { freshnessMs: -1 })).toThrow(RangeError);
    expect(() => new LoadTracker(clock, { freshnessMs: Number.NaN })).toThrow(RangeError);
    expect(() => new LoadTracker(clock, { maxBackends: 0 })).toThrow(RangeError);
    expect(() => new LoadTracker(clock, { maxBackends: 1.5 })).toThrow(RangeError);
    const forever = new LoadTracker(clock, { freshnessMs: Number.POSITIVE_INFINITY });
    forever.observe("a", 1);
    (clock as FakeClock).advance(1e12);
    expect(forever.latencyMs("a")).toBe(1);
  });
});

describe("LoadTracker eviction", () => {
  it("keeps at most maxBackends, evicting the least recently used idle entry", () => {
    const t = new LoadTracker(new FakeClock(), { maxBackends: 3 });
    t.observe("a", 1);
    t.observe("b", 2);
    t.observe("c", 3);
    t.observe("a", 1); // a is now the most recently used
    t.observe("d", 4); // evicts b, the LRU
    expect(t.size).toBe(3);
    expect(t.latencyMs("b")).toBeUndefined();
    expect(t.latencyMs("a")).toBe(1);
    expect(t.latencyMs("c")).toBe(3);
    expect(t.latencyMs("d")).toBe(4);
    for (let i = 0; i < 1000; i++) t.observe(`x${i}`, i);
    expect(t.size).toBe(3);
  });

  it("never evicts an entry with requests in flight, and shrinks back once they finish", () => {
    const t = new LoadTracker(new FakeClock(), { maxBackends: 2 });
    const ra = t.begin("a");
    const rb = t.begin("b");
    const rc = t.begin("c"); // all busy: the cap is exceeded rather than losing a count
    expect(t.size).toBe(3);
    t.observe("d", 1); // a, b and c are busy, so nothing but d itself could go; the new entry stays
    expect(t.inFlight("a")).toBe(1);
    expect(t.inFlight("b")).toBe(1);
    expect(t.inFlight("c")).toBe(1);
    ra(10);
    rb(20);
    rc(30);
    expect(t.size).toBeLessThanOrEqual(2);
    for (const id of ["a", "b", "c", "d"]) expect(t.inFlight(id)).toBe(0);
    t.observe("e", 1);
    expect(t.size).toBe(2);
  });

  it("a release after its idle entry was evicted does not corrupt the new entry", () => {
    const t = new LoadTracker(new FakeClock(), { maxBackends: 1 });
    const r = t.begin("a");
    r(5);
    r(5);
    t.observe("b", 1); // evicts idle a
    expect(t.latencyMs("a")).toBeUndefined();
    t.begin("a");
    r(); // stale handle: already released, no effect
    expect(t.inFlight("a")).toBe(1);
  });
});

describe("LoadTracker summary (status pages)", () => {
  it("sums a backend's members in flight and keeps the last latency with its age after it went stale", () => {
    const clock = new FakeClock(1_000);
    const t = new LoadTracker(clock, { freshnessMs: 5_000 });
    const small = t.begin("b1/small");
    t.begin("b1/large");
    t.begin("b2/small");
    small(120);
    clock.advance(10);
    t.observe("b1/large", 300);
    expect(t.summary("b1/")).toEqual({ inFlight: 1, latency: { ms: 300, at: 1_010 } });
    clock.advance(60_000);
    // Stale for the selectors, still shown (with when) on a status page.
    expect(t.latencyMs("b1/large")).toBeUndefined();
    expect(t.summary("b1/").latency).toEqual({ ms: 300, at: 1_010 });
    expect(t.summary("b3/")).toEqual({ inFlight: 0, latency: undefined });
  });
});
