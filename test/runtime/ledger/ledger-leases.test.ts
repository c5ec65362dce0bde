import { describe, expect, it } from "vitest";
import { MemoryLedgerStore } from "../../../src/ledger/ledger-memory-store.ts";
import { BudgetLedgerCore, type LeaseRequest, type ScopeLimits, type ScopeRef } from "../../../src/ledger/ledger.ts";
import { LeaseRules } from "../../../src/ledger/ledger-leases.ts";

const T0 = 1_800_000_000_000 - (1_800_000_000_000 % 86_400_000) + 3_600_000;
const DAY = 86_400_000;
const PATH = ["tenant:acme", "team:ml", "key:k1"] as const;
const W = { micros: 1_000, tokens: 100 };

function ledger() {
  const store = new MemoryLedgerStore();
  const core = new BudgetLedgerCore(store);
  return { store, core, leases: new LeaseRules(store, core) };
}

const usd = (limitMicros: number, periodMs = DAY): ScopeLimits => ({ money: { currency: "USD", limitMicros, periodMs } });
const refs = (limits: Partial<Record<string, ScopeLimits>> = {}): ScopeRef[] => PATH.map((name) => (limits[name] ? { name, limits: limits[name] } : { name }));
const leaseReq = (slices: number, limits: Partial<Record<string, ScopeLimits>> = {}, over: Partial<LeaseRequest> = {}): LeaseRequest => ({
  scopes: refs(limits),
  currency: "USD",
  amount: W,
  now: T0,
  slices,
  admitMs: 30_000,
  countsRequest: true,
  ...over,
});
const money = (core: BudgetLedgerCore, scope: string) => core.balance(scope, T0).money!;

describe("LeaseRules: granting a slice", () => {
  it("holds the slice on every scope of the path in one step, like a reservation", () => {
    const { core, leases } = ledger();
    const g = leases.lease("L1", leaseReq(8, { "tenant:acme": usd(1_000_000) }));
    expect(g).toMatchObject({ ok: true, leaseId: "L1", amount: { micros: 8_000, tokens: 800 }, requests: -1, admitUntil: T0 + 30_000 });
    expect(money(core, "tenant:acme")).toMatchObject({ held: 8_000, remaining: 992_000 });
    expect(core.attempt("L1")).toMatchObject({ state: "held", lease: { granted: { micros: 8_000, tokens: 800 } } });
    // Idempotent by lease id: a repeat returns the grant and holds nothing more.
    expect(leases.lease("L1", leaseReq(8, { "tenant:acme": usd(1_000_000) }))).toEqual(g);
    expect(money(core, "tenant:acme").held).toBe(8_000);
  });

  it("grants fewer worst cases nearer a limit, always leaving as much again", () => {
    const { core, leases } = ledger();
    // Room for 10 worst cases: a slice of at most 5 leaves 5.
    expect(leases.lease("L1", leaseReq(64, { "team:ml": usd(10_000) }))).toMatchObject({ ok: true, amount: { micros: 5_000 } });
    // 5 left: at most 2 with 2 left over... floor(5 / 2) = 2.
    expect(leases.lease("L2", leaseReq(64, { "team:ml": usd(10_000) }))).toMatchObject({ ok: true, amount: { micros: 2_000 } });
    // 3 left: one worst case is not a slice, so it is near the limit and nothing is written.
    expect(leases.lease("L3", leaseReq(64, { "team:ml": usd(10_000) }))).toEqual({ ok: false, leaseId: "L3", reason: "near_limit" });
    expect(core.attempt("L3")).toBeUndefined();
    expect(money(core, "team:ml")).toMatchObject({ held: 7_000, remaining: 3_000 });
    expect(core.balance("team:ml", T0).refusals).toBeUndefined();
  });

  it("counts the tightest limit of the path, tokens and request buckets included", () => {
    const { core, leases } = ledger();
    expect(leases.lease("L1", leaseReq(64, { "key:k1": { tokens: { limit: 1_000, windowMs: 60_000 } } }))).toMatchObject({ ok: true, amount: { tokens: 500 }, admitUntil: T0 + 30_000 });
    const r = ledger();
    expect(r.leases.lease("L1", leaseReq(64, { "key:k1": { requests: { perMinute: 60, burst: 20 } } }))).toMatchObject({ ok: true, requests: 10 });
    expect(r.core.balance("key:k1", T0).requests).toMatchObject({ available: 10 });
    expect(r.leases.lease("L2", leaseReq(64, { "key:k1": { requests: { perMinute: 60, burst: 20 } } }))).toMatchObject({ ok: true, requests: 5 });
    const tight = ledger();
    expect(tight.leases.lease("L1", leaseReq(64, { "key:k1": { requests: { perMinute: 1, burst: 3 } } }))).toMatchObject({ ok: false, reason: "near_limit" });
    expect(core.attempt("L1")?.lease).toBeDefined();
  });

  it("admits nothing past the end of the first window it charged", () => {
    const { leases } = ledger();
    const hourEnd = T0 - (T0 % 3_600_000) + 3_600_000;
    const now = hourEnd - 1_000;
    expect(leases.lease("L1", leaseReq(4, { "team:ml": usd(1_000_000, 3_600_000) }, { now }))).toMatchObject({ ok: true, admitUntil: hourEnd });
  });

  it("answers near_limit for a currency that differs from a budget's, so the attempt's own reservation names it", () => {
    const { core, leases } = ledger();
    core.setLimits("team:ml", { money: { currency: "EUR", limitMicros: 1_000_000, periodMs: DAY } }, T0);
    expect(leases.lease("L1", leaseReq(4))).toMatchObject({ ok: false, reason: "near_limit" });
  });

  it("answers a malformed lease invalid_argument, naming the fields", () => {
    const { leases } = ledger();
    expect(leases.lease("L1", leaseReq(1, {}, { admitMs: 0 }))).toMatchObject({ ok: false, reason: "invalid_argument", message: expect.stringMatching(/slices.*admitMs/) });
  });
});

