import { cardTargetSchema, type CardRecord, type CardStore, type CardTarget } from "../src/a2a/card-registry-service.ts";
import { SqliteWatchRow } from "./sqlite-watch-row.ts";

/**
 * An agent card registry's state in its Durable Object's SQLite storage: one row holding the
 * watched target (secrets by name only) and the record (last good card, last failure), as JSON.
 */
export class SqliteAgentCardStore implements CardStore {
  readonly #row: SqliteWatchRow;

  constructor(storage: DurableObjectStorage) {
    this.#row = new SqliteWatchRow(storage, "card", "record");
  }

  transaction<T>(fn: () => T): T {
    return this.#row.transaction(fn);
  }

  loadTarget(): CardTarget | undefined {
    const raw = this.#row.target();
    if (raw === undefined) return undefined;
    const parsed = cardTargetSchema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : undefined;
  }

  saveTarget(target: CardTarget): void {
    this.#row.saveTarget(JSON.stringify(target));
  }

  loadRecord(): CardRecord {
    const raw = this.#row.state();
    if (raw === undefined) return { card: undefined, lastFailure: undefined };
    const r = JSON.parse(raw) as Partial<CardRecord>;
    return { card: r.card ?? undefined, lastFailure: r.lastFailure ?? undefined };
  }

  saveRecord(record: CardRecord): void {
    this.#row.saveState(JSON.stringify(record));
  }

  async drop(): Promise<void> {
    await this.#row.drop();
  }
}
