import { describe, expect, it } from "vitest";
import { tenantLedgerSchema } from "../../../src/config/budget-schema.ts";
import { LeaseRules } from "../../../src/ledger/ledger-leases.ts";
import { MemoryLedgerStore } from "../../../src/ledger/ledger-memory-store.ts";
import { BudgetLedgerCore, LEDGER_DAY_MS as DAY, MIN_RETENTION_MS, type LedgerAmount, type ReserveRequest, type ScopeLimits, type UsageRollup } from "../../../src/ledger/ledger.ts";

const T0 = Date.UTC(2027, 2, 1);
const R = MIN_RETENTION_MS;
const HISTORY = 9 * DAY;
const daily: ScopeLimits = { money: { currency: "USD", limitMicros: 2 ** 40, periodMs: DAY }, tokens: { limit: 2 ** 40, windowMs: DAY } };
const SCOPES = ["org:o", "project:p", "key:k"] as const;
const PATH = [{ name: "org:o", limits: daily }, { name: "project:p", limits: daily }, { name: "key:k" }];
const MODELS = ["m1@1", "m2@1"];

/** A small deterministic generator, so a failure replays. */
function rng(seed: number): () => number {
  let s = seed;
  return () => ((s = (s * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
}

/** The rollups of one scope and day summed over models. */
function dayTotal(rows: readonly UsageRollup[], dayStart: number): { micros: number; tokens: number; attempts: number } {
  const t = { micros: 0, tokens: 0, attempts: 0 };
  for (const r of rows) if (r.dayStart === dayStart) (t.micros += r.settledMicros), (t.tokens += r.settledTokens), (t.attempts += r.attempts);
  return t;
}

describe("BudgetLedgerCore: daily usage rollups", () => {
  it("equal the books' settled spend per day and in total over a scripted multi-day run with settles, releases, reconciliations, leases and retention", () => {
    const store = new MemoryLedgerStore();
    const core = new BudgetLedgerCore(store);
    const leases = new LeaseRules(store, core);
    const rand = rng(29);
    const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)]!;
    const req = (now: number, micros: number, model: string, over: Partial<ReserveRequest> = {}): ReserveRequest => ({
      scopes: PATH,
      currency: "USD",
      amount: { micros, tokens: 100 },
      now,
      leaseMs: 3_600_000,
      retentionMs: R,
      historyMs: HISTORY,
      meta: { model, priceVersion: "v1" },
      ...over,
    });
    // What the books said each day had settled, read from the daily counters before retention removes them.
    const booked = new Map<string, { micros: number; tokens: number }>();
    const settledAttempts = new Map<number, number>();
    let keyLifetime = { micros: 0, tokens: 0 };
    const noteSettled = (createdAt: number) => settledAttempts.set(createdAt - (createdAt % DAY), (settledAttempts.get(createdAt - (createdAt % DAY)) ?? 0) + 1);
    const unknown: { id: string; createdAt: number }[] = [];
    let n = 0;
    const DAYS = 14;

    const snapshotBooks = () => {
      for (const scope of ["org:o", "project:p"]) {
        for (const c of core.usage(scope)) {
          if (c.windowStart === 0) continue;
          const key = `${scope}|${c.windowStart}`;
          const b = booked.get(key) ?? { micros: 0, tokens: 0 };
          booked.set(key, c.metric === "tokens" ? { ...b, tokens: c.spent } : { ...b, micros: c.spent });
        }
      }
      // The key has no limit: its books are one lifetime counter per metric.
      const money = core.usage("key:k").find((c) => c.metric === "money:USD")?.spent ?? 0;
      const tokens = core.usage("key:k").find((c) => c.metric === "tokens")?.spent ?? 0;
      keyLifetime = { micros: money, tokens };
    };

    for (let d = 0; d < DAYS; d++) {
      const dayStart = T0 + d * DAY;
      // The last hour of the day is left for leases and reconciliations that cross midnight.
      for (let i = 0; i < 12; i++) {
        const now = dayStart + Math.floor(rand() * (DAY - 7_200_000));
        const id = `a${n++}`;
        const worst = 1_000 + Math.floor(rand() * 9_000);
        expect(core.reserve(id, req(now, worst, pick(MODELS)))).toMatchObject({ ok: true });
        const roll = rand();
        const actual: LedgerAmount = { micros: Math.floor(rand() * worst * 1.2), tokens: Math.floor(rand() * 120) };
        if (roll < 0.45) {
          expect(core.settle(id, actual, now + 1_000)).toMatchObject({ state: "settled" });
          noteSettled(now);
        } else if (roll < 0.6) expect(core.release(id, now + 1_000)).toMatchObject({ state: "released" });
        else if (roll < 0.75) {
          expect(core.settle(id, "unknown", now + 1_000, { estimate: actual })).toMatchObject({ state: "pending_reconciliation" });
          unknown.push({ id, createdAt: now });
        } else if (roll < 0.85) {
          // Never settled: the lease expires into reconciliation at the end of the day, and is resolved or released later.
          unknown.push({ id, createdAt: now });
        } else {
          // A settle after a release is refused and changes nothing.
          expect(core.release(id, now + 1)).toMatchObject({ state: "released" });
          expect(core.settle(id, actual, now + 2)).toMatchObject({ ok: false, reason: "conflict" });
        }
      }
      // Attempts admitted from a lease, reported in one batch (one released, one of unknown usage).
      const leaseAt = dayStart + DAY - 3_600_000;
      const leaseId = `lease${d}`;
      expect(leases.lease(leaseId, { ...req(leaseAt, 2_000, "m1@1"), slices: 8, admitMs: 1_800_000 })).toMatchObject({ ok: true });
      const use = (k: number, model: string) => ({ leaseId, amount: { micros: 2_000, tokens: 100 }, admittedAt: leaseAt + k, meta: { model, priceVersion: "v1" } });
      const results = leases.apply(
        [
          { op: "settle", attemptId: `${leaseId}-1`, actual: { micros: 1_500, tokens: 80 }, lease: use(1, "m1@1") },
          { op: "settle", attemptId: `${leaseId}-2`, actual: { micros: 2_500, tokens: 120 }, lease: use(2, "m2@1") },
          { op: "release", attemptId: `${leaseId}-3`, lease: use(3, "m1@1") },
          { op: "settle", attemptId: `${leaseId}-4`, actual: "unknown", lease: use(4, "m2@1") },
          { op: "close", leaseId, unusedRequests: 0 },
        ],
        leaseAt + 10,
      );
      expect(results.map((r) => r.ok)).toEqual([true, true, true, true, true]);
      noteSettled(leaseAt + 1);
      noteSettled(leaseAt + 2);
      unknown.push({ id: `${leaseId}-4`, createdAt: leaseAt + 4 });
      // Past midnight: leases expire, and some of the open reconciliations are resolved (or released) on a later day.
      const next = dayStart + DAY + 60_000;
      core.expireLeases(next);
      for (const u of unknown.splice(0)) {
        const r = rand();
        if (r < 0.5) {
          expect(core.resolve(u.id, { micros: Math.floor(rand() * 5_000), tokens: 50 }, { actor: "ops" }, next)).toMatchObject({ ok: true, state: "settled" });
          noteSettled(u.createdAt);
        } else if (r < 0.7 && core.attempt(u.id)?.pendingReason === "lease_expired" && core.attempt(u.id)?.fromLease === undefined) {
          expect(core.release(u.id, next)).toMatchObject({ state: "released" });
        } else unknown.push(u);
      }
      snapshotBooks();
      // Retention runs as the alarm would, to completion.
      while (core.retain(next, 50).more);

      // Every day the books still have or had: the rollups equal them, per scope.
      for (const scope of ["org:o", "project:p"]) {
        const rows = core.dailyUsage(scope, 0, next + DAY);
        for (let k = 0; k <= d; k++) {
          const day = T0 + k * DAY;
          const kept = day + DAY + HISTORY <= next ? undefined : booked.get(`${scope}|${day}`) ?? { micros: 0, tokens: 0 };
          const total = dayTotal(rows, day);
          if (kept === undefined) expect({ scope, day: k, total }).toEqual({ scope, day: k, total: { micros: 0, tokens: 0, attempts: 0 } });
          else expect({ scope, day: k, total }).toEqual({ scope, day: k, total: { ...kept, attempts: settledAttempts.get(day) ?? 0 } });
        }
        // Nothing is rolled up for a day that booked nothing.
        expect(rows.every((r) => r.dayStart >= T0 && r.dayStart <= T0 + d * DAY)).toBe(true);
      }
      // Every scope's spend over a range is its daily rollups of that range summed, per model.
      const from = next - 5 * DAY;
      const spend = core.spendByScope(from, next + DAY);
      const expected = SCOPES.flatMap((scope) => {
        const per = new Map<string, { scope: string; model: string; currency: string; attempts: number; settledMicros: number; settledTokens: number }>();
        for (const r of core.dailyUsage(scope, from, next + DAY)) {
          const m = per.get(r.model) ?? { scope, model: r.model, currency: r.currency, attempts: 0, settledMicros: 0, settledTokens: 0 };
          m.attempts += r.attempts;
          m.settledMicros += r.settledMicros;
          m.settledTokens += r.settledTokens;
          per.set(r.model, m);
        }
        return [...per.values()];
      });
      expect(spend).toEqual(expected.sort((a, b) => (a.scope < b.scope ? -1 : a.scope > b.scope ? 1 : a.model < b.model ? -1 : 1)));
      // In total, while no day has aged out of the history: the key's lifetime counter.
      if (T0 + DAY + HISTORY > next) {
        const rows = core.dailyUsage("key:k", 0, next + DAY);
        expect({ micros: rows.reduce((a, r) => a + r.settledMicros, 0), tokens: rows.reduce((a, r) => a + r.settledTokens, 0) }).toEqual(keyLifetime);
      }
      // Whole days of the usage report are read from the rollups: they agree with the attempts while both are kept.
      const reportDay = T0 + d * DAY;
      const report = core.usageReport("org:o", reportDay, reportDay + DAY);
      expect(report.ok).toBe(true);
      if (report.ok) {
        const settled = report.rows.reduce((a, r) => a + r.settledMicros, 0);
        expect(settled).toBe(booked.get(`org:o|${reportDay}`)?.micros ?? 0);
      }
    }
    // The retention removed the old attempt records, and the history the oldest rollups: bounded.
    expect(store.rollups().every((r) => r.dayStart + DAY + HISTORY > T0 + DAYS * DAY + 60_000)).toBe(true);
    expect(store.rollups().length).toBeLessThanOrEqual(SCOPES.length * MODELS.length * (HISTORY / DAY + 1));
    expect(store.attempts().every((a) => a.createdAt >= T0 + DAYS * DAY + 60_000 - R || a.state === "held" || a.state === "pending_reconciliation")).toBe(true);
  });

  it("reads a cut day from the attempt records while they are kept, and refuses one retention already thinned", () => {
    const store = new MemoryLedgerStore();
    const core = new BudgetLedgerCore(store);
    const req = (now: number): ReserveRequest => ({ scopes: PATH, currency: "USD", amount: { micros: 100, tokens: 10 }, now, retentionMs: R, historyMs: HISTORY, meta: { model: "m1@1" } });
    core.reserve("morning", req(T0 + 3_600_000));
    core.settle("morning", { micros: 40, tokens: 4 }, T0 + 3_600_001);
    core.reserve("evening", req(T0 + 20 * 3_600_000));
    core.settle("evening", { micros: 60, tokens: 6 }, T0 + 20 * 3_600_000 + 1);
    const at = (from: number, to: number) => core.usageReport("org:o", from, to);
    expect(at(T0 + 12 * 3_600_000, T0 + DAY + 5)).toMatchObject({ ok: true, rows: [expect.objectContaining({ attempts: 1, settledMicros: 60 })] });
    expect(at(T0, T0 + DAY)).toMatchObject({ ok: true, rows: [expect.objectContaining({ attempts: 2, settledMicros: 100 })] });
    // Retention removes the morning's attempt only: the day can no longer be cut before evening.
    core.retain(T0 + 3_600_001 + R);
    expect(at(T0 + 12 * 3_600_000, T0 + DAY)).toMatchObject({ ok: true, rows: [expect.objectContaining({ attempts: 1, settledMicros: 60 })] });
    expect(at(T0 + 1, T0 + DAY)).toMatchObject({ ok: false, reason: "range_cuts_rollup", dayStart: T0 });
    expect(at(T0, T0 + DAY)).toMatchObject({ ok: true, rows: [expect.objectContaining({ attempts: 2, settledMicros: 100 })] });
    expect(core.dailyUsage("org:o", T0 + 5, T0 + 6)).toEqual([{ scope: "org:o", dayStart: T0, model: "m1@1", priceVersion: "", currency: "USD", attempts: 2, settledMicros: 100, settledTokens: 10 }]);
  });
});

describe("tenant ledger config: history", () => {
  it("is optional, whole days from 1d to 3650d, and at least the retention", () => {
    expect(tenantLedgerSchema.parse({}).history).toBeUndefined();
    expect(tenantLedgerSchema.parse({ history: "400d", retention: "30d" }).history).toBe(400 * DAY);
    expect(tenantLedgerSchema.parse({ history: "7d", retention: "7d" }).history).toBe(7 * DAY);
    for (const bad of [{ history: "36h" }, { history: "3651d" }, { history: "10d", retention: "30d" }]) expect(tenantLedgerSchema.safeParse(bad).success).toBe(false);
  });
});
