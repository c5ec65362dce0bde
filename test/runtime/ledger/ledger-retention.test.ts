import { describe, expect, it } from "vitest";
import { tenantLedgerSchema } from "../../../src/config/budget-schema.ts";
import { budgetLedgerClient } from "../../../src/ledger/ledger-client.ts";
import { MemoryLedgerStore } from "../../../src/ledger/ledger-memory-store.ts";
import { BudgetLedgerCore, DEFAULT_HISTORY_MS, DEFAULT_RETENTION_MS, MIN_RETENTION_MS, type ReserveRequest, type ScopeLimits } from "../../../src/ledger/ledger.ts";
import { memoryLedgers } from "./ledger-fakes.ts";
import { DAY, RetentionScenario, SCOPES, type LedgerReads } from "./ledger-retention-model.ts";

const T0 = Date.UTC(2027, 0, 4);
const R = MIN_RETENTION_MS;
const usd = (limitMicros: number): ScopeLimits => ({ money: { currency: "USD", limitMicros, periodMs: DAY } });
const PATH = [{ name: "org:acme", limits: usd(1_000_000) }, { name: "key:k" }];
const req = (micros: number, over: Partial<ReserveRequest> = {}): ReserveRequest => ({ scopes: PATH, currency: "USD", amount: { micros, tokens: 10 }, now: T0, retentionMs: R, meta: { model: "m", priceVersion: "v" }, ...over });

function ledger() {
  const store = new MemoryLedgerStore();
  return { store, l: new BudgetLedgerCore(store) };
}

/** Runs retention to completion, as the alarm does by re-arming while a run says there is more. */
function retainAll(l: BudgetLedgerCore, t: number, max?: number): number {
  let runs = 0;
  for (;;) {
    const run = l.retain(t, max);
    runs++;
    if (max !== undefined) expect(run.attempts + run.counters + run.refusals + run.rollups).toBeLessThanOrEqual(max);
    if (!run.more) return runs;
  }
}

const reads = (l: BudgetLedgerCore, t: number): LedgerReads => ({
  balance: async (s) => l.balance(s, t),
  usage: async (s) => l.usage(s),
  usageReport: async (s, from, to) => l.usageReport(s, from, to),
  refusals: async (s, from, to) => l.refusals(s, from, to),
  audit: async () => l.audit(1_000),
});

