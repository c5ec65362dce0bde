import { parseBreakerData, type BreakerData } from "../src/traffic/breaker.ts";
import type { BreakerStore } from "../src/traffic/circuit-breaker-service.ts";

/** A circuit breaker's state in its Durable Object's SQLite storage: one JSON row. */
export class SqliteBreakerStore implements BreakerStore {
  readonly #storage: DurableObjectStorage;
  readonly #sql: SqlStorage;

  constructor(storage: DurableObjectStorage) {
    this.#storage = storage;
    this.#sql = storage.sql;
    this.#sql.exec("CREATE TABLE IF NOT EXISTS breaker (id INTEGER PRIMARY KEY CHECK (id = 1), data TEXT NOT NULL)");
  }

  /** Runs `fn` atomically (`transactionSync`): it must not await, so no other call interleaves. */
  transaction<T>(fn: () => T): T {
    return this.#storage.transactionSync(fn);
  }

  /** The stored state; a fresh closed breaker when none (or an unreadable one) is stored. */
  load(): BreakerData {
    const row = this.#sql.exec<{ data: string }>("SELECT data FROM breaker WHERE id = 1").toArray()[0];
    return parseBreakerData(row?.data);
  }

  save(data: BreakerData): void {
    this.#sql.exec(
      "INSERT INTO breaker (id, data) VALUES (1, ?) ON CONFLICT(id) DO UPDATE SET data = excluded.data",
      JSON.stringify(data),
    );
  }
}
