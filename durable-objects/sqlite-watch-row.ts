/**
 * The one row a watching object keeps in its SQLite storage: what it watches (`target`) and what
 * it last found (`state`), each as JSON text. The health monitor and the agent card registry store
 * exactly this; each keeps its own table and column names (stored data stays readable) and its
 * own parsing.
 */
export class SqliteWatchRow {
  readonly #storage: DurableObjectStorage;
  readonly #sql: SqlStorage;
  readonly #table: string;
  readonly #stateColumn: string;

  /** `table` and `stateColumn` are this code's constants, never input. */
  constructor(storage: DurableObjectStorage, table: string, stateColumn: string) {
    this.#storage = storage;
    this.#sql = storage.sql;
    this.#table = table;
    this.#stateColumn = stateColumn;
    this.#ensureTable();
  }

  /** Runs `fn` atomically (`transactionSync`): it must not await, so no other call interleaves. */
  transaction<T>(fn: () => T): T {
    return this.#storage.transactionSync(fn);
  }

  /** The stored target's JSON; undefined when none. */
  target(): string | undefined {
    return this.#row()?.target ?? undefined;
  }

  /** The stored state's JSON; undefined when none. */
  state(): string | undefined {
    return this.#row()?.state ?? undefined;
  }

  saveTarget(json: string): void {
    this.#sql.exec(`INSERT INTO ${this.#table} (id, target, ${this.#stateColumn}) VALUES (1, ?, NULL) ON CONFLICT(id) DO UPDATE SET target = excluded.target`, json);
  }

  saveState(json: string): void {
    this.#sql.exec(`INSERT INTO ${this.#table} (id, target, ${this.#stateColumn}) VALUES (1, NULL, ?) ON CONFLICT(id) DO UPDATE SET ${this.#stateColumn} = excluded.${this.#stateColumn}`, json);
  }

  /** Deletes everything the object stored (alarm included); the row stays usable afterwards. */
  async drop(): Promise<void> {
    await this.#storage.deleteAlarm();
    await this.#storage.deleteAll();
    this.#ensureTable();
  }

  #row(): { target: string | null; state: string | null } | undefined {
    return this.#sql.exec<{ target: string | null; state: string | null }>(`SELECT target, ${this.#stateColumn} AS state FROM ${this.#table} WHERE id = 1`).toArray()[0];
  }

  #ensureTable(): void {
    this.#sql.exec(`CREATE TABLE IF NOT EXISTS ${this.#table} (id INTEGER PRIMARY KEY CHECK (id = 1), target TEXT, ${this.#stateColumn} TEXT)`);
  }
}
