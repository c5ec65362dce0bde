import { describe, expect, it } from "vitest";
import { MemoryLedgerStore } from "../../../src/ledger/ledger-memory-store.ts";
import { BUCKET_UNITS_PER_TOKEN, BudgetLedgerCore, type LedgerAmount, type LedgerCounter, type RefusalReason, type ScopeLimits } from "../../../src/ledger/ledger.ts";
import { mulberry32 } from "../traffic/helpers.ts";

/** A seeded RNG as a function, so every random case is reproducible. */
const rng = (seed: number): (() => number) => {
  const r = mulberry32(seed);
  return () => r.next();
};

const T0 = 1_800_000_000_000;
const DAY = 86_400_000;
const PERIOD = 120_000;
const WINDOW = 60_000;
const LEASE = 60_000;
const TREE: readonly (readonly string[])[] = [
  ["org:o", "team:a", "project:a1", "key:a1x"],
  ["org:o", "team:a", "project:a1", "key:a1y"],
  ["org:o", "team:a", "project:a2", "key:a2x"],
  ["org:o", "team:b", "project:b1", "key:b1x"],
  ["org:o", "team:b", "project:b1"],
];
const SCOPES = [...new Set(TREE.flat())];

type State = "held" | "settled" | "pending" | "released";
type Model = { path: readonly string[]; amount: LedgerAmount; state: State; actual?: LedgerAmount; period: number; window: number; leaseAt: number; settledOnce?: boolean; resolved?: boolean };

/**
 * Runs random reserve / settle / release / expire / top-up / resolve steps against the ledger and
 * an independent model of it, checking after every step that they agree and that the books hold.
 */
