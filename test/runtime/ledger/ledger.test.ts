import { describe, expect, it } from "vitest";
import { MemoryLedgerStore } from "../../../src/ledger/ledger-memory-store.ts";
import { BudgetLedgerCore, type ReserveRequest, type ScopeLimits, type ScopeRef } from "../../../src/ledger/ledger.ts";

const T0 = 1_800_000_000_000;
const DAY = 86_400_000;
const PATH = ["org:acme", "team:ml", "project:x", "key:k1"] as const;

function ledger() {
  const store = new MemoryLedgerStore();
  const l = new BudgetLedgerCore(store);
  return { store, l };
}

const refs = (limits: Partial<Record<string, ScopeLimits>> = {}): ScopeRef[] => PATH.map((name) => (limits[name] ? { name, limits: limits[name] } : { name }));
const req = (micros: number, tokens = 0, over: Partial<ReserveRequest> = {}): ReserveRequest => ({ scopes: refs(), currency: "USD", amount: { micros, tokens }, now: T0, ...over });
const usd = (limitMicros: number, periodMs = DAY): ScopeLimits => ({ money: { currency: "USD", limitMicros, periodMs } });

/** Money held at every scope of the path, over all its counters (limited or not). */
const heldAt = (l: BudgetLedgerCore) => PATH.map((s) => l.usage(s).reduce((n, c) => n + (c.metric === "money:USD" ? c.held : 0), 0));

