import type { AttemptRecord, LedgerCounter, LedgerMetric, LedgerStore, ScopeLimits } from "../src/ledger/ledger.ts";

interface CounterRow extends Record<string, SqlStorageValue> {
  scope: string;
  metric: string;
  window_start: number;
  spent: number;
  held: number;
  pending: number;
  overrun: number;
}

const counter = (r: CounterRow): LedgerCounter => ({ scope: r.scope, metric: r.metric as LedgerMetric, windowStart: r.window_start, spent: r.spent, held: r.held, pending: r.pending, overrun: r.overrun });

/**
 * A tenant's ledger in its Durable Object's SQLite storage: limits per scope, one counter row per
 * (scope, metric, period), one row per attempt (the record as JSON, state and lease as columns).
 */
export class SqliteLedgerStore implements LedgerStore {
  readonly #storage: DurableObjectStorage;
  readonly #sql: SqlStorage;
  #ready = false;

  constructor(storage: DurableObjectStorage) {
    this.#storage = storage;
    this.#sql = storage.sql;
  }

  /** Runs `fn` atomically (`transactionSync`): it must not await, so no other call interleaves. */
  transaction<T>(fn: () => T): T {
    // Outside the transaction: a rolled-back one would take the new tables with it.
    this.#schema();
    return this.#storage.transactionSync(fn);
  }

  getLimits(scope: string): ScopeLimits | undefined {
    const r = this.#sql.exec<{ body: string }>("SELECT body FROM ledger_limits WHERE scope = ?", scope).toArray()[0];
    return r === undefined ? undefined : (JSON.parse(r.body) as ScopeLimits);
  }

  putLimits(scope: string, limits: ScopeLimits): void {
    this.#sql.exec("INSERT INTO ledger_limits (scope, body) VALUES (?, ?) ON CONFLICT(scope) DO UPDATE SET body = excluded.body", scope, JSON.stringify(limits));
  }

  getCounter(scope: string, metric: LedgerMetric, windowStart: number): LedgerCounter | undefined {
    const r = this.#sql.exec<CounterRow>("SELECT * FROM ledger_counters WHERE scope = ? AND metric = ? AND window_start = ?", scope, metric, windowStart).toArray()[0];
    return r === undefined ? undefined : counter(r);
  }

  putCounter(c: LedgerCounter): void {
    this.#sql.exec(
      `INSERT INTO ledger_counters (scope, metric, window_start, spent, held, pending, overrun) VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT(scope, metric, window_start) DO UPDATE SET spent = excluded.spent, held = excluded.held, pending = excluded.pending, overrun = excluded.overrun`,
      c.scope,
      c.metric,
      c.windowStart,
      c.spent,
      c.held,
      c.pending,
      c.overrun,
    );
  }

  countersOf(scope: string): LedgerCounter[] {
    return this.#sql.exec<CounterRow>("SELECT * FROM ledger_counters WHERE scope = ? ORDER BY metric, window_start", scope).toArray().map(counter);
  }

  getAttempt(attemptId: string): AttemptRecord | undefined {
    const r = this.#sql.exec<{ body: string }>("SELECT body FROM ledger_attempts WHERE attempt_id = ?", attemptId).toArray()[0];
    return r === undefined ? undefined : (JSON.parse(r.body) as AttemptRecord);
  }

  putAttempt(rec: AttemptRecord): void {
    this.#sql.exec(
      `INSERT INTO ledger_attempts (attempt_id, state, lease_expires_at, body) VALUES (?, ?, ?, ?)
       ON CONFLICT(attempt_id) DO UPDATE SET state = excluded.state, lease_expires_at = excluded.lease_expires_at, body = excluded.body`,
      rec.attemptId,
      rec.state,
      rec.leaseExpiresAt,
      JSON.stringify(rec),
    );
  }

  expiredLeases(now: number, limit: number): AttemptRecord[] {
    return this.#sql
      .exec<{ body: string }>("SELECT body FROM ledger_attempts WHERE state = 'held' AND lease_expires_at <= ? ORDER BY lease_expires_at LIMIT ?", now, limit)
      .toArray()
      .map((r) => JSON.parse(r.body) as AttemptRecord);
  }

  earliestLease(): number | undefined {
    const r = this.#sql.exec<{ e: number | null }>("SELECT MIN(lease_expires_at) AS e FROM ledger_attempts WHERE state = 'held'").toArray()[0];
    return r?.e ?? undefined;
  }

  /** Creates the tables on first use. */
  #schema(): void {
    if (this.#ready) return;
    this.#sql.exec("CREATE TABLE IF NOT EXISTS ledger_limits (scope TEXT PRIMARY KEY, body TEXT NOT NULL)");
    this.#sql.exec(`CREATE TABLE IF NOT EXISTS ledger_counters (
      scope TEXT NOT NULL,
      metric TEXT NOT NULL,
      window_start INTEGER NOT NULL,
      spent INTEGER NOT NULL,
      held INTEGER NOT NULL,
      pending INTEGER NOT NULL,
      overrun INTEGER NOT NULL,
      PRIMARY KEY (scope, metric, window_start)
    )`);
    this.#sql.exec("CREATE TABLE IF NOT EXISTS ledger_attempts (attempt_id TEXT PRIMARY KEY, state TEXT NOT NULL, lease_expires_at INTEGER NOT NULL, body TEXT NOT NULL)");
    this.#sql.exec("CREATE INDEX IF NOT EXISTS ledger_attempts_lease ON ledger_attempts (state, lease_expires_at)");
    this.#ready = true;
  }
}
