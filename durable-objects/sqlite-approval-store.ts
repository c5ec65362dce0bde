import { callKey, type Approval } from "../src/approvals/approval-desk.ts";
import type { ApprovalDeskObjectStore } from "../src/approvals/approval-desk-service.ts";

/** A desk's approvals in its Durable Object's SQLite storage, one JSON row each. */
export class SqliteApprovalStore implements ApprovalDeskObjectStore {
  readonly #storage: DurableObjectStorage;
  readonly #sql: SqlStorage;

  constructor(storage: DurableObjectStorage) {
    this.#storage = storage;
    this.#sql = storage.sql;
    const sql = storage.sql;
    sql.exec("CREATE TABLE IF NOT EXISTS approvals (id TEXT PRIMARY KEY, body TEXT NOT NULL, call_key TEXT)");
    // A desk from before call keys: add the column and fill it from each row's facts.
    if (!sql.exec<{ name: string }>("PRAGMA table_info(approvals)").toArray().some((c) => c.name === "call_key")) {
      sql.exec("ALTER TABLE approvals ADD COLUMN call_key TEXT");
      for (const a of this.all()) sql.exec("UPDATE approvals SET call_key = ? WHERE id = ?", callKey(a), a.id);
    }
    sql.exec("CREATE INDEX IF NOT EXISTS approvals_call ON approvals (call_key)");
  }

  /** Runs `fn` atomically (`transactionSync`): it must not await, so no other call interleaves. */
  transaction<T>(fn: () => T): T {
    return this.#storage.transactionSync(fn);
  }

  get(id: string): Approval | undefined {
    const row = this.#sql.exec<{ body: string }>("SELECT body FROM approvals WHERE id = ?", id).toArray()[0];
    return row ? (JSON.parse(row.body) as Approval) : undefined;
  }

  put(a: Approval): void {
    this.#sql.exec("INSERT INTO approvals (id, body, call_key) VALUES (?, ?, ?) ON CONFLICT(id) DO UPDATE SET body = excluded.body", a.id, JSON.stringify(a), callKey(a));
  }

  delete(id: string): void {
    this.#sql.exec("DELETE FROM approvals WHERE id = ?", id);
  }

  all(): Approval[] {
    return this.#sql.exec<{ body: string }>("SELECT body FROM approvals").toArray().map((r) => JSON.parse(r.body) as Approval);
  }

  ofCall(key: string): Approval[] {
    return this.#sql.exec<{ body: string }>("SELECT body FROM approvals WHERE call_key = ?", key).toArray().map((r) => JSON.parse(r.body) as Approval);
  }
}