describe("BudgetLedgerCore: reserve", () => {
  it("reserves in every scope of the path, counting unlimited scopes too, and reports what remains", () => {
    const { l } = ledger();
    l.setLimits("org:acme", usd(10_000_000), T0);
    expect(l.reserve("a1", req(2_500_000, 100))).toEqual({ ok: true, attemptId: "a1", leaseExpiresAt: T0 + 600_000, remaining: [{ scope: "org:acme", metric: "money:USD", remaining: 7_500_000 }] });
    expect(l.balance("org:acme", T0).money).toMatchObject({ limit: 10_000_000, held: 2_500_000, spent: 0, remaining: 7_500_000 });
    for (const s of PATH.slice(1)) expect(l.usage(s)).toEqual(expect.arrayContaining([expect.objectContaining({ metric: "money:USD", windowStart: 0, held: 2_500_000 })]));
  });

  it.each(PATH.map((s, i) => [s, i] as const))("refuses at %s alone, leaving no dangling reservation at the other levels", (scope) => {
    const { l } = ledger();
    for (const s of PATH) l.setLimits(s, usd(s === scope ? 1_000 : 1_000_000), T0);
    expect(l.reserve("ok", req(600))).toMatchObject({ ok: true });
    const r = l.reserve("too-much", req(500));
    expect(r).toMatchObject({ ok: false, reason: "money_budget_exceeded", scope, limit: 1_000, used: 600, requested: 500, retryAfterMs: DAY - (T0 % DAY) });
    expect(heldAt(l)).toEqual([600, 600, 600, 600]);
    // No attempt record: only the refusing scope counts it.
    expect(l.attempt("too-much")).toBeUndefined();
    for (const s of PATH) expect(l.balance(s, T0).refusals).toEqual(s === scope ? { dayStart: T0 - (T0 % DAY), dayEnd: T0 - (T0 % DAY) + DAY, total: 1, byReason: { money_budget_exceeded: 1 } } : undefined);
  });

  it("reports the narrowest failing scope when several fail", () => {
    const { l } = ledger();
    l.setLimits("org:acme", usd(100), T0);
    l.setLimits("project:x", usd(100), T0);
    l.setLimits("team:ml", { tokens: { limit: 10, windowMs: 60_000 } }, T0);
    expect(l.reserve("a", req(500, 50))).toMatchObject({ ok: false, scope: "project:x", reason: "money_budget_exceeded" });
    expect(l.reserve("b", req(50, 50))).toMatchObject({ ok: false, scope: "team:ml", reason: "token_limit_exceeded", metric: "tokens", retryAfterMs: 60_000 - (T0 % 60_000) });
    expect(heldAt(l)).toEqual([0, 0, 0, 0]);
  });

  it("refuses a currency that differs from the scope's budget", () => {
    const { l } = ledger();
    l.setLimits("team:ml", { money: { currency: "EUR", limitMicros: 1_000_000, periodMs: DAY } }, T0);
    expect(l.reserve("a", req(1))).toMatchObject({ ok: false, reason: "currency_mismatch", scope: "team:ml", metric: "money:USD" });
    l.setLimits("team:ml", { balance: { currency: "EUR" } }, T0);
    expect(l.reserve("b", req(1))).toMatchObject({ ok: false, reason: "currency_mismatch", scope: "team:ml", metric: "balance:USD" });
    expect(l.reserve("b2", req(1)).ok).toBe(false);
    expect(heldAt(l)).toEqual([0, 0, 0, 0]);
  });

  it("is idempotent by admitted attempt id: a second reserve returns the grant; a refused id is evaluated afresh", () => {
    const { l } = ledger();
    l.setLimits("org:acme", usd(1_000), T0);
    const first = l.reserve("a", req(800));
    expect(l.reserve("a", req(100))).toEqual(first);
    expect(l.balance("org:acme", T0).money?.held).toBe(800);
    const refused = l.reserve("b", req(800));
    expect(refused).toMatchObject({ ok: false, reason: "money_budget_exceeded" });
    expect(l.reserve("b", req(800))).toEqual(refused);
    // The refusal charged nothing and was not kept: once there is room, the same id is granted.
    l.release("a", T0);
    expect(l.reserve("b", req(800))).toMatchObject({ ok: true, attemptId: "b" });
    expect(l.balance("org:acme", T0)).toMatchObject({ money: { held: 800 }, refusals: { total: 2, byReason: { money_budget_exceeded: 2 } } });
  });

  it("admits exactly up to the limit and a new period starts afresh", () => {
    const { l } = ledger();
    l.setLimits("key:k1", usd(3_000), T0);
    for (const id of ["a", "b", "c"]) expect(l.reserve(id, req(1_000)).ok).toBe(true);
    expect(l.reserve("d", req(1)).ok).toBe(false);
    expect(l.reserve("e", req(1_000, 0, { now: T0 + DAY })).ok).toBe(true);
  });

  it("stores the attempt's metadata", () => {
    const { l } = ledger();
    l.reserve("a", req(1, 1, { meta: { requestId: "req-1", model: "gpt@3", priceVersion: "p7" } }));
    expect(l.attempt("a")).toMatchObject({ state: "held", scopes: [...PATH], meta: { requestId: "req-1", model: "gpt@3", priceVersion: "p7" } });
  });

  it("answers invalid request-path arguments as invalid_argument results without writing, naming the field", () => {
    const { l, store } = ledger();
    const invalid = (field: RegExp, attemptId = "a") => ({ ok: false, attemptId, reason: "invalid_argument", message: expect.stringMatching(field) });
    expect(l.reserve("a", req(1.5))).toEqual(invalid(/^invalid ledger reservation: amount\.micros/));
    expect(l.reserve("a", req(-1))).toEqual(invalid(/amount\.micros/));
    expect(l.reserve("a", { ...req(1), scopes: [] })).toEqual(invalid(/scopes must be/));
    expect(l.reserve("a", { ...req(1), scopes: [{ name: "x" }, { name: "x" }] })).toEqual(invalid(/distinct/));
    expect(l.reserve("a", { ...req(1), scopes: ["x"] as unknown as ScopeRef[] })).toEqual(invalid(/scopes\[0\]\.name/));
    expect(l.reserve("a", { ...req(1), scopes: [{ name: "x", limits: { requests: { perMinute: 1.5, burst: 1 } } }] })).toEqual(invalid(/scopes\[0\]\.limits\.requests\.perMinute/));
    expect(l.reserve("a", { ...req(1), scopes: [{ name: "x", limits: { balance: { currency: "usd" } } }] })).toEqual(invalid(/scopes\[0\]\.limits\.balance\.currency/));
    expect(l.reserve("a", { ...req(1), currency: "usd" })).toEqual(invalid(/currency/));
    expect(l.reserve("a", { ...req(1), countsRequest: "yes" as unknown as boolean })).toEqual(invalid(/countsRequest/));
    expect(l.reserve("a", { ...req(1), meta: { model: "" } })).toEqual(invalid(/meta\.model/));
    expect(l.reserve("a", { ...req(1), retentionMs: DAY })).toEqual(invalid(/retentionMs/));
    expect(l.reserve("", req(1))).toEqual(invalid(/attemptId/, ""));
    expect(l.reserve(7 as unknown as string, req(1))).toEqual(invalid(/attemptId/, ""));
    expect(l.reserve("a", null as unknown as ReserveRequest)).toEqual(invalid(/must be an object/));
    expect(l.settle("a", { micros: 0.1, tokens: 0 }, T0)).toEqual(invalid(/^invalid ledger settlement: actual\.micros/));
    expect(l.settle("a", "unknown", T0, { usage: { input: -1 } })).toEqual(invalid(/detail\.usage\.input/));
    expect(l.settle("a", "unknown", T0, { estimate: { micros: 1, tokens: 1.5 } })).toEqual(invalid(/detail\.estimate\.tokens/));
    expect(l.release("a", -1)).toEqual(invalid(/^invalid ledger release: now/));
    expect(l.release("x".repeat(300), T0)).toEqual(invalid(/attemptId/, "x".repeat(256)));
    // The admin path keeps throwing: its routes check every parameter first.
    expect(() => l.setLimits("s", { money: { currency: "USD", limitMicros: 0.5, periodMs: DAY } }, T0)).toThrow(RangeError);
    expect(store.attempts()).toEqual([]);
    expect(store.rowCounts()).toMatchObject({ limits: 0, counters: 0, refusals: 0, settings: 0 });
  });
});

