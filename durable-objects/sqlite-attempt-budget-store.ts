import type { AttemptBudgetEntry } from "../src/call-budget/attempt-budget.ts";
import type { AttemptBudgetObjectStore } from "../src/call-budget/attempt-budget-service.ts";

interface Row extends Record<string, SqlStorageValue> {
  call_id: string;
  initial_budget: number;
  remaining: number;
  deadline_at: number;
  expires_at: number;
  created_at: number;
}

/** Attempt budgets in their Durable Object's SQLite storage: one row per call id. */
export class SqliteAttemptBudgetStore implements AttemptBudgetObjectStore {
  readonly #storage: DurableObjectStorage;
  readonly #sql: SqlStorage;
  #ready = false;

  constructor(storage: DurableObjectStorage) {
    this.#storage = storage;
    this.#sql = storage.sql;
  }

  /** Runs `fn` atomically (`transactionSync`): it must not await, so no other call interleaves. */
  transaction<T>(fn: () => T): T {
    // Outside the transaction: a rolled-back one would take the new table with it.
    this.#schema();
    return this.#storage.transactionSync(fn);
  }

  get(callId: string): AttemptBudgetEntry | undefined {
    this.#schema();
    const r = this.#sql.exec<Row>("SELECT * FROM attempt_budget WHERE call_id = ?", callId).toArray()[0];
    if (r === undefined) return undefined;
    return { callId: r.call_id, initialBudget: r.initial_budget, remaining: r.remaining, deadlineAt: r.deadline_at, expiresAt: r.expires_at, createdAt: r.created_at };
  }

  put(e: AttemptBudgetEntry): void {
    this.#schema();
    this.#sql.exec(
      `INSERT INTO attempt_budget (call_id, initial_budget, remaining, deadline_at, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT(call_id) DO UPDATE SET remaining = excluded.remaining, deadline_at = excluded.deadline_at, expires_at = excluded.expires_at`,
      e.callId,
      e.initialBudget,
      e.remaining,
      e.deadlineAt,
      e.expiresAt,
      e.createdAt,
    );
  }

  delete(callId: string): void {
    this.#schema();
    this.#sql.exec("DELETE FROM attempt_budget WHERE call_id = ?", callId);
  }

  deleteExpired(now: number): number {
    this.#schema();
    return this.#sql.exec("DELETE FROM attempt_budget WHERE expires_at <= ? RETURNING call_id", now).toArray().length;
  }

  earliestExpiry(): number | undefined {
    this.#schema();
    const r = this.#sql.exec<{ e: number | null }>("SELECT MIN(expires_at) AS e FROM attempt_budget").toArray()[0];
    return r?.e ?? undefined;
  }

  /** Deletes all of the object's storage (tables included), so an idle object keeps nothing. */
  async drop(): Promise<void> {
    await this.#storage.deleteAll();
    this.#ready = false;
  }

  /** Creates the table on first use, and again after {@link drop}. */
  #schema(): void {
    if (this.#ready) return;
    this.#sql.exec(`CREATE TABLE IF NOT EXISTS attempt_budget (
      call_id TEXT PRIMARY KEY,
      initial_budget INTEGER NOT NULL,
      remaining INTEGER NOT NULL,
      deadline_at INTEGER NOT NULL,
      expires_at INTEGER NOT NULL,
      created_at INTEGER NOT NULL
    )`);
    this.#sql.exec("CREATE INDEX IF NOT EXISTS attempt_budget_expires ON attempt_budget (expires_at)");
    this.#ready = true;
  }
}