function run(seed: number, allowOverrun: boolean): void {
  const r = rng(seed);
  const int = (n: number) => Math.floor(r() * n);
  const store = new MemoryLedgerStore();
  const l = new BudgetLedgerCore(store);
  // Each scope's configured limits, passed on every reservation (fixed for the run).
  const limits = new Map<string, ScopeLimits>();
  for (const s of SCOPES) {
    limits.set(s, {
      ...(r() < 0.7 ? { money: { currency: "USD", limitMicros: 5_000 + int(30_000), periodMs: PERIOD } } : {}),
      ...(r() < 0.5 ? { tokens: { limit: 500 + int(5_000), windowMs: WINDOW } } : {}),
      ...(s !== "org:o" && r() < 0.3 ? { balance: { currency: "USD" } } : {}),
      ...(r() < 0.4 ? { requests: { perMinute: 5 + int(60), burst: 1 + int(5) } } : {}),
    });
  }
  // Every run has a slow bucket (at the root: every grant takes from it) and a prepaid balance, so both refusals are exercised.
  limits.set("org:o", { ...limits.get("org:o"), requests: { perMinute: 2 + int(4), burst: 1 + int(2) } });
  limits.set("key:a2x", { ...limits.get("key:a2x"), balance: { currency: "USD" } });
  const lim = (s: string) => limits.get(s)!;
  const attempts = new Map<string, Model>();
  const answers = new Map<string, unknown>();
  const credited = new Map<string, number>();
  const topUps = new Map<string, number>();
  const buckets = new Map<string, { units: number; at: number }>();
  const tally = { admitted: 0, refused: 0, rateRefused: 0, balanceRefused: 0, resolved: 0, topUps: 0, refusedReplays: 0 };
  /** Refusals by refusing scope and UTC day, by reason: all that is kept of them. */
  const refusals = new Map<string, Record<string, number>>();
  let now = T0;

  const contributes = (m: Model, k: "micros" | "tokens") => (m.state === "held" || m.state === "pending" ? m.amount[k] : m.state === "settled" ? m.actual![k] : 0);
  const usedOf = (s: string, k: "micros" | "tokens", inWindow: (m: Model) => boolean) => [...attempts.values()].filter((m) => m.path.includes(s) && inWindow(m)).reduce((n, m) => n + contributes(m, k), 0);
  const bucketUnits = (s: string) => {
    const q = lim(s).requests!;
    const b = buckets.get(s);
    return Math.min(q.burst * BUCKET_UNITS_PER_TOKEN, b === undefined ? Infinity : b.units + (now - b.at) * q.perMinute);
  };
  /** The model's own decision: the first failure leaf first (money, tokens, balance, requests), else a grant. */
  const decide = (path: readonly string[], amount: LedgerAmount, counts: boolean): { scope: string; reason: RefusalReason } | undefined => {
    const period = now - (now % PERIOD);
    const window = now - (now % WINDOW);
    for (const s of [...path].reverse()) {
      const L = lim(s);
      if (L.money && usedOf(s, "micros", (m) => m.period === period) + amount.micros > L.money.limitMicros) return { scope: s, reason: "money_budget_exceeded" };
      if (L.tokens && usedOf(s, "tokens", (m) => m.window === window) + amount.tokens > L.tokens.limit) return { scope: s, reason: "token_limit_exceeded" };
      if (L.balance && usedOf(s, "micros", () => true) + amount.micros > (credited.get(s) ?? 0)) return { scope: s, reason: "balance_exhausted" };
      if (counts && L.requests && bucketUnits(s) < BUCKET_UNITS_PER_TOKEN) return { scope: s, reason: "request_rate_exceeded" };
    }
    return undefined;
  };
  const snapshot = () => ({ counters: SCOPES.map((s) => l.usage(s)), buckets: store.buckets() });
  const topUp = (s: string, opId: string, micros: number) => {
    const res = l.topUp(s, { currency: "USD", micros }, { opId, actor: "prop" }, now);
    if (!topUps.has(opId)) {
      credited.set(s, (credited.get(s) ?? 0) + micros);
      topUps.set(opId, credited.get(s)!);
      tally.topUps++;
    }
    expect(res).toEqual({ ok: true, opId, credited: topUps.get(opId) });
  };
  // Some opening credit, so prepaid scopes admit from the start (all but the forced one, which starts empty).
  for (const s of SCOPES) if (lim(s).balance && s !== "key:a2x") topUp(s, `open-${s}`, 5_000 + int(10_000));

  for (let step = 0; step < 700; step++) {
    now += int(3_000);
    const op = r();
    const ids = [...attempts.keys()];
    if (op < 0.42 || (ids.length === 0 && !(op >= 0.87 && op < 0.95))) {
      const replay = r() < 0.05 && answers.size > 0;
      const id = replay ? [...answers.keys()][int(answers.size)]! : `a${step}`;
      const path = TREE[int(TREE.length)]!;
      const amount = { micros: int(8_000), tokens: int(800) };
      const counts = r() < 0.7;
      // A replayed grant stands; a replayed refusal was not kept, so it is decided afresh.
      const granted = attempts.has(id);
      const expected = granted ? undefined : decide(path, amount, counts);
      const before = snapshot();
      const res = l.reserve(id, { scopes: path.map((name) => ({ name, limits: lim(name) })), currency: "USD", amount, now, leaseMs: LEASE, countsRequest: counts, meta: { model: `m${int(3)}` } });
      if (granted) {
        // The first answer stands and nothing changes.
        expect(res).toEqual(answers.get(id));
        expect(snapshot()).toEqual(before);
        continue;
      }
      if (replay) tally.refusedReplays++;
      answers.set(id, res);
      expect({ step, decision: res.ok ? undefined : res.reason === "invalid_argument" ? res : { scope: res.scope, reason: res.reason } }).toEqual({ step, decision: expected });
      if (!res.ok && res.reason !== "invalid_argument") {
        const day = refusals.get(`${res.scope} ${now - (now % DAY)}`) ?? {};
        day[res.reason] = (day[res.reason] ?? 0) + 1;
        refusals.set(`${res.scope} ${now - (now % DAY)}`, day);
        tally.refused++;
        if (res.reason === "request_rate_exceeded") tally.rateRefused++;
        if (res.reason === "balance_exhausted") tally.balanceRefused++;
        // A refusal books nothing and takes no request token.
        expect(snapshot()).toEqual(before);
        continue;
      }
      tally.admitted++;
      if (counts) for (const s of path) if (lim(s).requests) buckets.set(s, { units: bucketUnits(s) - BUCKET_UNITS_PER_TOKEN, at: now });
      attempts.set(id, { path, amount, state: "held", period: now - (now % PERIOD), window: now - (now % WINDOW), leaseAt: now + LEASE });
    } else if (op < 0.7) {
      const id = ids[int(ids.length)]!;
      const m = attempts.get(id)!;
      const unknown = r() < 0.2;
      const cap = allowOverrun ? 2 : 1;
      const actual = { micros: Math.floor(m.amount.micros * cap * r()), tokens: Math.floor(m.amount.tokens * cap * r()) };
      const res = l.settle(id, unknown ? "unknown" : actual, now, unknown ? { estimate: { micros: 1, tokens: 1 } } : { usage: { output: actual.tokens } });
      // The model decides on its own: only the first settlement of a reserved attempt counts.
      if (m.state === "released") expect(res).toMatchObject({ ok: false, reason: "conflict" });
      else if (!m.settledOnce) Object.assign(m, unknown ? { state: "pending", settledOnce: true } : { state: "settled", actual, settledOnce: true });
      else expect(res.ok).toBe(true);
    } else if (op < 0.8) {
      const id = ids[int(ids.length)]!;
      const m = attempts.get(id)!;
      const res = l.release(id, now);
      expect(res.ok).toBe(m.state === "released" || !m.settledOnce);
      if (res.ok) m.state = "released";
    } else if (op < 0.87) {
      const pending = ids.filter((id) => attempts.get(id)!.state === "pending");
      const id = pending.length > 0 && r() < 0.8 ? pending[int(pending.length)]! : ids[int(ids.length)]!;
      const m = attempts.get(id)!;
      const actual = { micros: Math.floor(m.amount.micros * (allowOverrun ? 2 : 1) * r()), tokens: Math.floor(m.amount.tokens * r()) };
      const res = l.resolve(id, actual, { actor: "prop" }, now);
      if (m.state === "pending") {
        expect(res).toMatchObject({ ok: true, state: "settled", settlement: { actual, resolvedBy: { actor: "prop", at: now } } });
        Object.assign(m, { state: "settled", actual, settledOnce: true, resolved: true });
        tally.resolved++;
      } else if (m.resolved) expect(res.ok).toBe(true);
      else expect(res).toMatchObject({ ok: false, reason: "not_pending" });
    } else if (op < 0.95) {
      const prepaid = SCOPES.filter((x) => lim(x).balance);
      const s = prepaid.length > 0 && r() < 0.8 ? prepaid[int(prepaid.length)]! : SCOPES[int(SCOPES.length)]!;
      const known = [...topUps.keys()];
      const opId = known.length > 0 && r() < 0.2 ? known[int(known.length)]! : `op${step}`;
      topUp(s, opId, 1 + int(5_000));
    } else {
      l.expireLeases(now);
      for (const m of attempts.values()) if (m.state === "held" && m.leaseAt <= now) m.state = "pending";
    }

    // The books: every counter equals the sum over the attempts that charged it.
    const expected = new Map<string, { spent: number; held: number; pending: number; overrun: number }>();
    for (const m of attempts.values()) {
      for (const s of m.path) {
        const L = lim(s);
        const charged: [string, number, "micros" | "tokens"][] = [
          ["money:USD", L.money ? m.period : 0, "micros"],
          ["tokens", L.tokens ? m.window : 0, "tokens"],
          ...(L.balance ? [["balance:USD", 0, "micros"] as [string, number, "micros"]] : []),
        ];
        for (const [metric, windowStart, k] of charged) {
          const key = JSON.stringify([s, metric, windowStart]);
          const c = expected.get(key) ?? { spent: 0, held: 0, pending: 0, overrun: 0 };
          const live = m.state === "held" || m.state === "pending" ? m.amount[k] : 0;
          const actual = m.state === "settled" ? m.actual![k] : 0;
          expected.set(key, { held: c.held + live, pending: c.pending + (m.state === "pending" ? m.amount[k] : 0), spent: c.spent + actual, overrun: c.overrun + (m.state === "settled" ? Math.max(0, actual - m.amount[k]) : 0) });
        }
      }
    }
    const counters = new Map(SCOPES.flatMap((s) => l.usage(s)).map((c: LedgerCounter) => [JSON.stringify([c.scope, c.metric, c.windowStart]), { spent: c.spent, held: c.held, pending: c.pending, overrun: c.overrun }]));
    expect(counters).toEqual(expected);
    for (const c of counters.values()) expect(c.held >= c.pending && c.pending >= 0 && Number.isSafeInteger(c.spent)).toBe(true);

    // Admitted work never exceeds a limit (or the credit); only a recorded overrun may push spending past it.
    for (const s of SCOPES) {
      const b = l.balance(s, now);
      for (const fig of [b.money, b.tokens, b.balance]) {
        if (fig === undefined) continue;
        expect(fig.spent - fig.overrun + fig.held).toBeLessThanOrEqual(fig.limit);
        if (!allowOverrun) expect(fig.spent + fig.held).toBeLessThanOrEqual(fig.limit);
      }
      if (b.balance) expect(b.balance.limit).toBe(credited.get(s) ?? 0);
      // Today's refusals of the scope, by reason, as the model counted them.
      expect(b.refusals?.byReason ?? {}).toEqual(refusals.get(`${s} ${now - (now % DAY)}`) ?? {});
      if (b.requests) expect(b.requests.available).toBe(Math.floor(bucketUnits(s) / BUCKET_UNITS_PER_TOKEN));
    }
  }
  // The run exercised every outcome.
  expect(tally.admitted).toBeGreaterThan(25);
  expect(tally.refused).toBeGreaterThan(25);
  expect(tally.rateRefused).toBeGreaterThan(0);
  expect(tally.balanceRefused).toBeGreaterThan(0);
  expect(tally.resolved).toBeGreaterThan(0);
  expect(tally.topUps).toBeGreaterThan(5);
  expect(tally.refusedReplays).toBeGreaterThan(0);
  // Refusals left no attempt record: only admitted attempts are stored.
  expect(store.attempts().map((a) => a.attemptId).sort()).toEqual([...attempts.keys()].sort());
  // Every attempt ends in a known state.
  for (const [id, m] of attempts) expect(l.attempt(id)!.state).toBe(m.state === "pending" ? "pending_reconciliation" : m.state);
}

describe("BudgetLedgerCore: random reserve/settle/release/top-up/resolve interleavings", () => {
  it.each([1, 2, 3, 42, 1234, 99_991])("keeps spend + held within every limit and the books balanced (seed %i)", (seed) => run(seed, false));
  it.each([7, 8, 2026])("keeps admitted work within every limit when overruns occur (seed %i)", (seed) => run(seed, true));
});
