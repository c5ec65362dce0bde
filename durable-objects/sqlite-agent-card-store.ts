import { cardTargetSchema, type CardRecord, type CardStore, type CardTarget } from "../src/a2a/card-registry-service.ts";

/**
 * An agent card registry's state in its Durable Object's SQLite storage: one row holding the
 * watched target (secrets by name only) and the record (last good card, last failure), as JSON.
 */
export class SqliteAgentCardStore implements CardStore {
  readonly #storage: DurableObjectStorage;
  readonly #sql: SqlStorage;

  constructor(storage: DurableObjectStorage) {
    this.#storage = storage;
    this.#sql = storage.sql;
    this.#ensureTable();
  }

  transaction<T>(fn: () => T): T {
    return this.#storage.transactionSync(fn);
  }

  loadTarget(): CardTarget | undefined {
    const raw = this.#row()?.target;
    if (raw === undefined || raw === null) return undefined;
    const parsed = cardTargetSchema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : undefined;
  }

  saveTarget(target: CardTarget): void {
    this.#sql.exec("INSERT INTO card (id, target, record) VALUES (1, ?, NULL) ON CONFLICT(id) DO UPDATE SET target = excluded.target", JSON.stringify(target));
  }

  loadRecord(): CardRecord {
    const raw = this.#row()?.record;
    if (raw === undefined || raw === null) return { card: undefined, lastFailure: undefined };
    const r = JSON.parse(raw) as Partial<CardRecord>;
    return { card: r.card ?? undefined, lastFailure: r.lastFailure ?? undefined };
  }

  saveRecord(record: CardRecord): void {
    this.#sql.exec("INSERT INTO card (id, target, record) VALUES (1, NULL, ?) ON CONFLICT(id) DO UPDATE SET record = excluded.record", JSON.stringify(record));
  }

  async drop(): Promise<void> {
    await this.#storage.deleteAlarm();
    await this.#storage.deleteAll();
    this.#ensureTable();
  }

  #row(): { target: string | null; record: string | null } | undefined {
    return this.#sql.exec<{ target: string | null; record: string | null }>("SELECT target, record FROM card WHERE id = 1").toArray()[0];
  }

  #ensureTable(): void {
    this.#sql.exec("CREATE TABLE IF NOT EXISTS card (id INTEGER PRIMARY KEY CHECK (id = 1), target TEXT, record TEXT)");
  }
}