describe("BudgetLedgerCore: configured limits and overrides", () => {
  it("takes the limits each reservation passes, stores them only when they change, and lets an override win", () => {
    const { l, store } = ledger();
    const puts: string[] = [];
    const putLimits = store.putLimits.bind(store);
    store.putLimits = (scope, limits) => (puts.push(scope), putLimits(scope, limits));
    const configured = { "team:ml": usd(1_000) };
    expect(l.reserve("a", req(600, 0, { scopes: refs(configured) }))).toMatchObject({ ok: true });
    expect(puts).toEqual(["team:ml"]);
    expect(l.reserve("b", req(600, 0, { scopes: refs(configured) }))).toMatchObject({ ok: false, scope: "team:ml", limit: 1_000 });
    expect(puts).toEqual(["team:ml"]);
    // Seen without being passed limits.
    expect(l.balance("team:ml", T0).money).toMatchObject({ limit: 1_000, held: 600 });
    expect(l.limits("team:ml")).toEqual({ configured: usd(1_000), effective: usd(1_000) });

    // The admin override takes precedence over what the reservations pass.
    l.setLimits("team:ml", usd(2_000), T0, { actor: "ops", note: "raise for launch" });
    expect(l.limits("team:ml")).toEqual({ configured: usd(1_000), override: usd(2_000), effective: usd(2_000) });
    expect(l.reserve("c", req(600, 0, { scopes: refs(configured) }))).toMatchObject({ ok: true });
    // A changed configuration is stored, even by a reservation it refuses (configuration, not books).
    expect(l.reserve("d", req(10_000, 0, { scopes: refs({ "team:ml": usd(3_000) }) }))).toMatchObject({ ok: false, scope: "team:ml", limit: 2_000 });
    expect(l.limits("team:ml").configured).toEqual(usd(3_000));
    l.setLimits("team:ml", null, T0 + 1, { actor: "ops" });
    expect(l.limits("team:ml")).toEqual({ configured: usd(3_000), effective: usd(3_000) });
    // Omitted limits mean none configured.
    expect(l.reserve("e", req(1))).toMatchObject({ ok: true });
    expect(l.limits("team:ml")).toEqual({ effective: {} });
    expect(l.audit(10).map((r) => [r.seq, r.action, r.actor, r.scope])).toEqual([
      [1, "set_limits", "ops", "team:ml"],
      [2, "set_limits", "ops", "team:ml"],
    ]);
    expect(l.audit(10)[0]).toMatchObject({ at: T0, detail: { override: usd(2_000), previous: null, note: "raise for launch" } });
    expect(l.audit(10)[1]).toMatchObject({ at: T0 + 1, detail: { override: null, previous: usd(2_000) } });
  });

  it("compares limits canonically: key order and unknown fields do not count as a change", () => {
    const { l, store } = ledger();
    let puts = 0;
    const putLimits = store.putLimits.bind(store);
    store.putLimits = (scope, limits) => (puts++, putLimits(scope, limits));
    const a = { tokens: { windowMs: 60_000, limit: 5 }, money: { periodMs: DAY, limitMicros: 9, currency: "USD" } };
    const b = { money: { currency: "USD", limitMicros: 9, periodMs: DAY, extra: 1 }, tokens: { limit: 5, windowMs: 60_000 } } as ScopeLimits;
    l.reserve("a", req(1, 1, { scopes: [{ name: "org:acme", limits: a }] }));
    l.reserve("b", req(1, 1, { scopes: [{ name: "org:acme", limits: b }] }));
    expect(puts).toBe(1);
    expect(l.limits("org:acme").configured).toEqual({ money: { currency: "USD", limitMicros: 9, periodMs: DAY }, tokens: { limit: 5, windowMs: 60_000 } });
  });
});

