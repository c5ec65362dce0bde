import { describe, expect, it } from "vitest";
import { MemoryLedgerStore } from "../../../src/ledger/ledger-memory-store.ts";
import { BudgetLedgerCore, type LedgerMetric, type ReserveRequest, type ScopeLimits, type ScopeRef } from "../../../src/ledger/ledger.ts";

const T0 = 1_800_000_000_000 - (1_800_000_000_000 % 60_000); // a minute boundary, for readable windows
const DAY = 86_400_000;
const PATH = ["org:acme", "team:ml", "project:x", "key:k1"] as const;
const ADMIN = { actor: "ops" };

function ledger() {
  const store = new MemoryLedgerStore();
  return { store, l: new BudgetLedgerCore(store) };
}

const path = (limits: Partial<Record<string, ScopeLimits>>): ScopeRef[] => PATH.map((name) => (limits[name] ? { name, limits: limits[name] } : { name }));
const rate = (perMinute: number, burst: number): ScopeLimits => ({ requests: { perMinute, burst } });

describe("BudgetLedgerCore: request buckets", () => {
  const at = (scopes: ScopeRef[], now: number, countsRequest = true, micros = 10): ReserveRequest => ({ scopes, currency: "USD", amount: { micros, tokens: 1 }, now, countsRequest });

  it("admits a burst, refuses the next with the time until one token, and refills continuously", () => {
    const { l, store } = ledger();
    const scopes = path({ "key:k1": rate(6, 3) }); // a token every 10 s, at most 3
    for (const id of ["a", "b", "c"]) expect(l.reserve(id, at(scopes, T0))).toMatchObject({ ok: true });
    expect(l.reserve("a", at(scopes, T0))).toMatchObject({ ok: true }); // a replay takes nothing
    expect(l.reserve("d", at(scopes, T0))).toEqual({ ok: false, attemptId: "d", reason: "request_rate_exceeded", scope: "key:k1", metric: "requests", limit: 3, used: 3, requested: 1, retryAfterMs: 10_000 });
    expect(l.reserve("e", at(scopes, T0 + 9_999))).toMatchObject({ ok: false, reason: "request_rate_exceeded", retryAfterMs: 1 });
    expect(l.reserve("f", at(scopes, T0 + 10_000))).toMatchObject({ ok: true, remaining: [{ scope: "key:k1", metric: "requests", remaining: 0 }] });
    expect(l.reserve("g", at(scopes, T0 + 10_000))).toMatchObject({ ok: false, retryAfterMs: 10_000 });
    // A long idle refills only up to the burst.
    for (const id of ["h", "i", "j"]) expect(l.reserve(id, at(scopes, T0 + 3_600_000))).toMatchObject({ ok: true });
    expect(l.reserve("k", at(scopes, T0 + 3_600_000))).toMatchObject({ ok: false, used: 3 });
    expect(store.buckets()).toEqual([{ scope: "key:k1", units: 0, at: T0 + 3_600_000 }]);
  });

  it("keeps fractional refill exact (7 a minute: exactly 7 tokens after 60 s)", () => {
    const { l } = ledger();
    const scopes = path({ "org:acme": rate(7, 100) });
    for (let i = 0; i < 100; i++) expect(l.reserve(`drain-${i}`, at(scopes, T0)).ok).toBe(true);
    expect(l.balance("org:acme", T0).requests).toEqual({ metric: "requests", perMinute: 7, burst: 100, available: 0, retryAfterMs: 8_572 });
    expect(l.balance("org:acme", T0 + 60_000).requests?.available).toBe(7);
    for (let i = 0; i < 7; i++) expect(l.reserve(`m-${i}`, at(scopes, T0 + 60_000)).ok).toBe(true);
    expect(l.reserve("m-7", at(scopes, T0 + 60_000))).toMatchObject({ ok: false, retryAfterMs: Math.ceil(60_000 / 7) });
  });

  it("lets retries (countsRequest false) through an empty bucket without taking a token", () => {
    const { l, store } = ledger();
    const scopes = path({ "team:ml": rate(1, 1) });
    expect(l.reserve("first", at(scopes, T0)).ok).toBe(true);
    const bucket = store.buckets();
    for (let i = 0; i < 5; i++) expect(l.reserve(`retry-${i}`, at(scopes, T0 + i, false)).ok).toBe(true);
    expect(l.reserve("no-flag", { ...at(scopes, T0), countsRequest: undefined }).ok).toBe(true);
    expect(store.buckets()).toEqual(bucket);
    expect(l.reserve("next", at(scopes, T0 + 10))).toMatchObject({ ok: false, reason: "request_rate_exceeded", scope: "team:ml" });
  });

  it("never gives tokens back: release and settle refund no request", () => {
    const { l } = ledger();
    const scopes = path({ "key:k1": rate(1, 2) });
    expect(l.reserve("a", at(scopes, T0)).ok).toBe(true);
    expect(l.reserve("b", at(scopes, T0)).ok).toBe(true);
    l.release("a", T0);
    l.settle("b", { micros: 1, tokens: 1 }, T0);
    expect(l.reserve("c", at(scopes, T0))).toMatchObject({ ok: false, reason: "request_rate_exceeded" });
  });

  it("takes no token on a refusal, whichever scope and metric refused", () => {
    const { l, store } = ledger();
    // The leaf's money refuses: the root's bucket (1 token) must be untouched.
    const scopes = path({ "org:acme": rate(1, 1), "key:k1": { money: { currency: "USD", limitMicros: 100, periodMs: DAY } } });
    expect(l.reserve("too-much", at(scopes, T0, true, 500))).toMatchObject({ ok: false, scope: "key:k1", reason: "money_budget_exceeded" });
    expect(store.buckets()).toEqual([]);
    expect(l.balance("org:acme", T0).requests?.available).toBe(1);
    // The leaf's bucket refuses: the root's bucket keeps its token.
    const both = path({ "org:acme": rate(1, 2), "key:k1": rate(1, 1) });
    expect(l.reserve("one", at(both, T0 + 1)).ok).toBe(true);
    const before = store.buckets();
    expect(l.reserve("two", at(both, T0 + 1))).toMatchObject({ ok: false, scope: "key:k1", reason: "request_rate_exceeded" });
    expect(store.buckets()).toEqual(before);
    expect(l.balance("org:acme", T0 + 1).requests?.available).toBe(1);
  });

  it("treats a zero share (a stripe of a small limit) as admitting no counted request", () => {
    const { l } = ledger();
    const scopes = path({ "key:k1": rate(0, 0) });
    expect(l.reserve("a", at(scopes, T0))).toEqual({ ok: false, attemptId: "a", reason: "request_rate_exceeded", scope: "key:k1", metric: "requests", limit: 0, used: 0, requested: 1 });
    expect(l.reserve("b", at(scopes, T0, false)).ok).toBe(true);
  });
});