describe("LeaseRules: settlement batches", () => {
  const use = (over: Partial<{ leaseId: string; amount: { micros: number; tokens: number }; admittedAt: number }> = {}) => ({ leaseId: "L1", amount: W, admittedAt: T0 + 10, ...over });

  it("settles attempts out of the slice, returns the rest on close, and changes nothing when repeated", () => {
    const { core, leases } = ledger();
    leases.lease("L1", leaseReq(4, { "tenant:acme": usd(1_000_000) }));
    const batch = [
      { op: "settle", attemptId: "a1", actual: { micros: 300, tokens: 30 }, lease: use() },
      { op: "settle", attemptId: "a2", actual: "unknown", detail: { estimate: { micros: 10, tokens: 1 } }, lease: use() },
      { op: "release", attemptId: "a3", lease: use() },
      { op: "close", leaseId: "L1", unusedRequests: 0 },
    ] as const;
    const first = leases.apply(batch, T0 + 50);
    expect(first.map((r) => ("state" in r ? r.state : r.ok))).toEqual(["settled", "pending_reconciliation", "released", "released"]);
    // Spent the actual, pending the unknown one's whole worst case, nothing else held.
    expect(money(core, "tenant:acme")).toMatchObject({ spent: 300, held: 1_000, pending: 1_000, remaining: 1_000_000 - 1_300 });
    expect(first[3]).toEqual({ ok: true, leaseId: "L1", state: "released", returned: { micros: 2_700, tokens: 270 } });
    expect(core.attempt("a1")).toMatchObject({ state: "settled", fromLease: "L1", settlement: { actual: { micros: 300, tokens: 30 } } });
    expect(core.attempt("a2")).toMatchObject({ state: "pending_reconciliation", pendingReason: "unknown_usage", fromLease: "L1" });
    // The batch retried (its answer was lost): every answer again, no booking twice.
    const again = leases.apply(batch, T0 + 80);
    expect(again.slice(0, 3)).toEqual(first.slice(0, 3));
    expect(again[3]).toMatchObject({ ok: true, returned: { micros: 0, tokens: 0 } });
    expect(money(core, "tenant:acme")).toMatchObject({ spent: 300, held: 1_000, pending: 1_000 });
    // The unknown one resolves like any pending attempt.
    expect(core.resolve("a2", { micros: 400, tokens: 40 }, { actor: "ops" }, T0 + 100)).toMatchObject({ ok: true, state: "settled" });
    expect(money(core, "tenant:acme")).toMatchObject({ spent: 700, held: 0, pending: 0 });
  });

  it("books an actual above the worst case in full, as an overrun", () => {
    const { core, leases } = ledger();
    leases.lease("L1", leaseReq(2, { "tenant:acme": usd(1_000_000) }));
    const [r] = leases.apply([{ op: "settle", attemptId: "a1", actual: { micros: 2_500, tokens: 10 }, lease: use() }], T0 + 50);
    expect(r).toMatchObject({ ok: true, state: "settled", settlement: { overrun: { micros: 1_500, tokens: 0 } } });
    // The slice held 2,000: all of it moved to spent, and the extra 500 is booked on top.
    expect(money(core, "tenant:acme")).toMatchObject({ spent: 2_500, held: 0, overrun: 1_500 });
  });

  it("moves what is left of an unclosed lease to reconciliation when it expires, and a late report still books against it", () => {
    const { core, leases } = ledger();
    leases.lease("L1", leaseReq(4, { "tenant:acme": usd(1_000_000) }, { leaseMs: 60_000 }));
    leases.apply([{ op: "settle", attemptId: "a1", actual: { micros: 200, tokens: 20 }, lease: use() }], T0 + 10);
    expect(core.expireLeases(T0 + 60_000)).toBe(1);
    expect(core.attempt("L1")).toMatchObject({ state: "pending_reconciliation", pendingReason: "lease_expired", amount: { micros: 3_800 } });
    expect(money(core, "tenant:acme")).toMatchObject({ spent: 200, held: 3_800, pending: 3_800 });
    // The holder was only slow: its late report settles out of the pending part, its close returns the rest.
    leases.apply([{ op: "settle", attemptId: "a2", actual: { micros: 500, tokens: 50 }, lease: use() }], T0 + 70_000);
    expect(money(core, "tenant:acme")).toMatchObject({ spent: 700, held: 3_300, pending: 3_300 });
    expect(leases.apply([{ op: "close", leaseId: "L1", unusedRequests: 0 }], T0 + 70_001)[0]).toMatchObject({ ok: true, returned: { micros: 3_300 } });
    expect(money(core, "tenant:acme")).toMatchObject({ spent: 700, held: 0, pending: 0 });
  });

  it("an expired lease nobody closes waits for an operator, who resolves it from the provider's records", () => {
    const { core, leases } = ledger();
    leases.lease("L1", leaseReq(4, { "tenant:acme": usd(1_000_000) }, { leaseMs: 60_000 }));
    core.expireLeases(T0 + 60_000);
    expect(core.pendingReconciliations(10).map((r) => r.attemptId)).toEqual(["L1"]);
    expect(core.resolve("L1", { micros: 1_200, tokens: 0 }, { actor: "ops", note: "two calls in the provider's log" }, T0 + 61_000)).toMatchObject({ ok: true, state: "settled" });
    expect(money(core, "tenant:acme")).toMatchObject({ spent: 1_200, held: 0, pending: 0 });
  });

  it("gives unused request tokens back to the bucket on close", () => {
    const { core, leases } = ledger();
    const limits = { "key:k1": { requests: { perMinute: 60, burst: 20 } } };
    leases.lease("L1", leaseReq(64, limits));
    expect(core.balance("key:k1", T0).requests?.available).toBe(10);
    leases.apply([{ op: "close", leaseId: "L1", unusedRequests: 7 }], T0);
    expect(core.balance("key:k1", T0).requests?.available).toBe(17);
  });

  it("applies per-attempt settlements and releases like the single calls, and refuses to settle a lease itself", () => {
    const { core, leases } = ledger();
    core.reserve("p1", { scopes: refs(), currency: "USD", amount: W, now: T0 });
    core.reserve("p2", { scopes: refs(), currency: "USD", amount: W, now: T0 });
    leases.lease("L1", leaseReq(2));
    const out = leases.apply(
      [
        { op: "settle", attemptId: "p1", actual: { micros: 10, tokens: 1 } },
        { op: "release", attemptId: "p2" },
        { op: "settle", attemptId: "L1", actual: { micros: 10, tokens: 1 } },
        { op: "settle", attemptId: "x", actual: { micros: 1, tokens: 1 }, lease: use({ leaseId: "nope" }) },
      ],
      T0 + 5,
    );
    expect(out.map((r) => (r.ok ? ("state" in r ? r.state : "ok") : r.reason))).toEqual(["settled", "released", "conflict", "unknown_attempt"]);
  });

  it("leaves a lease out of usage reports while its holder has it open", () => {
    const { core, leases } = ledger();
    leases.lease("L1", leaseReq(4, {}, { meta: { requestId: "r" } }));
    leases.apply([{ op: "settle", attemptId: "a1", actual: { micros: 100, tokens: 10 }, lease: { ...use(), meta: { model: "m@1", priceVersion: "v" } } }], T0 + 10);
    const report = core.usageReport("team:ml", T0 - DAY, T0 + DAY);
    expect(report).toEqual({ ok: true, rows: [{ model: "m@1", priceVersion: "v", currency: "USD", attempts: 1, settledMicros: 100, settledTokens: 10, pendingMicros: 0, pendingTokens: 0 }] });
  });
});