describe("BudgetLedgerCore: settle and release", () => {
  const setup = () => {
    const r = ledger();
    r.l.setLimits("org:acme", { money: { currency: "USD", limitMicros: 10_000, periodMs: DAY }, tokens: { limit: 1_000, windowMs: 60_000 } }, T0);
    expect(r.l.reserve("a", req(4_000, 400)).ok).toBe(true);
    return r;
  };

  it("settles once, releasing the excess; a second settle returns the first answer and changes nothing", () => {
    const { l } = setup();
    const first = l.settle("a", { micros: 1_500, tokens: 150 }, T0 + 5, { usage: { input: 100, output: 50 } });
    expect(first).toEqual({ ok: true, attemptId: "a", state: "settled", settlement: { actual: { micros: 1_500, tokens: 150 }, overrun: { micros: 0, tokens: 0 }, settledAt: T0 + 5, usage: { input: 100, output: 50 } } });
    expect(l.settle("a", { micros: 9_000, tokens: 900 }, T0 + 9)).toEqual(first);
    expect(l.settle("a", "unknown", T0 + 9)).toEqual(first);
    expect(l.balance("org:acme", T0 + 10).money).toMatchObject({ spent: 1_500, held: 0, overrun: 0, remaining: 8_500 });
    expect(l.balance("org:acme", T0 + 10).tokens).toMatchObject({ spent: 150, held: 0 });
    expect(l.release("a", T0 + 11)).toMatchObject({ ok: false, reason: "conflict", state: "settled" });
  });

  it("records an overrun when the actual cost exceeds the reservation", () => {
    const { l } = setup();
    expect(l.settle("a", { micros: 5_000, tokens: 400 }, T0)).toMatchObject({ ok: true, settlement: { overrun: { micros: 1_000, tokens: 0 } } });
    expect(l.balance("org:acme", T0).money).toMatchObject({ spent: 5_000, overrun: 1_000, held: 0, remaining: 5_000 });
    expect(l.attempt("a")).toMatchObject({ state: "settled", settlement: { overrun: { micros: 1_000 } } });
  });

  it("keeps unknown usage held as pending_reconciliation: never zero, never refunded, whatever the estimate", () => {
    const { l } = setup();
    expect(l.settle("a", "unknown", T0, { estimate: { micros: 700, tokens: 70 } })).toMatchObject({
      ok: true,
      state: "pending_reconciliation",
      settlement: { actual: "unknown", estimate: { micros: 700, tokens: 70 } },
    });
    for (const s of PATH) expect(l.usage(s).find((c) => c.metric === "money:USD")).toMatchObject({ held: 4_000, pending: 4_000, spent: 0 });
    expect(l.release("a", T0)).toMatchObject({ ok: false, reason: "conflict" });
    expect(l.settle("a", { micros: 1, tokens: 1 }, T0)).toMatchObject({ state: "pending_reconciliation" });
    expect(l.expireLeases(T0 + DAY)).toBe(0);
    expect(l.balance("org:acme", T0).money).toMatchObject({ held: 4_000, pending: 4_000, remaining: 6_000 });
  });

  it("releases an attempt never sent, idempotently; a settle after it is a conflict", () => {
    const { l } = setup();
    expect(l.release("a", T0 + 1)).toEqual({ ok: true, attemptId: "a", state: "released", releasedAt: T0 + 1 });
    expect(l.release("a", T0 + 2)).toEqual({ ok: true, attemptId: "a", state: "released", releasedAt: T0 + 1 });
    expect(heldAt(l)).toEqual([0, 0, 0, 0]);
    expect(l.settle("a", { micros: 1, tokens: 1 }, T0 + 3)).toMatchObject({ ok: false, reason: "conflict", state: "released" });
    expect(l.settle("nope", "unknown", T0)).toEqual({ ok: false, attemptId: "nope", reason: "unknown_attempt" });
    expect(l.release("nope", T0)).toEqual({ ok: false, attemptId: "nope", reason: "unknown_attempt" });
  });

  it("knows no refused attempt: settling or releasing one is unknown and changes nothing", () => {
    const { l } = setup();
    expect(l.reserve("big", req(1_000_000)).ok).toBe(false);
    const before = l.usage("org:acme");
    expect(l.settle("big", { micros: 1, tokens: 0 }, T0)).toEqual({ ok: false, attemptId: "big", reason: "unknown_attempt" });
    expect(l.release("big", T0)).toEqual({ ok: false, attemptId: "big", reason: "unknown_attempt" });
    expect(l.usage("org:acme")).toEqual(before);
  });
});

