import { LedgerRowCache } from "./ledger-row-cache.ts";
import { ensureLedgerSchema, type LedgerSql } from "./ledger-sql-schema.ts";
import {
  LEDGER_DAY_MS,
  type AttemptRecord,
  type AttemptState,
  type AuditRecord,
  type BucketState,
  type LedgerCounter,
  type LedgerMetric,
  type LedgerStore,
  type RefusalCount,
  type RefusalReason,
  type ScopeLimitsView,
  type TopUpRecord,
  type ScopeSpend,
  type UsageRollup,
} from "./ledger-types.ts";

/** The part of a Durable Object's storage (`ctx.storage`) the store uses. */
export interface LedgerSqlStorage {
  readonly sql: LedgerSql;
  transactionSync<T>(fn: () => T): T;
}

type CounterRow = { scope: string; metric: string; window_start: number; window_end: number; spent: number; held: number; pending: number; overrun: number };
type RollupRow = { scope: string; day_start: number; model: string; price_version: string; currency: string; attempts: number; settled_micros: number; settled_tokens: number };

type StoredLimits = Omit<ScopeLimitsView, "effective">;

const counter = (r: CounterRow): LedgerCounter => ({ scope: r.scope, metric: r.metric as LedgerMetric, windowStart: r.window_start, windowEnd: r.window_end, spent: r.spent, held: r.held, pending: r.pending, overrun: r.overrun });
const rollup = (r: RollupRow): UsageRollup => ({ scope: r.scope, dayStart: r.day_start, model: r.model, priceVersion: r.price_version, currency: r.currency, attempts: r.attempts, settledMicros: r.settled_micros, settledTokens: r.settled_tokens });
const bodies = <T>(rows: { body: string }[]): T[] => rows.map((r) => JSON.parse(r.body) as T);

/**
 * A tenant's ledger in its Durable Object's SQLite storage (schema: `ledger-sql-schema.ts`): limits
 * per scope, one counter row per (scope, metric, period), a request bucket per scope, credits and
 * top-ups, one row per admitted attempt (the record as JSON; state, lease and creation as columns),
 * the audit log, refusal tallies per (scope, day, reason), usage rollups per (scope, day, model,
 * price version, currency) of the attempts retention removed, and the retention setting.
 *
 * Usage reports read `ledger_attempt_scopes` — one row per (scope, created_at, attempt) of each
 * admitted attempt — so a report is an index range scan, capped by the caller.
 *
 * It lives in `src/ledger` rather than beside the BudgetLedger object, which stays a thin shell: it
 * needs nothing of the runtime but {@link LedgerSqlStorage}.
 */
export class SqliteLedgerStore implements LedgerStore {
  readonly #storage: LedgerSqlStorage;
  readonly #sql: LedgerSql;
  #ready = false;
  /** Limits, counters, buckets and credits (attempts are read once or twice: not kept). */
  readonly #rows = new LedgerRowCache();
  /**
   * Counters changed in the current transaction, written once at its end: a settlement batch
   * moves the same few counters once per attempt in it.
   */
  readonly #dirtyCounters = new Map<string, LedgerCounter>();
  /**
   * Rollup additions of the current transaction, summed per row and written once at its end: a
   * settlement batch adds to the same few (scope, day, model) rows once per attempt in it.
   */
  readonly #dirtyRollups = new Map<string, UsageRollup>();

  constructor(storage: LedgerSqlStorage) {
    this.#storage = storage;
    this.#sql = storage.sql;
  }

