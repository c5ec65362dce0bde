import { describe, expect, it } from "vitest";
import type { BreakerReport, BreakerSnapshot } from "../../../src/traffic/breaker.ts";
import { BreakerCache, type BreakerCacheOptions, type Schedule } from "../../../src/traffic/breaker-cache.ts";
import type { BreakerClient, BreakerCounts, BreakerDecision } from "../../../src/traffic/breaker-client.ts";
import { FakeClock } from "./helpers.ts";

function snap(over: Partial<BreakerSnapshot> = {}): BreakerSnapshot {
  return { state: "closed", failures: 0, samples: 0, openUntil: undefined, probeSuccesses: 0, permitsOutstanding: 0, halfOpenProbes: 1, changedAt: 0, opens: 0, ...over };
}

/** A breaker client whose answers the test sets, recording every call. */
class FakeClient implements BreakerClient {
  readonly calls: string[] = [];
  readonly reports: Array<{ id: string; outcome: BreakerReport; permitId: string | undefined }> = [];
  readonly batches: Array<{ id: string; counts: BreakerCounts }> = [];
  states = new Map<string, BreakerSnapshot>();
  decision: BreakerDecision = { allowed: true, probe: true, permitId: "probe-1", snapshot: snap({ state: "half_open", permitsOutstanding: 1 }) };
  /** When set, every call fails this way (sync throw or rejection). */
  fail: "throw" | "reject" | undefined;
  /** When set, calls wait for it before answering. */
  gate: Promise<void> | undefined;

  async #answer<T>(call: string, value: () => T): Promise<T> {
    this.calls.push(call);
    if (this.fail === "reject") throw new Error(`${call} failed`);
    if (this.gate) await this.gate;
    return value();
  }
  state(id: string): Promise<BreakerSnapshot> {
    if (this.fail === "throw") throw new Error("sync throw");
    return this.#answer(`state:${id}`, () => this.states.get(id) ?? snap());
  }
  acquire(id: string): Promise<BreakerDecision> {
    if (this.fail === "throw") throw new Error("sync throw");
    return this.#answer(`acquire:${id}`, () => this.decision);
  }
  report(id: string, outcome: BreakerReport, permitId?: string): Promise<BreakerSnapshot> {
    if (this.fail === "throw") throw new Error("sync throw");
    return this.#answer(`report:${id}`, () => (this.reports.push({ id, outcome, permitId }), this.states.get(id) ?? snap()));
  }
  reportMany(id: string, counts: BreakerCounts): Promise<BreakerSnapshot> {
    if (this.fail === "throw") throw new Error("sync throw");
    return this.#answer(`reportMany:${id}`, () => (this.batches.push({ id, counts }), this.states.get(id) ?? snap()));
  }
}

/** A `ctx.waitUntil` stand-in that collects the background work. */
class Background {
  readonly work: Promise<unknown>[] = [];
  readonly schedule: Schedule = (p) => void this.work.push(p);
  async settle(): Promise<void> {
    while (this.work.length > 0) await Promise.all(this.work.splice(0));
  }
}

function setup(options: BreakerCacheOptions = {}) {
  const clock = new FakeClock(1_000_000);
  const client = new FakeClient();
  const bg = new Background();
  const errors: Array<{ id: string; op: string }> = [];
  const cache = new BreakerCache(client, clock, { ttlMs: 1000, flushMs: 0, onError: (_e, id, op) => void errors.push({ id, op }), ...options });
  return { clock, client, bg, errors, cache, gate: cache.forRequest(bg.schedule) };
}