describe("BudgetLedgerCore: retention over many periods", () => {
  it("keeps the rows bounded over 60 days of traffic while balances, usage, usage reports, refusals and the audit stay exact", async () => {
    const { store, l } = ledger();
    const sc = new RetentionScenario({ core: l, tx: (fn) => fn() }, { start: T0, retentionMs: R, seed: 20_270_104 });
    const days = 60;
    let maxRuns = 0;
    const growth: number[] = [];
    for (let d = 0; d < days; d++) {
      sc.day(T0 + d * DAY, d);
      // The alarm at the end of the day: leases first, then retention in small batches.
      const t = T0 + (d + 1) * DAY - 1;
      sc.expireLeases(t);
      maxRuns = Math.max(maxRuns, retainAll(l, t, 16));
      sc.retain(t);
      const rows = store.rowCounts();
      expect(rows.attempts).toBe(sc.kept().length);
      expect(rows.refusals).toBe(sc.refusals.size);
      expect(rows.counters).toBe(sc.counters().size);
      const { rollups, ...rest } = rows;
      const total = Object.values(rest).reduce((a, b) => a + b, 0);
      expect(total).toBeLessThanOrEqual(sc.rowBound(t));
      expect(rollups).toBeLessThanOrEqual(sc.rollupBound(d + 1));
      // Net of what is kept by design (pending attempts, their rows and counters; admin acts), the rows must not grow.
      const pending = sc.kept().filter((a) => a.state === "pending").length;
      growth.push(total - pending * (1 + 3 + 6) - rest.audit! - rest.topUps!);
      // After a complete run, nothing is due before the next moment something ages out.
      expect(l.nextAlarm()).toBeGreaterThan(t);
      if (d % 6 === 5 || d === days - 1) await sc.check(reads(l, t), t, T0);
    }
    const end = T0 + days * DAY - 1;
    // The traffic exercised every outcome, and retention worked in several batches.
    expect(sc.tally.reserved).toBeGreaterThan(days * 20);
    for (const reason of ["money_budget_exceeded", "token_limit_exceeded", "request_rate_exceeded", "balance_exhausted"]) expect(sc.tally.byReason.get(reason) ?? 0, reason).toBeGreaterThan(20);
    expect(sc.tally.resolved * sc.tally.lateSettled * sc.tally.lateReleased).toBeGreaterThan(0);
    expect(maxRuns).toBeGreaterThan(1);
    // Bounded: once the retention is full, the rows stop growing with the days (rollups aside),
    // while the attempts ever made keep growing.
    const settledIn = growth.slice(10);
    expect(Math.max(...settledIn.slice(25))).toBeLessThanOrEqual(Math.max(...settledIn.slice(0, 25)) * 1.25);
    expect(store.rowCounts().attempts).toBeLessThan(sc.attempts.size / 4);
    // Pending attempts are never removed, however old; nor are the counters they hold.
    const oldPending = sc.kept().filter((a) => a.state === "pending" && a.createdAt < end - R);
    expect(oldPending.length).toBeGreaterThan(0);
    for (const a of oldPending) expect(l.attempt(a.id)).toMatchObject({ state: "pending_reconciliation" });
    expect(l.usage("org:o").some((c) => c.windowEnd > 0 && c.windowEnd < end - R && c.pending > 0)).toBe(true);
    // A late settle or release of a removed attempt finds nothing and changes nothing.
    const removed = [...sc.attempts.values()].filter((a) => a.removed);
    const before = SCOPES.map((s) => l.usage(s));
    for (const a of removed.slice(0, 5)) {
      expect(l.settle(a.id, { micros: 1, tokens: 1 }, end)).toEqual({ ok: false, attemptId: a.id, reason: "unknown_attempt" });
      expect(l.release(a.id, end)).toEqual({ ok: false, attemptId: a.id, reason: "unknown_attempt" });
      expect(l.attempt(a.id)).toBeUndefined();
    }
    expect(SCOPES.map((s) => l.usage(s))).toEqual(before);
    // A range cutting through a rolled-up day is refused, naming the day; the whole day is exact.
    const old = T0 + 2 * DAY;
    expect(l.usageReport("org:o", old + 5, end)).toMatchObject({ ok: false, reason: "range_cuts_rollup", dayStart: old, message: expect.stringMatching(/2027-01-06.*00:00 UTC/) });
    expect(l.usageReport("org:o", old, old + DAY - 1)).toMatchObject({ ok: false, reason: "range_cuts_rollup", dayStart: old });
    expect(l.usageReport("org:o", old, old + DAY)).toEqual({ ok: true, rows: sc.usageReport("org:o", old, old + DAY) });
    // Done is done: another run removes nothing.
    expect(l.retain(end)).toEqual({ attempts: 0, counters: 0, refusals: 0, rollups: 0, more: false });
  }, 60_000);
});

