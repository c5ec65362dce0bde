import { describe, expect, it } from "vitest";
import { budgetLedgerClient, type ReserveArgs } from "../../../src/ledger/ledger-client.ts";
import type { Scheduler } from "../../../src/deps/scheduler.ts";
import { LeasingLedgerClient } from "../../../src/ledger/leasing-ledger-client.ts";
import type { ScopeLimits } from "../../../src/ledger/ledger.ts";
import { ManualTimers } from "../support/engine-harness.ts";
import { FakeClock } from "../support/fixtures.ts";
import { memoryLedgers } from "./ledger-fakes.ts";

const W = { micros: 1_000, tokens: 100 };
const usd = (limitMicros: number): ScopeLimits => ({ money: { currency: "USD", limitMicros, periodMs: 86_400_000 } });

function setup(limits: ScopeLimits = usd(1_000_000_000), stripes = 1) {
  const clock = new FakeClock(1_800_000_000_000 - (1_800_000_000_000 % 86_400_000) + 3_600_000);
  const timers = new ManualTimers(clock);
  const ledgers = memoryLedgers({
    get now() {
      return clock.now();
    },
  });
  const faults = { loseNextBatchAnswer: false };
  // A ledger whose next batch answer is lost on the way back, after the batch was applied.
  const objectFor = (name: string) => {
    const o = ledgers.objectFor(name);
    return {
      ...o,
      settleBatch: async (items: Parameters<typeof o.settleBatch>[0]) => {
        const out = await o.settleBatch(items);
        if (faults.loseNextBatchAnswer) {
          faults.loseNextBatchAnswer = false;
          throw new Error("connection reset");
        }
        return out;
      },
    };
  };
  let n = 0;
  const isolate = (scheduler: Scheduler = timers) => {
    const plain = budgetLedgerClient(objectFor, { stripes: () => stripes });
    return new LeasingLedgerClient(plain, objectFor, { clock, scheduler, newId: () => `id${++n}`, stripes: () => stripes, flushDelayMs: 20, idleMs: 1_000 });
  };
  const scopes = [{ name: "tenant:t", limits }, { name: "key:k" }];
  const args = (over: Partial<ReserveArgs> = {}): ReserveArgs => ({ scopes, currency: "USD", amount: W, countsRequest: true, ...over });
  const kept: Promise<unknown>[] = [];
  const keepAlive = (p: Promise<unknown>) => void kept.push(p);
  /** Lets queued promise callbacks run, then fires every timer due within `ms`. */
  const tick = async (ms = 25) => {
    for (let i = 0; i < 5; i++) await Promise.resolve();
    timers.advance(ms);
    for (let i = 0; i < 20; i++) await Promise.resolve();
  };
  const balance = () => ledgers.core("tenant:t").balance("tenant:t", clock.now()).money!;
  return { clock, timers, ledgers, isolate, args, keepAlive, tick, balance, kept, faults };
}

const calls = (list: string[], method: string) => list.filter((c) => c.endsWith(`.${method}`)).length;

type Handle = Awaited<ReturnType<LeasingLedgerClient["reserve"]>>["handle"];
/** Settles through the queue; resolves with the ledger's answer once the batch is written. */
const settle = (client: LeasingLedgerClient, handle: Handle, id: string, actual: { micros: number; tokens: number } | "unknown", keepAlive?: (p: Promise<unknown>) => void) =>
  new Promise<any>((resolve) => void client.settle(handle, id, actual, undefined, { report: resolve, ...(keepAlive ? { keepAlive } : {}) }).then((q) => expect(q.state).toBe("queued")));

