import { env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { BudgetLedger } from "../../../durable-objects/budget-ledger.ts";
import { SqliteLedgerStore } from "../../../src/ledger/ledger-sqlite-store.ts";
import { BudgetLedgerCore, DEFAULT_RETENTION_MS, MIN_RETENTION_MS, RETENTION_BATCH } from "../../../src/ledger/ledger.ts";
import { DAY, H6, PATHS, RetentionScenario, SCOPES, refsOf, type LedgerReads } from "./ledger-retention-model.ts";

const TABLES = ["ledger_scope_limits", "ledger_counters", "ledger_buckets", "ledger_credits", "ledger_top_ups", "ledger_attempts", "ledger_attempt_scopes", "ledger_audit", "ledger_settings", "ledger_refusals", "ledger_usage_rollups"];

describe("BudgetLedger Durable Object: retention", () => {
  it("runs retention from its one alarm in batches on real SQLite: rows bounded, answers exact", async () => {
    const stub = env.BUDGET_LEDGER.getByName("org:retention");
    const now = Date.now();
    // The object's clock is the real one, so the traffic is 50 past days. The retention is chosen
    // so its horizon falls mid-way through a 6-hour window, with no attempt within an hour of it:
    // what the alarm removes does not depend on how long the test takes.
    const retentionMs = MIN_RETENTION_MS + (((now - MIN_RETENTION_MS - 3 * 3_600_000) % H6) + H6) % H6;
    const horizon = now - retentionMs;
    const today = now - (now % DAY);
    const start = today - 50 * DAY;
    const quiet = [
      { from: horizon - 3_600_000, to: horizon + 3_600_000 },
      // The last hour before today: every lease has run out before the alarm.
      { from: today - 3_600_000, to: today },
    ];
    let sc: RetentionScenario | undefined;
    await runInDurableObject(stub, (_i: BudgetLedger, state) => {
      const store = new SqliteLedgerStore(state.storage);
      sc = new RetentionScenario({ core: new BudgetLedgerCore(store), tx: (fn) => store.transaction(fn) }, { start, retentionMs, seed: 50 });
      for (let d = 0; d < 50; d++) sc.day(start + d * DAY, d, quiet);
    });
    const model = sc!;
    // The traffic went around the object, so nothing armed its alarm: run it once by hand. One
    // run is one batch: it removes exactly a batch of the overdue attempts and re-arms at once.
    const first = await runInDurableObject(stub, async (instance: BudgetLedger, state) => {
      const attempts = () => state.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM ledger_attempts").one().n;
      const before = attempts();
      await instance.alarm();
      return { removed: before - attempts(), alarm: await state.storage.getAlarm() };
    });
    expect(first.removed).toBe(RETENTION_BATCH);
    expect(first.alarm).toBeLessThanOrEqual(Date.now());
    // The runtime fires a due alarm by itself too; run it until it is armed for later.
    const alarm = () => runInDurableObject(stub, (_i: BudgetLedger, state) => state.storage.getAlarm());
    let at = await alarm();
    for (let i = 0; i < 50 && !(at !== null && at > Date.now()); i++, at = await alarm()) if (at !== null) await runDurableObjectAlarm(stub);
    model.expireLeases(Date.now(), false);
    model.retain(Date.now());
    // Re-armed for the next moment something ages out, at most a retention and a day away.
    expect(at).toBeGreaterThan(Date.now());
    expect(at).toBeLessThanOrEqual(Date.now() + retentionMs + DAY);

    const rows = await runInDurableObject(stub, (_i: BudgetLedger, state) => Object.fromEntries(TABLES.map((t) => [t, state.storage.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM ${t}`).one().n])));
    const kept = model.kept();
    expect(rows).toMatchObject({
      ledger_attempts: kept.length,
      ledger_attempt_scopes: kept.length * 3,
      ledger_counters: model.counters().size,
      ledger_refusals: model.refusals.size,
      ledger_audit: model.audit.length,
      // The retention, when attempts may have been removed before, and the rollups' schema mark.
      ledger_settings: 3,
    });
    const { ledger_usage_rollups: rollups, ...rest } = rows;
    expect(Object.values(rest).reduce((a, b) => a + b!, 0)).toBeLessThanOrEqual(model.rowBound(Date.now()));
    expect(rollups).toBeLessThanOrEqual(model.rollupBound(50));
    // The attempts made far outnumber the attempt rows kept.
    expect(kept.length * 4).toBeLessThan(model.attempts.size);

    const reads: LedgerReads = {
      balance: (s) => stub.balance(s),
      usage: (s) => stub.usage(s),
      usageReport: (s, from, to) => stub.usageReport(s, from, to),
      refusals: (s, from, to) => stub.refusals(s, from, to),
      audit: () => stub.audit(1_000),
    };
    await model.check(reads, Date.now(), start);
    // Old pending attempts are still there; removed ones answer a late settlement as unknown, changing nothing.
    const oldPending = kept.filter((a) => a.state === "pending" && a.createdAt < horizon);
    expect(oldPending.length).toBeGreaterThan(0);
    for (const a of oldPending.slice(0, 3)) expect(await stub.attempt(a.id)).toMatchObject({ state: "pending_reconciliation" });
    const gone = [...model.attempts.values()].find((a) => a.removed)!;
    const before = await Promise.all(SCOPES.map((s) => stub.usage(s)));
    expect(await stub.settle(gone.id, { micros: 1, tokens: 1 })).toEqual({ ok: false, attemptId: gone.id, reason: "unknown_attempt" });
    expect(await stub.release(gone.id)).toEqual({ ok: false, attemptId: gone.id, reason: "unknown_attempt" });
    expect(await Promise.all(SCOPES.map((s) => stub.usage(s)))).toEqual(before);
    // A range cutting an old day is refused; the reports' rollups are read by index.
    expect(await stub.usageReport("org:o", start + DAY + 1, today)).toMatchObject({ ok: false, reason: "range_cuts_rollup", dayStart: start + DAY });
    await runInDurableObject(stub, (_i: BudgetLedger, state) => {
      const plan = (q: string) => state.storage.sql.exec<{ detail: string }>(`EXPLAIN QUERY PLAN ${q}`).toArray().map((r) => r.detail).join(" | ");
      expect(plan("SELECT * FROM ledger_usage_rollups WHERE scope = 'x' AND day_start >= 0 AND day_start < 1")).toMatch(/SEARCH ledger_usage_rollups USING PRIMARY KEY/);
      expect(plan("SELECT body FROM ledger_attempts INDEXED BY ledger_attempts_created WHERE created_at < 1 AND state IN ('settled', 'released') ORDER BY created_at LIMIT 5")).toMatch(/USING INDEX ledger_attempts_created/);
      expect(plan("SELECT window_end FROM ledger_counters WHERE window_end > 0 AND held = 0 ORDER BY window_end LIMIT 1")).toMatch(/USING INDEX ledger_counters_end/);
    });
  }, 120_000);

  it("moves the books of the previous schema over: refused attempts become tallies, counters get their window ends", async () => {
    const org = "org:retention-migrate";
    const stub = env.BUDGET_LEDGER.getByName(org);
    const now = Date.now();
    const old = now - (now % DAY) - 40 * DAY;
    const money = { currency: "USD", limitMicros: 1_000, periodMs: DAY };
    await runInDurableObject(stub, (_i: BudgetLedger, state) => {
      const sql = state.storage.sql;
      // The tables as the previous version made them: no created_at, no window_end, refusals kept as attempts.
      sql.exec(`CREATE TABLE ledger_scope_limits (scope TEXT PRIMARY KEY, configured TEXT, override TEXT);
        CREATE TABLE ledger_counters (scope TEXT NOT NULL, metric TEXT NOT NULL, window_start INTEGER NOT NULL, spent INTEGER NOT NULL, held INTEGER NOT NULL, pending INTEGER NOT NULL, overrun INTEGER NOT NULL, PRIMARY KEY (scope, metric, window_start));
        CREATE TABLE ledger_attempts (attempt_id TEXT PRIMARY KEY, state TEXT NOT NULL, lease_expires_at INTEGER NOT NULL, body TEXT NOT NULL);
        CREATE TABLE ledger_attempt_scopes (scope TEXT NOT NULL, created_at INTEGER NOT NULL, attempt_id TEXT NOT NULL, PRIMARY KEY (scope, created_at, attempt_id)) WITHOUT ROWID;`);
      sql.exec("INSERT INTO ledger_scope_limits VALUES (?, ?, NULL)", org, JSON.stringify({ money }));
      sql.exec("INSERT INTO ledger_counters VALUES (?, 'money:USD', ?, 300, 0, 0, 0), (?, 'tokens', 0, 30, 0, 0, 0)", org, old, org);
      const settled = { attemptId: "s", state: "settled", scopes: [org], currency: "USD", amount: { micros: 400, tokens: 30 }, charges: [{ scope: org, metric: "money:USD", windowStart: old, reserved: 400 }, { scope: org, metric: "tokens", windowStart: 0, reserved: 30 }], createdAt: old + 5, leaseExpiresAt: old + 600_005, result: { ok: true, attemptId: "s", leaseExpiresAt: old + 600_005 }, meta: { model: "m" }, settlement: { actual: { micros: 300, tokens: 30 }, overrun: { micros: 0, tokens: 0 }, settledAt: old + 9 } };
      sql.exec("INSERT INTO ledger_attempts VALUES ('s', 'settled', ?, ?)", old + 600_005, JSON.stringify(settled));
      sql.exec("INSERT INTO ledger_attempt_scopes VALUES (?, ?, 's')", org, old + 5);
      for (const [id, day, reason] of [["r1", old, "money_budget_exceeded"], ["r2", old + 60_000, "money_budget_exceeded"], ["r3", now, "balance_exhausted"]] as const) {
        const body = { attemptId: id, state: "refused", scopes: [org], currency: "USD", amount: { micros: 5_000, tokens: 0 }, charges: [], createdAt: day, leaseExpiresAt: day, result: { ok: false, attemptId: id, reason, scope: org, metric: "money:USD", limit: 1_000, used: 0, requested: 5_000 } };
        sql.exec("INSERT INTO ledger_attempts VALUES (?, 'refused', ?, ?)", id, day, JSON.stringify(body));
      }
    });
    // The first call moves everything over.
    expect(await stub.refusals(org, old, now + 1)).toEqual([
      { dayStart: old, dayEnd: old + DAY, total: 2, byReason: { money_budget_exceeded: 2 } },
      { dayStart: now - (now % DAY), dayEnd: now - (now % DAY) + DAY, total: 1, byReason: { balance_exhausted: 1 } },
    ]);
    expect(await stub.attempt("r1")).toBeUndefined();
    expect(await stub.usage(org)).toEqual([
      { scope: org, metric: "money:USD", windowStart: old, windowEnd: old + DAY, spent: 300, held: 0, pending: 0, overrun: 0 },
      { scope: org, metric: "tokens", windowStart: 0, windowEnd: 0, spent: 30, held: 0, pending: 0, overrun: 0 },
    ]);
    // Forty days old with the default retention of thirty: the next alarm removes the settled attempt, its day's counter and the old tally.
    await runInDurableObject(stub, (instance: BudgetLedger) => instance.alarm());
    expect(await stub.attempt("s")).toBeUndefined();
    expect((await stub.usage(org)).map((c) => c.windowStart)).toEqual([0]);
    expect((await stub.refusals(org, old, now + 1)).map((d) => d.total)).toEqual([1]);
    expect(await stub.usageReport(org, old, old + DAY)).toEqual({ ok: true, rows: [{ model: "m", priceVersion: "", currency: "USD", attempts: 1, settledMicros: 300, settledTokens: 30, pendingMicros: 0, pendingTokens: 0 }] });
    // The settled attempt the older schema kept was added to its day's rollup when the books moved over: it lives on for the history.
    expect(await stub.dailyUsage(org, old, now)).toEqual([{ scope: org, dayStart: old, model: "m", priceVersion: "", currency: "USD", attempts: 1, settledMicros: 300, settledTokens: 30 }]);
  });

  it("keeps the rollups an older version wrote at retention, adds the settled attempts still kept, and refuses to cut the days they cover", async () => {
    const org = "org:retention-rollups-migrate";
    const stub = env.BUDGET_LEDGER.getByName(org);
    const now = Date.now();
    const today = now - (now % DAY);
    const retired = today - 40 * DAY;
    const kept = today - 2 * DAY;
    await runInDurableObject(stub, (_i: BudgetLedger, state) => {
      const store = new SqliteLedgerStore(state.storage);
      // The current tables, then the state an older version left: rollups only of retired attempts, no settings.
      store.transaction(() => undefined);
      const sql = state.storage.sql;
      sql.exec("DELETE FROM ledger_settings");
      sql.exec("INSERT INTO ledger_usage_rollups VALUES (?, ?, 'm', 'v', 'USD', 3, 900, 90)", org, retired);
      const settled = { attemptId: "k", state: "settled", scopes: [org], currency: "USD", amount: { micros: 400, tokens: 30 }, charges: [], createdAt: kept + 7, leaseExpiresAt: kept + 600_007, result: { ok: true, attemptId: "k", leaseExpiresAt: kept + 600_007 }, meta: { model: "m", priceVersion: "v" }, settlement: { actual: { micros: 250, tokens: 20 }, overrun: { micros: 0, tokens: 0 }, settledAt: kept + 9 } };
      sql.exec("INSERT INTO ledger_attempts (attempt_id, state, lease_expires_at, created_at, body) VALUES ('k', 'settled', ?, ?, ?)", kept + 600_007, kept + 7, JSON.stringify(settled));
      sql.exec("INSERT INTO ledger_attempt_scopes VALUES (?, ?, 'k')", org, kept + 7);
    });
    // A new store moves the books over on its first transaction.
    const migrated = await runInDurableObject(stub, (_i: BudgetLedger, state) => {
      const store = new SqliteLedgerStore(state.storage);
      const core = new BudgetLedgerCore(store);
      return store.transaction(() => ({ days: core.dailyUsage(org, retired, now), cut: core.usageReport(org, retired + 1, now), whole: core.usageReport(org, retired, now) }));
    });
    expect(migrated.days.map((r) => [r.dayStart, r.attempts, r.settledMicros])).toEqual([
      [retired, 3, 900],
      [kept, 1, 250],
    ]);
    expect(migrated.cut).toMatchObject({ ok: false, reason: "range_cuts_rollup", dayStart: retired });
    expect(migrated.whole).toMatchObject({ ok: true, rows: [expect.objectContaining({ attempts: 4, settledMicros: 1_150, settledTokens: 110 })] });
  });

  it("arms its one alarm for a refusal's tally, for a lease, then for the settled attempt's age-out", async () => {
    const stub = env.BUDGET_LEDGER.getByName("org:retention-arming");
    const alarm = () => runInDurableObject(stub, (_i: BudgetLedger, state) => state.storage.getAlarm());
    const refused = await stub.reserve("no", { scopes: refsOf(PATHS[0]!), currency: "USD", amount: { micros: 10_000_000, tokens: 0 } });
    expect(refused).toMatchObject({ ok: false, reason: "money_budget_exceeded" });
    const now = Date.now();
    // Nothing but a refusal tally: it ages out a retention (the default) after its day ends.
    expect(await alarm()).toBe(now - (now % DAY) + DAY + DEFAULT_RETENTION_MS + 1);
    const granted = await stub.reserve("yes", { scopes: refsOf(PATHS[0]!), currency: "USD", amount: { micros: 10, tokens: 1 }, leaseMs: 60_000, retentionMs: MIN_RETENTION_MS });
    expect(granted.ok).toBe(true);
    expect(await alarm()).toBe(granted.ok ? granted.leaseExpiresAt : -1);
    expect(await stub.settle("yes", { micros: 5, tokens: 1 })).toMatchObject({ ok: true });
    // The lease alarm finds nothing to expire and re-arms for the settled attempt, now seven days out.
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    const rec = await stub.attempt("yes");
    expect(await alarm()).toBe(rec!.createdAt + MIN_RETENTION_MS + 1);
  });
});
