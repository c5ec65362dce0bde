import { LedgerRowCache } from "../src/ledger/ledger-row-cache.ts";
import type { AttemptRecord, AttemptState, AuditRecord, BucketState, LedgerCounter, LedgerMetric, LedgerStore, ScopeLimitsView, TopUpRecord } from "../src/ledger/ledger.ts";

type CounterRow = { scope: string; metric: string; window_start: number; spent: number; held: number; pending: number; overrun: number } & Record<string, SqlStorageValue>;

type StoredLimits = Omit<ScopeLimitsView, "effective">;

const counter = (r: CounterRow): LedgerCounter => ({ scope: r.scope, metric: r.metric as LedgerMetric, windowStart: r.window_start, spent: r.spent, held: r.held, pending: r.pending, overrun: r.overrun });
const bodies = <T>(rows: { body: string }[]): T[] => rows.map((r) => JSON.parse(r.body) as T);

/**
 * A tenant's ledger in its Durable Object's SQLite storage: limits per scope, one counter row per
 * (scope, metric, period), a request bucket per scope, credits and top-ups, one row per attempt
 * (the record as JSON, state and lease as columns), and the audit log.
 *
 * Usage reports read `ledger_attempt_scopes` — one row per (scope, created_at, attempt) of each
 * admitted attempt — so a report is an index range scan, capped by the caller.
 */
export class SqliteLedgerStore implements LedgerStore {
  readonly #storage: DurableObjectStorage;
  readonly #sql: SqlStorage;
  #ready = false;
  /** Limits, counters, buckets and credits (attempts are read once or twice: not kept). */
  readonly #rows = new LedgerRowCache();

  constructor(storage: DurableObjectStorage) {
    this.#storage = storage;
    this.#sql = storage.sql;
  }

  /** Runs `fn` atomically (`transactionSync`): it must not await, so no other call interleaves. */
  transaction<T>(fn: () => T): T {
    // Outside the transaction: a rolled-back one would take the new tables with it.
    this.#schema();
    try {
      return this.#storage.transactionSync(fn);
    } catch (err) {
      // The transaction rolled back: rows remembered during it may never have been committed.
      this.#rows.clear();
      throw err;
    }
  }