describe("BreakerCache: state", () => {
  it("treats an unknown backend as closed at once and fetches its state in the background", async () => {
    const { client, bg, gate } = setup();
    client.states.set("b1", snap({ state: "open", openUntil: 1_030_000 }));
    expect(gate.isOpen("b1")).toBe(false);
    expect(gate.admission("b1")).toBe("allow");
    expect(client.calls).toEqual(["state:b1"]); // one refresh in flight, not one per call
    await bg.settle();
    expect(gate.isOpen("b1")).toBe(true);
    expect(gate.admission("b1")).toBe("deny");
    expect(gate.state("b1")).toBe("open");
  });

  it("serves the cached state within the TTL without calling the client, and refreshes after it", async () => {
    const { clock, client, bg, gate } = setup();
    gate.isOpen("b1");
    await bg.settle();
    client.calls.length = 0;
    client.states.set("b1", snap({ state: "open", openUntil: clock.now() + 30_000 }));
    clock.advance(999);
    for (let i = 0; i < 100; i++) expect(gate.isOpen("b1")).toBe(false);
    expect(client.calls).toEqual([]);
    clock.advance(1);
    expect(gate.isOpen("b1")).toBe(false); // the stale view answers; the refresh runs in the background
    expect(client.calls).toEqual(["state:b1"]);
    await bg.settle();
    expect(gate.isOpen("b1")).toBe(true);
    expect(client.calls).toEqual(["state:b1"]);
  });

  it("maps the cached view to an admission hint", async () => {
    const { clock, client, bg, gate } = setup();
    const now = clock.now();
    client.states.set("open", snap({ state: "open", openUntil: now + 500 }));
    client.states.set("half-free", snap({ state: "half_open", permitsOutstanding: 1, halfOpenProbes: 2 }));
    client.states.set("half-full", snap({ state: "half_open", permitsOutstanding: 2, halfOpenProbes: 2 }));
    for (const id of ["open", "half-free", "half-full"]) gate.admission(id);
    await bg.settle();
    expect(gate.admission("open")).toBe("deny");
    expect(gate.admission("half-free")).toBe("probe");
    expect(gate.admission("half-full")).toBe("deny");
    clock.advance(500); // openUntil passed: probing is due even before the next refresh answers
    expect(gate.admission("open")).toBe("probe");
  });

  it("fails open when the client fails, never throws, and retries only after a TTL", async () => {
    for (const mode of ["throw", "reject"] as const) {
      const { clock, client, bg, errors, gate } = setup();
      client.fail = mode;
      expect(gate.isOpen("b1")).toBe(false);
      await bg.settle();
      expect(gate.isOpen("b1")).toBe(false);
      expect(errors).toEqual([{ id: "b1", op: "state" }]);
      const calls = client.calls.length;
      for (let i = 0; i < 10; i++) gate.isOpen("b1");
      await bg.settle();
      expect(client.calls.length).toBe(calls);
      clock.advance(1000);
      gate.isOpen("b1");
      await bg.settle();
      expect(errors).toHaveLength(2);
    }
  });

  it("forgets a half-open view on failure, but keeps an open one until its openUntil", async () => {
    const { clock, client, bg, gate } = setup();
    client.states.set("open", snap({ state: "open", openUntil: clock.now() + 5_000 }));
    client.states.set("half", snap({ state: "half_open", permitsOutstanding: 1 }));
    gate.isOpen("open");
    gate.isOpen("half");
    await bg.settle();
    client.fail = "reject";
    clock.advance(1_000);
    gate.isOpen("open");
    gate.isOpen("half");
    await bg.settle();
    expect(gate.admission("open")).toBe("deny");
    expect(gate.admission("half")).toBe("allow");
    clock.advance(4_000);
    expect(gate.admission("open")).toBe("probe"); // the stale view says probing is due
    await bg.settle();
    // The refresh failed again: an open view past its openUntil says nothing more, so fail open.
    expect(gate.admission("open")).toBe("allow");
  });

  it("survives a schedule that throws and an error handler that throws", async () => {
    const client = new FakeClient();
    client.fail = "reject";
    const cache = new BreakerCache(client, new FakeClock(), {
      onError: () => {
        throw new Error("handler broke");
      },
    });
    const throwing: Schedule = () => {
      throw new Error("waitUntil after the response");
    };
    expect(cache.isOpen("b1", throwing)).toBe(false);
    expect(() => cache.report("b1", "failure", throwing, "probe-1")).not.toThrow();
    expect(await cache.acquireProbe("b1")).toEqual({ allowed: true, probe: false });
  });

  it("lets a new refresh start when one has hung past refreshTimeoutMs", async () => {
    const { clock, client, gate } = setup({ refreshTimeoutMs: 5_000 });
    client.gate = new Promise(() => {});
    gate.isOpen("b1");
    clock.advance(4_999);
    gate.isOpen("b1");
    expect(client.calls).toEqual(["state:b1"]);
    clock.advance(1);
    gate.isOpen("b1");
    expect(client.calls).toEqual(["state:b1", "state:b1"]);
  });

  it("never lets an older answer overwrite a newer one", async () => {
    const { client, bg, gate } = setup();
    let release!: () => void;
    client.gate = new Promise((r) => (release = r));
    client.states.set("b1", snap({ state: "closed" }));
    gate.isOpen("b1"); // refresh #1, held
    client.gate = undefined;
    const open = snap({ state: "open", openUntil: Number.MAX_SAFE_INTEGER });
    client.decision = { allowed: false, probe: false, snapshot: open };
    await gate.acquireProbe("b1"); // a newer answer: open
    expect(gate.admission("b1")).toBe("deny");
    release();
    await bg.settle();
    expect(gate.admission("b1")).toBe("deny");
  });

  it("bounds the number of cached backends", () => {
    const { cache, bg } = setup({ maxEntries: 3 });
    for (const id of ["a", "b", "c", "d", "e"]) cache.isOpen(id, bg.schedule);
    expect(cache.size).toBe(3);
  });

  it("rejects invalid options", () => {
    const client = new FakeClient();
    expect(() => new BreakerCache(client, new FakeClock(), { ttlMs: -1 })).toThrow(RangeError);
    expect(() => new BreakerCache(client, new FakeClock(), { maxEntries: 0 })).toThrow(/maxEntries/);
  });
});

