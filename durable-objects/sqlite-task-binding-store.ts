import type { TaskBinding, TaskBindingStore } from "../src/tasks/task-binding.ts";

interface Row extends Record<string, SqlStorageValue> {
  task_id: string;
  tenant: string;
  project: string;
  bound_at: number;
}

/**
 * Task bindings in their Durable Object's SQLite storage: one row per tenant and task id. (An
 * older table keyed by task id alone, from when one object held an id for every tenant, is left
 * unread: its bindings are not carried over.)
 */
export class SqliteTaskBindingStore implements TaskBindingStore {
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

  get(tenant: string, taskId: string): TaskBinding | undefined {
    this.#schema();
    const r = this.#sql.exec<Row>("SELECT * FROM tenant_task_binding WHERE tenant = ? AND task_id = ?", tenant, taskId).toArray()[0];
    return r === undefined ? undefined : { taskId: r.task_id, tenant: r.tenant, project: r.project, boundAt: r.bound_at };
  }

  put(b: TaskBinding): void {
    this.#schema();
    // A binding never changes: a second put of the same tenant and id is ignored, never an overwrite.
    this.#sql.exec("INSERT INTO tenant_task_binding (tenant, task_id, project, bound_at) VALUES (?, ?, ?, ?) ON CONFLICT(tenant, task_id) DO NOTHING", b.tenant, b.taskId, b.project, b.boundAt);
  }

  #schema(): void {
    if (this.#ready) return;
    this.#sql.exec(`CREATE TABLE IF NOT EXISTS tenant_task_binding (
      tenant TEXT NOT NULL,
      task_id TEXT NOT NULL,
      project TEXT NOT NULL,
      bound_at INTEGER NOT NULL,
      PRIMARY KEY (tenant, task_id)
    )`);
    this.#ready = true;
  }
}