  getLimits(scope: string): StoredLimits | undefined {
    return this.#rows.get(`l\u0000${scope}`, () => {
      const r = this.#sql.exec<{ configured: string | null; override: string | null }>("SELECT configured, override FROM ledger_scope_limits WHERE scope = ?", scope).toArray()[0];
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
      const r = this.#sql.exec<CounterRow>("SELECT * FROM ledger_counters WHERE scope = ? AND metric = ? AND window_start = ?", scope, metric, windowStart).toArray()[0];
      return r === undefined ? undefined : counter(r);
    });
  }

  putCounter(c: LedgerCounter): void {
    this.#rows.set(`c\u0000${c.scope}\u0000${c.metric}\u0000${c.windowStart}`, c);
    this.#sql.exec(
      `INSERT INTO ledger_counters (scope, metric, window_start, spent, held, pending, overrun) VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT(scope, metric, window_start) DO UPDATE SET spent = excluded.spent, held = excluded.held, pending = excluded.pending, overrun = excluded.overrun`,
      ...[c.scope, c.metric, c.windowStart, c.spent, c.held, c.pending, c.overrun],
    );
  }

  countersOf(scope: string): LedgerCounter[] {
    return this.#sql.exec<CounterRow>("SELECT * FROM ledger_counters WHERE scope = ? ORDER BY metric, window_start", scope).toArray().map(counter);
  }

  getBucket(scope: string): BucketState | undefined {
    return this.#rows.get(`b\u0000${scope}`, () => {
      const r = this.#sql.exec<{ units: number; at: number }>("SELECT units, at FROM ledger_buckets WHERE scope = ?", scope).toArray()[0];
      return r === undefined ? undefined : { scope, units: r.units, at: r.at };
    });
  }

  putBucket(b: BucketState): void {
    this.#rows.set(`b\u0000${b.scope}`, b);
    this.#sql.exec("INSERT INTO ledger_buckets (scope, units, at) VALUES (?, ?, ?) ON CONFLICT(scope) DO UPDATE SET units = excluded.units, at = excluded.at", b.scope, b.units, b.at);
  }

  getCredited(scope: string, currency: string): number {
    return (
      this.#rows.get(`$\u0000${scope}\u0000${currency}`, () => this.#sql.exec<{ credited: number }>("SELECT credited FROM ledger_credits WHERE scope = ? AND currency = ?", scope, currency).toArray()[0]?.credited) ?? 0
    );
  }

  putCredited(scope: string, currency: string, credited: number): void {
    this.#rows.set(`$\u0000${scope}\u0000${currency}`, credited);
    this.#sql.exec("INSERT INTO ledger_credits (scope, currency, credited) VALUES (?, ?, ?) ON CONFLICT(scope, currency) DO UPDATE SET credited = excluded.credited", scope, currency, credited);
  }

  getTopUp(opId: string): TopUpRecord | undefined {
    return bodies<TopUpRecord>(this.#sql.exec<{ body: string }>("SELECT body FROM ledger_top_ups WHERE op_id = ?", opId).toArray())[0];
  }

  putTopUp(rec: TopUpRecord): void {
    this.#sql.exec("INSERT INTO ledger_top_ups (op_id, body) VALUES (?, ?)", rec.opId, JSON.stringify(rec));
  }

  getAttempt(attemptId: string): AttemptRecord | undefined {
    return bodies<AttemptRecord>(this.#sql.exec<{ body: string }>("SELECT body FROM ledger_attempts WHERE attempt_id = ?", attemptId).toArray())[0];
  }

  putAttempt(rec: AttemptRecord): void {
    this.#sql.exec(
      `INSERT INTO ledger_attempts (attempt_id, state, lease_expires_at, body) VALUES (?, ?, ?, ?)
       ON CONFLICT(attempt_id) DO UPDATE SET state = excluded.state, lease_expires_at = excluded.lease_expires_at, body = excluded.body`,
      ...[rec.attemptId, rec.state, rec.leaseExpiresAt, JSON.stringify(rec)],
    );
    // An admitted attempt is written `held` first: index its scopes then (once; they never change).
    if (rec.state === "held") {
      for (const scope of new Set(rec.charges.map((c) => c.scope))) {
        this.#sql.exec("INSERT OR IGNORE INTO ledger_attempt_scopes (scope, created_at, attempt_id) VALUES (?, ?, ?)", scope, rec.createdAt, rec.attemptId);
      }
    }
  }

  expiredLeases(now: number, limit: number): AttemptRecord[] {
    return bodies(this.#sql.exec<{ body: string }>("SELECT body FROM ledger_attempts WHERE state = 'held' AND lease_expires_at <= ? ORDER BY lease_expires_at LIMIT ?", now, limit).toArray());
  }

  earliestLease(): number | undefined {
    const r = this.#sql.exec<{ e: number | null }>("SELECT MIN(lease_expires_at) AS e FROM ledger_attempts WHERE state = 'held'").toArray()[0];
    return r?.e ?? undefined;
  }

  attemptsInState(state: AttemptState, limit: number, afterAttemptId?: string): AttemptRecord[] {
    const q = "SELECT body FROM ledger_attempts WHERE state = ? AND attempt_id > ? ORDER BY attempt_id LIMIT ?";
    return bodies(this.#sql.exec<{ body: string }>(q, state, afterAttemptId ?? "", limit).toArray());
  }

  attemptsCharging(scope: string, fromMs: number, toMs: number, limit: number): AttemptRecord[] {
    const q = `SELECT a.body AS body FROM ledger_attempt_scopes s JOIN ledger_attempts a ON a.attempt_id = s.attempt_id
      WHERE s.scope = ? AND s.created_at >= ? AND s.created_at < ? ORDER BY s.created_at, s.attempt_id LIMIT ?`;
    return bodies(this.#sql.exec<{ body: string }>(q, scope, fromMs, toMs, limit).toArray());
  }

  nextAuditSeq(): number {
    return (this.#sql.exec<{ s: number | null }>("SELECT MAX(seq) AS s FROM ledger_audit").toArray()[0]?.s ?? 0) + 1;
  }

  putAudit(rec: AuditRecord): void {
    this.#sql.exec("INSERT INTO ledger_audit (seq, body) VALUES (?, ?)", rec.seq, JSON.stringify(rec));
  }

  auditAfter(afterSeq: number, limit: number): AuditRecord[] {
    return bodies(this.#sql.exec<{ body: string }>("SELECT body FROM ledger_audit WHERE seq > ? ORDER BY seq LIMIT ?", afterSeq, limit).toArray());
  }

  /** Creates the tables on first use, and moves the books of an older schema over. */
  #schema(): void {
    if (this.#ready) return;
    const exists = (name: string) => this.#sql.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", name).toArray().length > 0;
    const hadScopeIndex = exists("ledger_attempt_scopes");
    this.#sql.exec(`
      CREATE TABLE IF NOT EXISTS ledger_scope_limits (scope TEXT PRIMARY KEY, configured TEXT, override TEXT);
      CREATE TABLE IF NOT EXISTS ledger_counters (
        scope TEXT NOT NULL, metric TEXT NOT NULL, window_start INTEGER NOT NULL,
        spent INTEGER NOT NULL, held INTEGER NOT NULL, pending INTEGER NOT NULL, overrun INTEGER NOT NULL,
        PRIMARY KEY (scope, metric, window_start)
      );
      CREATE TABLE IF NOT EXISTS ledger_buckets (scope TEXT PRIMARY KEY, units INTEGER NOT NULL, at INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS ledger_credits (scope TEXT NOT NULL, currency TEXT NOT NULL, credited INTEGER NOT NULL, PRIMARY KEY (scope, currency));
      CREATE TABLE IF NOT EXISTS ledger_top_ups (op_id TEXT PRIMARY KEY, body TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS ledger_attempts (attempt_id TEXT PRIMARY KEY, state TEXT NOT NULL, lease_expires_at INTEGER NOT NULL, body TEXT NOT NULL);
      CREATE INDEX IF NOT EXISTS ledger_attempts_lease ON ledger_attempts (state, lease_expires_at);
      CREATE INDEX IF NOT EXISTS ledger_attempts_state_id ON ledger_attempts (state, attempt_id);
      CREATE TABLE IF NOT EXISTS ledger_attempt_scopes (scope TEXT NOT NULL, created_at INTEGER NOT NULL, attempt_id TEXT NOT NULL, PRIMARY KEY (scope, created_at, attempt_id)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS ledger_audit (seq INTEGER PRIMARY KEY, body TEXT NOT NULL);
    `);
    if (!hadScopeIndex) {
      // Attempts booked before the scope index existed: index them once, so reports include them.
      this.#sql.exec(`INSERT OR IGNORE INTO ledger_attempt_scopes (scope, created_at, attempt_id)
        SELECT j.value, json_extract(a.body, '$.createdAt'), a.attempt_id FROM ledger_attempts a, json_each(a.body, '$.scopes') j WHERE a.state != 'refused'`);
    }
    if (exists("ledger_limits")) {
      // The older schema kept only admin-set limits: they become overrides.
      this.#sql.exec("INSERT OR IGNORE INTO ledger_scope_limits (scope, configured, override) SELECT scope, NULL, body FROM ledger_limits");
      this.#sql.exec("DROP TABLE ledger_limits");
    }
    this.#ready = true;
  }
}