describe("BudgetLedgerCore: retention", () => {
  it("never removes held or pending attempts, nor counters still holding, however old", () => {
    const { store, l } = ledger();
    l.reserve("held", req(100, { leaseMs: 60_000 }));
    l.reserve("unknown", req(200));
    l.settle("unknown", "unknown", T0);
    l.reserve("expired", req(300, { leaseMs: 1_000 }));
    l.expireLeases(T0 + 1_000);
    l.reserve("settled", req(400));
    l.settle("settled", { micros: 350, tokens: 5 }, T0);
    l.reserve("released", req(500));
    l.release("released", T0);
    const later = T0 + R + 10 * DAY;
    retainAll(l, later);
    expect(store.attempts().map((a) => [a.attemptId, a.state])).toEqual([
      ["held", "held"],
      ["unknown", "pending_reconciliation"],
      ["expired", "pending_reconciliation"],
    ]);
    expect(store.rowCounts()).toMatchObject({ attempts: 3, attemptScopes: 6 });
    // The day's money counter still holds them; the settled attempt's usage is in it and in its rollup.
    expect(l.usage("org:acme").find((c) => c.metric === "money:USD")).toMatchObject({ windowStart: T0, windowEnd: T0 + DAY, held: 600, pending: 500, spent: 350 });
    expect(l.usageReport("org:acme", T0, T0 + DAY)).toEqual({
      ok: true,
      rows: [{ model: "m", priceVersion: "v", currency: "USD", attempts: 4, settledMicros: 350, settledTokens: 5, pendingMicros: 600, pendingTokens: 30 }],
    });
    // Resolving and releasing them finishes them: the next run takes them and the emptied counter.
    l.resolve("unknown", { micros: 150, tokens: 3 }, { actor: "ops" }, later);
    l.release("expired", later);
    l.settle("held", { micros: 90, tokens: 2 }, later);
    retainAll(l, later);
    expect(store.attempts()).toEqual([]);
    expect(store.rowCounts()).toMatchObject({ attempts: 0, attemptScopes: 0 });
    expect(l.usage("org:acme").filter((c) => c.windowEnd > 0)).toEqual([]);
    expect(l.usageReport("org:acme", T0, T0 + DAY)).toEqual({
      ok: true,
      rows: [{ model: "m", priceVersion: "v", currency: "USD", attempts: 3, settledMicros: 590, settledTokens: 10, pendingMicros: 0, pendingTokens: 0 }],
    });
    // The lifetime counter of the unlimited key scope stays, and still adds up.
    expect(l.usage("key:k")).toEqual([
      expect.objectContaining({ metric: "money:USD", windowStart: 0, windowEnd: 0, spent: 590, held: 0 }),
      expect.objectContaining({ metric: "tokens", windowStart: 0, windowEnd: 0, spent: 10, held: 0 }),
    ]);
    // The audit keeps the resolution.
    expect(l.audit(10).map((r) => r.action)).toEqual(["resolve"]);
  });

  it("removes only what is older than the retention, by creation time, window end and day", () => {
    const { store, l } = ledger();
    l.reserve("a", req(100));
    l.settle("a", { micros: 100, tokens: 10 }, T0);
    l.reserve("refused", req(10_000_000));
    // Exactly the retention old: kept (removal is strictly older).
    expect(l.retain(T0 + R)).toEqual({ attempts: 0, counters: 0, refusals: 0, rollups: 0, more: false });
    expect(l.retain(T0 + R + 1)).toMatchObject({ attempts: 1, counters: 0, refusals: 0 });
    // The day's counter and tally go once the whole day is older than the retention.
    expect(l.retain(T0 + DAY + R)).toMatchObject({ counters: 0, refusals: 0 });
    expect(l.retain(T0 + DAY + R + 1)).toMatchObject({ counters: 1, refusals: 1 });
    // Left: the lifetime counters (org tokens, key money and tokens) and the rollups, kept for the
    // history (90 days by default), after which the alarm removes them too.
    expect(store.rowCounts()).toMatchObject({ attempts: 0, counters: 3, refusals: 0, rollups: 2 });
    expect(l.nextAlarm()).toBe(T0 + DAY + DEFAULT_HISTORY_MS);
    expect(l.retain(T0 + DAY + DEFAULT_HISTORY_MS - 1)).toMatchObject({ rollups: 0 });
    expect(l.retain(T0 + DAY + DEFAULT_HISTORY_MS)).toMatchObject({ rollups: 2 });
    expect(store.rowCounts()).toMatchObject({ rollups: 0 });
    expect(l.nextAlarm()).toBeUndefined();
  });

  it("schedules the alarm at the earlier of the next lease expiry and the next retention work", () => {
    const { l } = ledger();
    expect(l.nextAlarm()).toBeUndefined();
    l.reserve("a", req(100, { leaseMs: 60_000 }));
    expect(l.nextAlarm()).toBe(T0 + 60_000);
    l.settle("a", { micros: 1, tokens: 1 }, T0 + 5);
    // Only retention is left: the attempt ages out one millisecond after the retention; its day's counter later.
    expect(l.nextAlarm()).toBe(T0 + R + 1);
    l.retain(T0 + R + 1);
    expect(l.nextAlarm()).toBe(T0 + DAY + R + 1);
    // A refusal's tally ages out with its day; a newer lease comes first.
    const { l: l2 } = ledger();
    expect(l2.reserve("big", req(10_000_000, { now: T0 + 7 }))).toMatchObject({ ok: false });
    expect(l2.wakeFor(l2.reserve("big", req(10_000_000, { now: T0 + 7 })), T0 + 7)).toBe(T0 + DAY + R + 1);
    expect(l2.nextAlarm()).toBe(T0 + DAY + R + 1);
    expect(l2.wakeFor(l2.reserve("ok", req(1, { now: T0 + 9 })), T0 + 9)).toBe(T0 + 9 + 600_000);
    expect(l2.nextAlarm()).toBe(T0 + 9 + 600_000);
    expect(l2.wakeFor(l2.reserve("", req(1)), T0)).toBeUndefined();
  });

  it("batches: at most `max` rows a run, and says when more remain", () => {
    const { store, l } = ledger();
    for (let i = 0; i < 25; i++) {
      l.reserve(`a${i}`, req(10, { now: T0 + i }));
      l.settle(`a${i}`, { micros: 5, tokens: 1 }, T0 + i);
    }
    const later = T0 + R + 2 * DAY;
    expect(l.retain(later, 10)).toEqual({ attempts: 10, counters: 0, refusals: 0, rollups: 0, more: true });
    expect(l.retain(later, 10)).toEqual({ attempts: 10, counters: 0, refusals: 0, rollups: 0, more: true });
    expect(l.retain(later, 10)).toEqual({ attempts: 5, counters: 1, refusals: 0, rollups: 0, more: false });
    expect(store.rowCounts()).toMatchObject({ attempts: 0, counters: 3 });
    // Rolled up per batch, the totals are the same as in one go.
    expect(l.usageReport("org:acme", T0, T0 + DAY)).toEqual({ ok: true, rows: [expect.objectContaining({ attempts: 25, settledMicros: 125, settledTokens: 25 })] });
    expect(store.rollups().filter((r) => r.scope === "org:acme")).toHaveLength(1);
  });

  it("takes its retention from the reservations: stored when it changes, kept when omitted, 30 days by default", () => {
    const { store, l } = ledger();
    expect(l.retention()).toBe(DEFAULT_RETENTION_MS);
    l.reserve("a", req(1, { retentionMs: undefined }));
    expect(l.retention()).toBe(DEFAULT_RETENTION_MS);
    expect(store.rowCounts().settings).toBe(0);
    let puts = 0;
    const put = store.putRetention.bind(store);
    store.putRetention = (ms) => (puts++, put(ms));
    l.reserve("b", req(1, { retentionMs: 9 * DAY }));
    l.reserve("c", req(1, { retentionMs: 9 * DAY }));
    expect([l.retention(), puts]).toEqual([9 * DAY, 1]);
    // Stored even when the reservation is refused: it is configuration, not books.
    expect(l.reserve("d", req(10_000_000, { retentionMs: 12 * DAY })).ok).toBe(false);
    expect(l.retention()).toBe(12 * DAY);
    l.reserve("e", req(1, { retentionMs: undefined }));
    expect(l.retention()).toBe(12 * DAY);
    // Below seven times the longest lease, or above ten years: an invalid argument, nothing stored.
    for (const bad of [R - 1, 3_651 * DAY, R + 0.5]) expect(l.reserve("f", req(1, { retentionMs: bad }))).toMatchObject({ ok: false, reason: "invalid_argument", message: expect.stringMatching(/retentionMs/) });
    expect(l.retention()).toBe(12 * DAY);
  });

  it("passes the retention to every stripe unchanged", async () => {
    const clock = { now: T0 };
    const { objectFor, core } = memoryLedgers(clock);
    const client = budgetLedgerClient(objectFor, { stripes: () => 3 });
    for (let i = 0; i < 12; i++) await client.reserve(`s${i}`, { scopes: [{ name: "tenant:t", limits: usd(999) }], currency: "USD", amount: { micros: 1, tokens: 0 }, retentionMs: 40 * DAY });
    expect(["tenant:t", "tenant:t#1", "tenant:t#2"].map((n) => core(n).retention())).toEqual([40 * DAY, 40 * DAY, 40 * DAY]);
    // An invalid answer of the ledger object comes back as the result, after one call.
    const r = await client.reserve("bad", { scopes: [{ name: "tenant:t" }], currency: "USD", amount: { micros: 1.5, tokens: 0 } });
    expect(r.result).toMatchObject({ ok: false, reason: "invalid_argument", message: expect.stringMatching(/amount\.micros/) });
  });

  it("keeps one refusal row per scope, day and reason, however many refusals", () => {
    const { store, l } = ledger();
    for (let i = 0; i < 200; i++) expect(l.reserve(`r${i}`, req(2_000_000, { now: T0 + i * 60_000 })).ok).toBe(false);
    expect(store.rowCounts()).toMatchObject({ attempts: 0, attemptScopes: 0, refusals: 1, counters: 0 });
    expect(l.refusals("org:acme", T0, T0 + DAY)).toEqual([{ dayStart: T0, dayEnd: T0 + DAY, total: 200, byReason: { money_budget_exceeded: 200 } }]);
    expect(l.refusals("key:k", T0, T0 + DAY)).toEqual([]);
    // Tallies of the days overlapping the range: an edge inside a day includes it.
    expect(l.refusals("org:acme", T0 + 5, T0 + 6)).toHaveLength(1);
    expect(l.refusals("org:acme", T0 + DAY, T0 + 2 * DAY)).toEqual([]);
    expect(() => l.refusals("org:acme", 5, 1)).toThrow(/toMs/);
  });
});

describe("tenant ledger config: retention", () => {
  it("defaults to 30 days and takes 7 to 3650 days", () => {
    expect(tenantLedgerSchema.parse({})).toMatchObject({ retention: 30 * DAY, lease: 600_000, stripes: 1 });
    expect(tenantLedgerSchema.parse({ retention: "7d" }).retention).toBe(R);
    expect(tenantLedgerSchema.parse({ retention: "3650d" }).retention).toBe(3_650 * DAY);
    for (const bad of ["6d", "167h", "3651d", "soon"]) expect(tenantLedgerSchema.safeParse({ retention: bad }).success).toBe(false);
  });
});