describe("BreakerCache: probes", () => {
  it("returns the breaker's permit and takes its state as the new view", async () => {
    const { client, gate } = setup();
    expect(await gate.acquireProbe("b1")).toEqual({ allowed: true, probe: true, permitId: "probe-1" });
    expect(gate.state("b1")).toBe("half_open");
    expect(gate.admission("b1")).toBe("deny"); // the one permit is taken
    client.decision = { allowed: false, probe: false, snapshot: snap({ state: "half_open", permitsOutstanding: 1 }) };
    expect(await gate.acquireProbe("b1")).toEqual({ allowed: false, probe: false });
  });

  it("keeps one acquire per backend in flight; concurrent callers are refused at once", async () => {
    const { client, gate } = setup();
    let release!: () => void;
    client.gate = new Promise((r) => (release = r));
    const first = gate.acquireProbe("b1");
    const others = await Promise.all(Array.from({ length: 5 }, () => gate.acquireProbe("b1")));
    expect(others.every((a) => !a.allowed)).toBe(true);
    release();
    expect((await first).allowed).toBe(true);
    expect(client.calls.filter((c) => c.startsWith("acquire"))).toHaveLength(1);
  });

  it("fails open when acquire fails or times out", async () => {
    const { client, errors, gate } = setup();
    client.fail = "reject";
    expect(await gate.acquireProbe("b1")).toEqual({ allowed: true, probe: false });
    let fire!: () => void;
    const slow = setup({ delay: () => new Promise<void>((r) => (fire = r)) });
    slow.client.gate = new Promise(() => {});
    const pending = slow.gate.acquireProbe("b2");
    await Promise.resolve();
    fire();
    expect(await pending).toEqual({ allowed: true, probe: false });
    expect(slow.errors).toEqual([{ id: "b2", op: "acquire" }]);
    expect(errors).toEqual([{ id: "b1", op: "acquire" }]);
  });
});

describe("BreakerCache: reports", () => {
  it("forwards probe outcomes at once with their permit, through the schedule", async () => {
    const { client, bg, gate } = setup({ flushMs: 250 });
    gate.report("b1", "neutral", "probe-7");
    gate.report("b1", "failure", "probe-8");
    expect(bg.work).toHaveLength(2);
    await bg.settle();
    expect(client.reports).toEqual([
      { id: "b1", outcome: "neutral", permitId: "probe-7" },
      { id: "b1", outcome: "failure", permitId: "probe-8" },
    ]);
  });

  it("sums other outcomes per backend over flushMs and sends one batch", async () => {
    let fire!: () => void;
    const { client, bg, gate } = setup({ flushMs: 250, delay: () => new Promise<void>((r) => (fire = r)) });
    for (let i = 0; i < 7; i++) gate.report("b1", "success");
    for (let i = 0; i < 3; i++) gate.report("b1", "failure");
    gate.report("b1", "neutral"); // says nothing about the backend: dropped
    expect(bg.work).toHaveLength(1);
    expect(client.calls).toEqual([]);
    fire();
    await bg.settle();
    expect(client.batches).toEqual([{ id: "b1", counts: { successes: 7, failures: 3 } }]);
    gate.report("b1", "failure");
    expect(bg.work).toHaveLength(1); // a new batch after the flush
    fire();
    await bg.settle();
    expect(client.batches).toHaveLength(2);
  });

  it("takes the breaker's answer to a report as the new view (a trip is seen at once)", async () => {
    const { client, bg, gate } = setup();
    client.states.set("b1", snap({ state: "open", openUntil: Number.MAX_SAFE_INTEGER }));
    gate.report("b1", "failure");
    await bg.settle();
    expect(gate.isOpen("b1")).toBe(true);
    expect(client.calls).toEqual(["reportMany:b1"]); // the view was fresh: no extra state call
  });

  it("a failing report never throws into the caller", async () => {
    const { client, bg, errors, gate } = setup();
    client.fail = "throw";
    expect(() => gate.report("b1", "failure")).not.toThrow();
    expect(() => gate.report("b1", "success", "probe-1")).not.toThrow();
    await bg.settle();
    expect(errors).toEqual([
      { id: "b1", op: "report" },
      { id: "b1", op: "report" },
    ]);
  });
});