describe("BudgetLedgerCore: prepaid balances", () => {
  const prepaid = path({ "project:x": { balance: { currency: "USD" } } });
  const req = (micros: number, now = T0): ReserveRequest => ({ scopes: prepaid, currency: "USD", amount: { micros, tokens: 0 }, now });

  it("admits only what the top-ups cover, across periods, and refuses without a retry time", () => {
    const { l } = ledger();
    expect(l.reserve("a", req(1))).toEqual({ ok: false, attemptId: "a", reason: "balance_exhausted", scope: "project:x", metric: "balance:USD", limit: 0, used: 0, requested: 1 });
    expect(l.topUp("project:x", { currency: "USD", micros: 1_000 }, { opId: "op-1", ...ADMIN }, T0)).toEqual({ ok: true, opId: "op-1", credited: 1_000 });
    expect(l.topUp("project:x", { currency: "USD", micros: 500 }, { opId: "op-2", ...ADMIN, note: "invoice 7" }, T0)).toEqual({ ok: true, opId: "op-2", credited: 1_500 });
    expect(l.reserve("b", req(600))).toMatchObject({ ok: true, remaining: [{ scope: "project:x", metric: "balance:USD", remaining: 900 }] });
    expect(l.reserve("c", req(600, T0 + DAY))).toMatchObject({ ok: true });
    expect(l.reserve("d", req(400, T0 + 2 * DAY))).toMatchObject({ ok: false, reason: "balance_exhausted", limit: 1_500, used: 1_200, requested: 400 });
    expect(l.reserve("e", req(300, T0 + 2 * DAY)).ok).toBe(true);
    expect(l.balance("project:x", T0).balance).toEqual({ metric: "balance:USD", limit: 1_500, windowStart: 0, windowEnd: 0, spent: 0, held: 1_500, pending: 0, overrun: 0, remaining: 0 });
    // Settling below the reservation frees the rest; an overrun is spent too.
    l.settle("b", { micros: 100, tokens: 0 }, T0);
    l.settle("c", { micros: 800, tokens: 0 }, T0);
    expect(l.balance("project:x", T0).balance).toMatchObject({ spent: 900, held: 300, overrun: 200, remaining: 300 });
    expect(l.reserve("f", req(301)).ok).toBe(false);
    expect(l.reserve("g", req(300)).ok).toBe(true);
  });

  it("is idempotent by op id: a repeated top-up returns the first answer and changes nothing", () => {
    const { l } = ledger();
    const first = l.topUp("project:x", { currency: "USD", micros: 1_000 }, { opId: "op-1", ...ADMIN }, T0);
    expect(l.topUp("project:x", { currency: "USD", micros: 1_000 }, { opId: "op-1", ...ADMIN }, T0 + 1)).toEqual(first);
    expect(l.topUp("project:x", { currency: "USD", micros: 9_999 }, { opId: "op-1", actor: "someone" }, T0 + 2)).toEqual(first);
    expect(l.topUp("project:x", { currency: "EUR", micros: 5_000 }, { opId: "op-eur", ...ADMIN }, T0)).toEqual({ ok: true, opId: "op-eur", credited: 5_000 });
    // Credit in another currency does not count for a USD balance.
    expect(l.reserve("probe", req(1_001))).toMatchObject({ ok: false, reason: "balance_exhausted", limit: 1_000 });
    expect(l.balance("project:x", T0).balance).toMatchObject({ limit: 1_000 });
    expect(l.audit(10)).toEqual([
      { seq: 1, at: T0, actor: "ops", action: "top_up", scope: "project:x", detail: { opId: "op-1", currency: "USD", micros: 1_000, credited: 1_000 } },
      { seq: 2, at: T0, actor: "ops", action: "top_up", scope: "project:x", detail: { opId: "op-eur", currency: "EUR", micros: 5_000, credited: 5_000 } },
    ]);
  });

  it("rejects a top-up that is not positive, or unattributed, naming the field", () => {
    const { l } = ledger();
    expect(() => l.topUp("project:x", { currency: "USD", micros: 0 }, { opId: "z", ...ADMIN }, T0)).toThrow(/amount\.micros/);
    expect(() => l.topUp("project:x", { currency: "USD", micros: -5 }, { opId: "n", ...ADMIN }, T0)).toThrow(/amount\.micros/);
    expect(() => l.topUp("project:x", { currency: "USD", micros: 1.5 }, { opId: "f", ...ADMIN }, T0)).toThrow(/amount\.micros/);
    expect(() => l.topUp("project:x", { currency: "USD", micros: 1 }, { opId: "", ...ADMIN }, T0)).toThrow(/by\.opId/);
    expect(() => l.topUp("project:x", { currency: "USD", micros: 1 }, { opId: "x", actor: "" }, T0)).toThrow(/by\.actor/);
    expect(() => l.topUp("project:x", { currency: "usd", micros: 1 }, { opId: "x", ...ADMIN }, T0)).toThrow(/amount\.currency/);
    expect(() => l.topUp("project:x", { currency: "USD", micros: 2 ** 50 }, { opId: "big-1", ...ADMIN }, T0)).not.toThrow();
    for (const i of [2, 3, 4]) l.topUp("project:x", { currency: "USD", micros: 2 ** 50 }, { opId: `big-${i}`, ...ADMIN }, T0);
    expect(() => l.topUp("project:x", { currency: "USD", micros: 1 }, { opId: "big-5", ...ADMIN }, T0)).toThrow(/past 2\^52/);
    expect(l.audit(100)).toHaveLength(4);
  });
});