describe("BudgetLedgerCore: lease expiry", () => {
  it("moves an expired lease to pending_reconciliation, keeping it held; a late settle still settles it", () => {
    const { l } = ledger();
    l.setLimits("org:acme", usd(10_000), T0);
    l.reserve("a", req(3_000, 0, { leaseMs: 1_000 }));
    l.reserve("b", req(2_000, 0, { leaseMs: 5_000 }));
    expect(l.nextLeaseExpiry()).toBe(T0 + 1_000);
    expect(l.expireLeases(T0 + 999)).toBe(0);
    expect(l.expireLeases(T0 + 1_000)).toBe(1);
    expect(l.attempt("a")).toMatchObject({ state: "pending_reconciliation", pendingReason: "lease_expired" });
    expect(l.nextLeaseExpiry()).toBe(T0 + 5_000);
    expect(l.balance("org:acme", T0 + 1_000).money).toMatchObject({ held: 5_000, pending: 3_000, spent: 0 });
    expect(l.expireLeases(T0 + 10_000)).toBe(1);
    expect(l.nextLeaseExpiry()).toBeUndefined();
    expect(l.settle("a", { micros: 2_000, tokens: 0 }, T0 + 20_000)).toMatchObject({ ok: true, state: "settled" });
    expect(l.release("b", T0 + 20_000)).toMatchObject({ ok: true });
    expect(l.balance("org:acme", T0 + 20_000).money).toMatchObject({ held: 0, pending: 0, spent: 2_000 });
  });
});