  /** A query's rows, as the caller's row type (SQLite hands back what the columns hold). */
  #q<T>(query: string, ...bindings: (string | number | null)[]): { toArray(): T[] } {
    return this.#sql.exec(query, ...bindings) as unknown as { toArray(): T[] };
  }

  /** Runs `fn` atomically (`transactionSync`): it must not await, so no other call interleaves. */
  transaction<T>(fn: () => T): T {
    if (!this.#ready) ensureLedgerSchema(this.#sql);
    this.#ready = true;
    try {
      return this.#storage.transactionSync(() => {
        const result = fn();
        this.#writeCounters();
        this.#writeRollups();
        return result;
      });
    } catch (err) {
      // The transaction rolled back: rows remembered during it may never have been committed.
      this.#dirtyCounters.clear();
      this.#dirtyRollups.clear();
      this.#rows.clear();
      throw err;
    }
  }

  getLimits(scope: string): StoredLimits | undefined {
    return this.#rows.get(`l\u0000${scope}`, () => {
      const r = this.#q<{ configured: string | null; override: string | null }>("SELECT configured, override FROM ledger_scope_limits WHERE scope = ?", scope).toArray()[0];
      if (r === undefined) return undefined;
      return { ...(r.configured !== null ? { configured: JSON.parse(r.configured) } : {}), ...(r.override !== null ? { override: JSON.parse(r.override) } : {}) } as StoredLimits;
    });
  }

  putLimits(scope: string, l: StoredLimits): void {
    this.#rows.set(`l\u0000${scope}`, l);
    const json = (v: unknown) => (v === undefined ? null : JSON.stringify(v));
    this.#sql.exec(
      "INSERT INTO ledger_scope_limits (scope, configured, override) VALUES (?, ?, ?) ON CONFLICT(scope) DO UPDATE SET configured = excluded.configured, override = excluded.override",
      scope,
      json(l.configured),
      json(l.override),
    );
  }

  getCounter(scope: string, metric: LedgerMetric, windowStart: number): LedgerCounter | undefined {
    return this.#rows.get(`c\u0000${scope}\u0000${metric}\u0000${windowStart}`, () => {
      const r = this.#q<CounterRow>("SELECT * FROM ledger_counters WHERE scope = ? AND metric = ? AND window_start = ?", scope, metric, windowStart).toArray()[0];
      return r === undefined ? undefined : counter(r);
    });
  }

  putCounter(c: LedgerCounter): void {
    const key = `c\u0000${c.scope}\u0000${c.metric}\u0000${c.windowStart}`;
    this.#rows.set(key, c);
    this.#dirtyCounters.set(key, c);
  }

  /** Writes the counters the transaction changed; every query that reads counters runs it first. */
  #writeCounters(): void {
    for (const c of this.#dirtyCounters.values()) this.#writeCounter(c);
    this.#dirtyCounters.clear();
  }

  #writeCounter(c: LedgerCounter): void {
    this.#sql.exec(
      `INSERT INTO ledger_counters (scope, metric, window_start, window_end, spent, held, pending, overrun) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT(scope, metric, window_start) DO UPDATE SET spent = excluded.spent, held = excluded.held, pending = excluded.pending, overrun = excluded.overrun`,
      ...[c.scope, c.metric, c.windowStart, c.windowEnd, c.spent, c.held, c.pending, c.overrun],
    );
  }

  countersOf(scope: string): LedgerCounter[] {
    this.#writeCounters();
    return this.#q<CounterRow>("SELECT * FROM ledger_counters WHERE scope = ? ORDER BY metric, window_start", scope).toArray().map(counter);
  }

  getBucket(scope: string): BucketState | undefined {
    return this.#rows.get(`b\u0000${scope}`, () => {
      const r = this.#q<{ units: number; at: number }>("SELECT units, at FROM ledger_buckets WHERE scope = ?", scope).toArray()[0];
      return r === undefined ? undefined : { scope, units: r.units, at: r.at };
    });
  }

  putBucket(b: BucketState): void {
    this.#rows.set(`b\u0000${b.scope}`, b);
    this.#sql.exec("INSERT INTO ledger_buckets (scope, units, at) VALUES (?, ?, ?) ON CONFLICT(scope) DO UPDATE SET units = excluded.units, at = excluded.at", b.scope, b.units, b.at);
  }

  getCredited(scope: string, currency: string): number {
    return (
      this.#rows.get(`$\u0000${scope}\u0000${currency}`, () => this.#q<{ credited: number }>("SELECT credited FROM ledger_credits WHERE scope = ? AND currency = ?", scope, currency).toArray()[0]?.credited) ?? 0
    );
  }

  putCredited(scope: string, currency: string, credited: number): void {
    this.#rows.set(`$\u0000${scope}\u0000${currency}`, credited);
    this.#sql.exec("INSERT INTO ledger_credits (scope, currency, credited) VALUES (?, ?, ?) ON CONFLICT(scope, currency) DO UPDATE SET credited = excluded.credited", scope, currency, credited);
  }

  getTopUp(opId: string): TopUpRecord | undefined {
    return bodies<TopUpRecord>(this.#q<{ body: string }>("SELECT body FROM ledger_top_ups WHERE op_id = ?", opId).toArray())[0];
  }

  putTopUp(rec: TopUpRecord): void {
    this.#sql.exec("INSERT INTO ledger_top_ups (op_id, body) VALUES (?, ?)", rec.opId, JSON.stringify(rec));
  }

  getAttempt(attemptId: string): AttemptRecord | undefined {
    return bodies<AttemptRecord>(this.#q<{ body: string }>("SELECT body FROM ledger_attempts WHERE attempt_id = ?", attemptId).toArray())[0];
  }

  putAttempt(rec: AttemptRecord): void {
    this.#sql.exec(
      `INSERT INTO ledger_attempts (attempt_id, state, lease_expires_at, created_at, body) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT(attempt_id) DO UPDATE SET state = excluded.state, lease_expires_at = excluded.lease_expires_at, body = excluded.body`,
      ...[rec.attemptId, rec.state, rec.leaseExpiresAt, rec.createdAt, JSON.stringify(rec)],
    );
    // An admitted attempt is written `held` first, one from a lease when it is reported: index its
    // scopes then (their rows never change; a repeat is ignored).
    if (rec.state === "held" || rec.fromLease !== undefined) {
      for (const scope of new Set(rec.scopes)) {
        this.#sql.exec("INSERT OR IGNORE INTO ledger_attempt_scopes (scope, created_at, attempt_id) VALUES (?, ?, ?)", scope, rec.createdAt, rec.attemptId);
      }
    }
  }

  expiredLeases(now: number, limit: number): AttemptRecord[] {
    return bodies(this.#q<{ body: string }>("SELECT body FROM ledger_attempts WHERE state = 'held' AND lease_expires_at <= ? ORDER BY lease_expires_at LIMIT ?", now, limit).toArray());
  }

  earliestLease(): number | undefined {
    const r = this.#q<{ e: number | null }>("SELECT MIN(lease_expires_at) AS e FROM ledger_attempts WHERE state = 'held'").toArray()[0];
    return r?.e ?? undefined;
  }

  attemptsInState(state: AttemptState, limit: number, afterAttemptId?: string): AttemptRecord[] {
    const q = "SELECT body FROM ledger_attempts WHERE state = ? AND attempt_id > ? ORDER BY attempt_id LIMIT ?";
    return bodies(this.#q<{ body: string }>(q, state, afterAttemptId ?? "", limit).toArray());
  }

  attemptsCharging(scope: string, fromMs: number, toMs: number, limit: number): AttemptRecord[] {
    const q = `SELECT a.body AS body FROM ledger_attempt_scopes s JOIN ledger_attempts a ON a.attempt_id = s.attempt_id
      WHERE s.scope = ? AND s.created_at >= ? AND s.created_at < ? ORDER BY s.created_at, s.attempt_id LIMIT ?`;
    return bodies(this.#q<{ body: string }>(q, scope, fromMs, toMs, limit).toArray());
  }

  nextAuditSeq(): number {
    return (this.#q<{ s: number | null }>("SELECT MAX(seq) AS s FROM ledger_audit").toArray()[0]?.s ?? 0) + 1;
  }

  putAudit(rec: AuditRecord): void {
    this.#sql.exec("INSERT INTO ledger_audit (seq, body) VALUES (?, ?)", rec.seq, JSON.stringify(rec));
  }

  auditAfter(afterSeq: number, limit: number): AuditRecord[] {
    return bodies(this.#q<{ body: string }>("SELECT body FROM ledger_audit WHERE seq > ? ORDER BY seq LIMIT ?", afterSeq, limit).toArray());
  }

  getRetention(): number | undefined {
    return this.#rows.get("r", () => this.#q<{ value: number }>("SELECT value FROM ledger_settings WHERE name = 'retention_ms'").toArray()[0]?.value);
  }

  putRetention(ms: number): void {
    this.#rows.set("r", ms);
    this.#sql.exec("INSERT INTO ledger_settings (name, value) VALUES ('retention_ms', ?) ON CONFLICT(name) DO UPDATE SET value = excluded.value", ms);
  }

  getHistory(): number | undefined {
    return this.#setting("history_ms");
  }

  putHistory(ms: number): void {
    this.#putSetting("history_ms", ms);
  }

  getRetiredBefore(): number | undefined {
    return this.#setting("retired_before");
  }

  putRetiredBefore(ms: number): void {
    this.#putSetting("retired_before", ms);
  }

  #setting(name: string): number | undefined {
    return this.#rows.get(`s\u0000${name}`, () => this.#q<{ value: number }>("SELECT value FROM ledger_settings WHERE name = ?", name).toArray()[0]?.value);
  }

  #putSetting(name: string, value: number): void {
    this.#rows.set(`s\u0000${name}`, value);
    this.#sql.exec("INSERT INTO ledger_settings (name, value) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value = excluded.value", name, value);
  }

  addRefusal(scope: string, dayStart: number, reason: RefusalReason): void {
    this.#sql.exec("INSERT INTO ledger_refusals (scope, day_start, reason, count) VALUES (?, ?, ?, 1) ON CONFLICT DO UPDATE SET count = count + 1", scope, dayStart, reason);
  }

  refusalsOf(scope: string, fromDay: number, toMs: number): RefusalCount[] {
    const q = "SELECT day_start AS dayStart, reason, count FROM ledger_refusals WHERE scope = ? AND day_start >= ? AND day_start < ? ORDER BY day_start, reason";
    return this.#q<{ dayStart: number; reason: RefusalReason; count: number }>(q, scope, fromDay, toMs).toArray();
  }

  finishedBefore(before: number, limit: number): AttemptRecord[] {
    // By creation time alone (named: the planner would rather sort every settled row): an index
    // with the state in it would be rewritten by every settlement on the request path; held and
    // pending rows are skipped here instead (few, and each only until it is finished).
    const q = "SELECT body FROM ledger_attempts INDEXED BY ledger_attempts_created WHERE created_at < ? AND state IN ('settled', 'released') ORDER BY created_at LIMIT ?";
    return bodies<AttemptRecord>(this.#q<{ body: string }>(q, before, limit).toArray());
  }

  deleteAttempt(rec: AttemptRecord): void {
    this.#sql.exec("DELETE FROM ledger_attempts WHERE attempt_id = ?", rec.attemptId);
    for (const scope of new Set(rec.scopes)) this.#sql.exec("DELETE FROM ledger_attempt_scopes WHERE scope = ? AND created_at = ? AND attempt_id = ?", scope, rec.createdAt, rec.attemptId);
  }

  addRollup(r: UsageRollup): void {
    const key = JSON.stringify([r.scope, r.dayStart, r.model, r.priceVersion, r.currency]);
    const d = this.#dirtyRollups.get(key);
    this.#dirtyRollups.set(key, d === undefined ? { ...r } : { ...d, attempts: d.attempts + r.attempts, settledMicros: d.settledMicros + r.settledMicros, settledTokens: d.settledTokens + r.settledTokens });
  }

  /** Writes the rollup additions the transaction made; every query that reads rollups runs it first. */
  #writeRollups(): void {
    for (const r of this.#dirtyRollups.values()) this.#writeRollup(r);
    this.#dirtyRollups.clear();
  }

  #writeRollup(r: UsageRollup): void {
    this.#sql.exec(
      `INSERT INTO ledger_usage_rollups (scope, day_start, model, price_version, currency, attempts, settled_micros, settled_tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET
       attempts = attempts + excluded.attempts, settled_micros = settled_micros + excluded.settled_micros, settled_tokens = settled_tokens + excluded.settled_tokens`,
      ...[r.scope, r.dayStart, r.model, r.priceVersion, r.currency, r.attempts, r.settledMicros, r.settledTokens],
    );
  }

  rollupsOf(scope: string, fromMs: number, toMs: number): UsageRollup[] {
    this.#writeRollups();
    return this.#q<RollupRow>("SELECT * FROM ledger_usage_rollups WHERE scope = ? AND day_start >= ? AND day_start < ?", scope, fromMs, toMs).toArray().map(rollup);
  }

  rollupTotals(fromMs: number, toMs: number): ScopeSpend[] {
    this.#writeRollups();
    // One pass over the range's days (the day index): a month of a tenant's scopes and models, summed here rather than shipped.
    const q = `SELECT scope, model, currency, SUM(attempts) AS attempts, SUM(settled_micros) AS settled_micros, SUM(settled_tokens) AS settled_tokens
      FROM ledger_usage_rollups WHERE day_start >= ? AND day_start < ? GROUP BY scope, model, currency`;
    return this.#q<{ scope: string; model: string; currency: string; attempts: number; settled_micros: number; settled_tokens: number }>(q, fromMs, toMs)
      .toArray()
      .map((r) => ({ scope: r.scope, model: r.model, currency: r.currency, attempts: r.attempts, settledMicros: r.settled_micros, settledTokens: r.settled_tokens }));
  }

  hasRollup(scope: string, dayStart: number): boolean {
    this.#writeRollups();
    return this.#sql.exec("SELECT 1 FROM ledger_usage_rollups WHERE scope = ? AND day_start = ? LIMIT 1", scope, dayStart).toArray().length > 0;
  }

  deleteRollupsBefore(before: number, limit: number): number {
    this.#writeRollups();
    const q = `DELETE FROM ledger_usage_rollups WHERE (scope, day_start, model, price_version, currency) IN
      (SELECT scope, day_start, model, price_version, currency FROM ledger_usage_rollups WHERE day_start < ? LIMIT ?) RETURNING 1`;
    return this.#sql.exec(q, before, limit).toArray().length;
  }

  oldestRollupDay(): number | undefined {
    this.#writeRollups();
    return this.#q<{ t: number | null }>("SELECT day_start AS t FROM ledger_usage_rollups INDEXED BY ledger_usage_rollups_day ORDER BY day_start LIMIT 1").toArray()[0]?.t ?? undefined;
  }

  deleteClosedCounters(before: number, limit: number): number {
    this.#writeCounters();
    const q = "DELETE FROM ledger_counters WHERE rowid IN (SELECT rowid FROM ledger_counters WHERE window_end > 0 AND window_end < ? AND held = 0 LIMIT ?) RETURNING 1";
    const n = this.#sql.exec(q, before, limit).toArray().length;
    // Removed rows may be remembered: forget them all (this runs once per retention batch).
    if (n > 0) this.#rows.clear();
    return n;
  }

  deleteRefusalsBefore(before: number, limit: number): number {
    return this.#sql.exec("DELETE FROM ledger_refusals WHERE rowid IN (SELECT rowid FROM ledger_refusals WHERE day_start < ? LIMIT ?) RETURNING 1", before, limit).toArray().length;
  }

  oldestRemovable(): number | undefined {
    this.#writeCounters();
    const first = (q: string) => this.#q<{ t: number | null }>(q).toArray()[0]?.t ?? undefined;
    const times = [
      first("SELECT created_at AS t FROM ledger_attempts INDEXED BY ledger_attempts_created WHERE state IN ('settled', 'released') ORDER BY created_at LIMIT 1"),
      first("SELECT window_end AS t FROM ledger_counters WHERE window_end > 0 AND held = 0 ORDER BY window_end LIMIT 1"),
      first(`SELECT day_start + ${LEDGER_DAY_MS} AS t FROM ledger_refusals ORDER BY day_start LIMIT 1`),
    ].filter((t): t is number => t !== undefined);
    return times.length === 0 ? undefined : Math.min(...times);
  }
}