describe("BudgetLedgerCore: hierarchical refusal on every metric", () => {
  type Kind = "money" | "tokens" | "balance" | "requests";
  const KINDS: readonly [Kind, string, LedgerMetric][] = [
    ["money", "money_budget_exceeded", "money:USD"],
    ["tokens", "token_limit_exceeded", "tokens"],
    ["balance", "balance_exhausted", "balance:USD"],
    ["requests", "request_rate_exceeded", "requests"],
  ];
  const loose: ScopeLimits = { money: { currency: "USD", limitMicros: 1_000_000, periodMs: DAY }, tokens: { limit: 1_000_000, windowMs: 60_000 }, balance: { currency: "USD" }, requests: { perMinute: 60, burst: 10 } };
  const tight = (kind: Kind): ScopeLimits => ({
    ...loose,
    ...(kind === "money" ? { money: { currency: "USD", limitMicros: 1_000, periodMs: DAY } } : {}),
    ...(kind === "tokens" ? { tokens: { limit: 1_000, windowMs: 60_000 } } : {}),
    ...(kind === "requests" ? { requests: { perMinute: 1, burst: 1 } } : {}),
  });
  const cases = PATH.flatMap((scope, level) => KINDS.map(([kind, reason, metric]) => [level, scope, kind, reason, metric] as const));

  it.each(cases)("refuses at level %i (%s) on %s, leaving every scope's books and buckets as they were", (_level, scope, kind, reason, metric) => {
    const { l, store } = ledger();
    const scopes = PATH.map((name) => ({ name, limits: name === scope ? tight(kind) : loose }));
    for (const name of PATH) l.topUp(name, { currency: "USD", micros: name === scope && kind === "balance" ? 1_000 : 1_000_000 }, { opId: `top-${name}`, ...ADMIN }, T0);
    const req = (micros: number): ReserveRequest => ({ scopes, currency: "USD", amount: { micros, tokens: micros }, now: T0, countsRequest: true });
    expect(l.reserve("ok", req(600))).toMatchObject({ ok: true });
    const snapshot = () => ({ counters: PATH.map((s) => l.usage(s)), buckets: store.buckets() });
    const before = snapshot();
    const r = l.reserve("too-much", req(500));
    expect(r).toMatchObject({ ok: false, reason, scope, metric });
    expect(snapshot()).toEqual(before);
    // Every scope holds exactly the one admitted reservation, on every metric it counts.
    for (const s of PATH) {
      const held = Object.fromEntries(l.usage(s).map((c) => [c.metric, c.held]));
      expect({ s, held }).toEqual({ s, held: { "money:USD": 600, tokens: 600, "balance:USD": 600 } });
    }
    expect(l.attempt("too-much")).toBeUndefined();
  });

  it("checks everything before writing: a failure at the root leaves the leaf's bucket and books untouched", () => {
    const { l, store } = ledger();
    const scopes = PATH.map((name) => ({ name, limits: name === "org:acme" ? { money: { currency: "USD", limitMicros: 0, periodMs: DAY } } : loose }));
    for (const name of PATH) l.topUp(name, { currency: "USD", micros: 1_000 }, { opId: `top-${name}`, ...ADMIN }, T0);
    expect(l.reserve("x", { scopes, currency: "USD", amount: { micros: 1, tokens: 1 }, now: T0, countsRequest: true })).toMatchObject({ ok: false, scope: "org:acme" });
    expect(store.buckets()).toEqual([]);
    for (const s of PATH) expect(l.usage(s)).toEqual([]);
  });
});
