import { describe, expect, it } from "vitest";
import { BudgetLedgerCore, MemoryLedgerStore, type LedgerAmount, type ScopeLimits } from "../../../src/ledger/ledger.ts";

/** mulberry32: a small seeded RNG, so every run replays the same interleavings. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const T0 = 1_800_000_000_000;
const PERIOD = 120_000;
const TREE: readonly (readonly string[])[] = [
  ["org:o", "team:a", "project:a1", "key:a1x"],
  ["org:o", "team:a", "project:a1", "key:a1y"],
  ["org:o", "team:a", "project:a2", "key:a2x"],
  ["org:o", "team:b", "project:b1", "key:b1x"],
  ["org:o", "team:b", "project:b1"],
];
const SCOPES = [...new Set(TREE.flat())];

type Model = { path: readonly string[]; amount: LedgerAmount; state: "held" | "settled" | "pending" | "released"; actual?: LedgerAmount; period: number; window: number; settledOnce?: boolean };

function run(seed: number, allowOverrun: boolean): void {
  const r = rng(seed);
  const int = (n: number) => Math.floor(r() * n);
  const l = new BudgetLedgerCore(new MemoryLedgerStore());
  for (const s of SCOPES) {
    const lim: ScopeLimits = {
      ...(r() < 0.8 ? { money: { currency: "USD", limitMicros: 5_000 + int(30_000), periodMs: PERIOD } } : {}),
      ...(r() < 0.5 ? { tokens: { limit: 500 + int(5_000), windowMs: 60_000 } } : {}),
    };
    l.setLimits(s, lim);
  }
  const attempts = new Map<string, Model>();
  let now = T0;
  let admitted = 0;
  let refused = 0;
  for (let step = 0; step < 600; step++) {
    now += int(3_000);
    const op = r();
    const ids = [...attempts.keys()];
    if (op < 0.45 || ids.length === 0) {
      const id = r() < 0.05 && ids.length > 0 ? ids[int(ids.length)]! : `a${step}`;
      const path = TREE[int(TREE.length)]!;
      const amount = { micros: int(8_000), tokens: int(800) };
      const res = l.reserve(id, { scopes: path, currency: "USD", amount, now, leaseMs: 60_000 });
      if (attempts.has(id)) continue; // replay: the first answer stands, nothing changes
      if (res.ok) admitted++;
      else refused++;
      if (res.ok) attempts.set(id, { path, amount, state: "held", period: now - (now % PERIOD), window: now - (now % 60_000) });
    } else if (op < 0.8) {
      const id = ids[int(ids.length)]!;
      const m = attempts.get(id)!;
      const unknown = r() < 0.15;
      const cap = allowOverrun ? 2 : 1;
      const actual = { micros: Math.floor(m.amount.micros * cap * r()), tokens: Math.floor(m.amount.tokens * cap * r()) };
      const res = l.settle(id, unknown ? "unknown" : actual, now);
      // The model decides on its own: only the first settlement of a reserved attempt counts.
      if (m.state === "released") expect(res).toMatchObject({ ok: false, reason: "conflict" });
      else if (!m.settledOnce) Object.assign(m, unknown ? { state: "pending", settledOnce: true } : { state: "settled", actual, settledOnce: true });
      else expect(res.ok).toBe(true);
    } else if (op < 0.95) {
      const id = ids[int(ids.length)]!;
      const m = attempts.get(id)!;
      const res = l.release(id, now);
      expect(res.ok).toBe(m.state === "released" || !m.settledOnce);
      if (res.ok) m.state = "released";
    } else {
      l.expireLeases(now);
      for (const [id, m] of attempts) if (m.state === "held" && l.attempt(id)!.state === "pending_reconciliation") m.state = "pending";
    }

    // Invariants, at every step, for every scope and its current period/window.
    for (const s of SCOPES) {
      const b = l.balance(s, now);
      for (const [fig, metric] of [[b.money, "micros"], [b.tokens, "tokens"]] as const) {
        if (fig === undefined) continue;
        const isMoney = metric === "micros";
        const inWindow = [...attempts.values()].filter((m) => m.path.includes(s) && (isMoney ? m.period : m.window) === fig.windowStart);
        const sum = (f: (m: Model) => number) => inWindow.reduce((n, m) => n + f(m), 0);
        const held = sum((m) => (m.state === "held" || m.state === "pending" ? m.amount[metric] : 0));
        const pending = sum((m) => (m.state === "pending" ? m.amount[metric] : 0));
        const spent = sum((m) => (m.state === "settled" ? m.actual![metric] : 0));
        const overrun = sum((m) => (m.state === "settled" ? Math.max(0, m.actual![metric] - m.amount[metric]) : 0));
        // The books balance against an independent model.
        expect({ s, metric, held: fig.held, pending: fig.pending, spent: fig.spent, overrun: fig.overrun }).toEqual({ s, metric, held, pending, spent, overrun });
        // Admitted work never exceeds the limit; only a recorded overrun may push spending past it.
        expect(fig.spent - fig.overrun + fig.held).toBeLessThanOrEqual(fig.limit);
        if (!allowOverrun) expect(fig.spent + fig.held).toBeLessThanOrEqual(fig.limit);
        expect(Number.isInteger(fig.spent) && Number.isInteger(fig.held)).toBe(true);
      }
    }
  }
  // The run exercised both outcomes.
  expect(admitted).toBeGreaterThan(25);
  expect(refused).toBeGreaterThan(25);
  // Every attempt ends in a known state.
  for (const [id, m] of attempts) expect(l.attempt(id)!.state).toBe(m.state === "pending" ? "pending_reconciliation" : m.state);
}

describe("BudgetLedgerCore: random reserve/settle/release interleavings", () => {
  it.each([1, 2, 3, 42, 1234, 99_991])("keeps spend + held within every limit and the books balanced (seed %i)", (seed) => run(seed, false));
  it.each([7, 8, 2026])("keeps admitted work within every limit when overruns occur (seed %i)", (seed) => run(seed, true));
});