describe("LeasingLedgerClient", () => {
  it("admits most attempts from a lease without a ledger call, and settles them in one batch", async () => {
    const s = setup();
    const client = s.isolate();
    const first = await client.reserve("a0", s.args(), s.keepAlive);
    expect(first.result).toMatchObject({ ok: true, attemptId: "a0" });
    expect(first.handle.lease?.leaseId).toBe("lease-id1");
    const rest = await Promise.all(Array.from({ length: 3 }, (_, i) => client.reserve(`a${i + 1}`, s.args(), s.keepAlive)));
    expect(rest.every((r) => r.result.ok && r.handle.lease !== undefined)).toBe(true);
    expect(calls(s.ledgers.calls, "acquire")).toBe(1);
    expect(calls(s.ledgers.calls, "reserve")).toBe(0);
    const settled = [first, ...rest].map((r, i) => settle(client, r.handle, `a${i}`, { micros: 10, tokens: 1 }, s.keepAlive));
    await s.tick();
    expect((await Promise.all(settled)).map((r) => r.ok && r.state)).toEqual(["settled", "settled", "settled", "settled"]);
    expect(calls(s.ledgers.calls, "settleBatch")).toBe(1);
    expect(s.ledgers.core("tenant:t").attempt("a2")).toMatchObject({ state: "settled", fromLease: "lease-id1" });
    expect(s.balance()).toMatchObject({ spent: 40 });
  });

  it("one attempt at a time spending a little each: a handful of leases, not one per admission", async () => {
    const s = setup();
    const client = s.isolate();
    // Each attempt spends 15% of its worst case: the first slices run low by spending, and a
    // lease kept just above empty by the returned rest must not ask for a new one every time.
    for (let i = 0; i < 400; i++) {
      const r = await client.reserve(`s${i}`, s.args({ countsRequest: false }), s.keepAlive);
      expect(r.result.ok).toBe(true);
      void settle(client, r.handle, `s${i}`, { micros: 150, tokens: 15 }, s.keepAlive);
      if (i % 50 === 49) await s.tick();
    }
    await s.tick();
    await s.tick();
    const leases = calls(s.ledgers.calls, "acquire") + calls(s.ledgers.calls, "lease");
    // Slices grow with spending (4, 8, 16, … worst cases): logarithmic in the attempts.
    expect(leases).toBeGreaterThan(1);
    expect(leases).toBeLessThanOrEqual(8);
    expect(calls(s.ledgers.calls, "reserve")).toBe(0);
    expect(s.balance().spent).toBe(400 * 150);
  });

  it("a crowd arriving at once waits for the lease being fetched instead of each calling the ledger", async () => {
    const s = setup();
    const client = s.isolate();
    const all = await Promise.all(Array.from({ length: 200 }, (_, i) => client.reserve(`c${i}`, s.args(), s.keepAlive)));
    expect(all.every((r) => r.result.ok)).toBe(true);
    // The first lease is small; those it had no room for sized the second one.
    expect(calls(s.ledgers.calls, "acquire")).toBeLessThanOrEqual(3);
    expect(calls(s.ledgers.calls, "reserve")).toBe(0);
    expect(all.filter((r) => r.handle.lease !== undefined)).toHaveLength(200);
  });

  it("returns an idle path's lease after idleMs, leaving nothing held", async () => {
    const s = setup();
    const client = s.isolate();
    const r = await client.reserve("a0", s.args(), s.keepAlive);
    const done = settle(client, r.handle, "a0", { micros: 10, tokens: 1 }, s.keepAlive);
    await s.tick();
    await done;
    expect(s.balance().held).toBeGreaterThan(0);
    await s.tick(1_000);
    await s.tick();
    expect(s.balance()).toMatchObject({ spent: 10, held: 0 });
    expect(s.ledgers.core("tenant:t").attempt("lease-id1")).toMatchObject({ state: "released" });
    expect(client.stats()).toEqual({ leases: 0, inFlight: 0, queued: 0 });
  });

  it("returns every path's lease within idleMs of its own idleness, when paths go idle at staggered times", async () => {
    const s = setup();
    const client = s.isolate();
    const other = [{ name: "tenant:u", limits: usd(1_000_000_000) }, { name: "key:v" }];
    const heldOf = (root: string) => s.ledgers.core(root).balance(root, s.clock.now()).money!.held;
    const a = await client.reserve("a0", s.args(), s.keepAlive);
    const b = await client.reserve("b0", s.args({ scopes: other }), s.keepAlive);
    // Path a goes idle first and arms the isolate's idle timer; b goes idle 500 ms later, while it is armed.
    void settle(client, a.handle, "a0", { micros: 10, tokens: 1 }, s.keepAlive);
    await s.tick(500);
    void settle(client, b.handle, "b0", { micros: 10, tokens: 1 }, s.keepAlive);
    const bIdleAt = s.clock.now();
    await s.tick(600);
    // a has been idle for idleMs: its lease is back; b's is not due yet.
    expect(heldOf("tenant:t")).toBe(0);
    expect(heldOf("tenant:u")).toBeGreaterThan(0);
    // Nothing arrives: b's lease is back within idleMs (plus the flush delay) of its own idleness.
    while (s.clock.now() < bIdleAt + 1_000 + 20) await s.tick(10);
    await s.tick(0);
    expect(heldOf("tenant:u")).toBe(0);
    expect(client.stats()).toEqual({ leases: 0, inFlight: 0, queued: 0 });
  });

  it("arms the idle timer again when the armed one never fired (its request ended): the idle leases still come back", async () => {
    const s = setup();
    // The first idle timer belongs to a request the runtime ended: it never fires.
    let dropped = 0;
    const client = s.isolate({ schedule: (ms, fn) => (ms === 1_000 && dropped++ === 0 ? () => {} : s.timers.schedule(ms, fn)) });
    const other = [{ name: "tenant:u", limits: usd(1_000_000_000) }, { name: "key:v" }];
    const heldOf = (root: string) => s.ledgers.core(root).balance(root, s.clock.now()).money!.held;
    const a = await client.reserve("a0", s.args(), s.keepAlive);
    void settle(client, a.handle, "a0", { micros: 10, tokens: 1 }, s.keepAlive);
    await s.tick(2_100);
    expect(dropped).toBe(1);
    expect(heldOf("tenant:t")).toBeGreaterThan(0);
    // The next path to go idle finds that timer long overdue and arms a new one, which returns both.
    const b = await client.reserve("b0", s.args({ scopes: other }), s.keepAlive);
    void settle(client, b.handle, "b0", { micros: 10, tokens: 1 }, s.keepAlive);
    await s.tick(1_000);
    await s.tick();
    expect(heldOf("tenant:t")).toBe(0);
    expect(heldOf("tenant:u")).toBe(0);
    expect(client.stats()).toEqual({ leases: 0, inFlight: 0, queued: 0 });
  });

  it("near a limit goes one by one and admits exactly what fits, however many race", async () => {
    // Room for exactly 7 worst cases: no slice can hold two and leave as much again for long.
    const s = setup(usd(7 * W.micros));
    const client = s.isolate();
    const all = await Promise.all(Array.from({ length: 40 }, (_, i) => client.reserve(`r${i}`, s.args(), s.keepAlive)));
    expect(all.filter((r) => r.result.ok)).toHaveLength(7);
    expect(s.balance()).toMatchObject({ held: 7 * W.micros, remaining: 0 });
  });

  it("two isolates leasing from one ledger never admit more than the limit", async () => {
    const s = setup(usd(100 * W.micros));
    const a = s.isolate();
    const b = s.isolate();
    const admitted: { client: LeasingLedgerClient; handle: Handle; id: string }[] = [];
    for (let round = 0; round < 30; round++) {
      const got = await Promise.all(
        [a, b].flatMap((client, c) => Array.from({ length: 4 }, (_, i) => client.reserve(`x${round}-${c}-${i}`, s.args(), s.keepAlive).then((r) => ({ client, r, id: `x${round}-${c}-${i}` })))),
      );
      for (const g of got) if (g.r.result.ok) admitted.push({ client: g.client, handle: g.r.handle, id: g.id });
      // Everything admitted so far is covered by what the ledger holds or has booked.
      const m = s.balance();
      expect(m.spent + m.held).toBeLessThanOrEqual(100 * W.micros);
      // Half of them finish at their whole worst case, so the budget runs out over the rounds.
      const finishing = admitted.splice(0, Math.ceil(admitted.length / 2));
      const settled = finishing.map((x) => settle(x.client, x.handle, x.id, W, s.keepAlive));
      await s.tick();
      await Promise.all(settled);
    }
    const m = s.balance();
    expect(m.spent).toBeLessThanOrEqual(100 * W.micros);
    expect(m.spent + m.held).toBeLessThanOrEqual(100 * W.micros);
  });

  it("a crashed isolate's lease expires into reconciliation, never refunded", async () => {
    const s = setup();
    const crashed = s.isolate();
    await crashed.reserve("a0", s.args({ leaseMs: 60_000 }), s.keepAlive);
    const held = s.balance().held;
    expect(held).toBeGreaterThanOrEqual(4 * W.micros);
    s.clock.advance(60_000);
    expect(s.ledgers.core("tenant:t").expireLeases(s.clock.now())).toBe(1);
    expect(s.balance()).toMatchObject({ held, pending: held });
    expect(s.ledgers.core("tenant:t").pendingReconciliations(10)).toEqual([expect.objectContaining({ attemptId: "lease-id1", pendingReason: "lease_expired" })]);
  });

  it("drain closes idle leases at once and the rest after their last attempt, then reserves one by one", async () => {
    const s = setup();
    const client = s.isolate();
    const r = await client.reserve("a0", s.args(), s.keepAlive);
    const drained = client.drain();
    await s.tick();
    await drained;
    expect(s.ledgers.core("tenant:t").attempt("lease-id1")?.state).toBe("held");
    const settled = settle(client, r.handle, "a0", { micros: 10, tokens: 1 }, s.keepAlive);
    await s.tick();
    await settled;
    expect(s.ledgers.core("tenant:t").attempt("lease-id1")?.state).toBe("released");
    expect(s.balance()).toMatchObject({ spent: 10, held: 0 });
    const later = await client.reserve("a1", s.args(), s.keepAlive);
    expect(later.handle.lease).toBeUndefined();
    expect(calls(s.ledgers.calls, "reserve")).toBe(1);
  });

  it("a batch whose answer is lost is retried whole, and books each settlement once", async () => {
    const s = setup();
    const client = s.isolate();
    const r = await client.reserve("a0", s.args(), s.keepAlive);
    const p = await client.reserve("p0", s.args({ scopes: [{ name: "tenant:t", limits: usd(1_000_000_000) }, { name: "key:other" }] }), s.keepAlive);
    s.faults.loseNextBatchAnswer = true;
    const settled = [settle(client, r.handle, "a0", { micros: 10, tokens: 1 }, s.keepAlive), settle(client, p.handle, "p0", { micros: 5, tokens: 1 }, s.keepAlive)];
    await s.tick();
    await s.tick(100);
    expect((await Promise.all(settled)).map((x) => x.ok && x.state)).toEqual(["settled", "settled"]);
    expect(calls(s.ledgers.calls, "settleBatch")).toBe(2);
    expect(s.balance()).toMatchObject({ spent: 15 });
  });
});
