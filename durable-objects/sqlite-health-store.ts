import { parseHealthSnapshot, resolveProbeTarget, type HealthSnapshot, type ResolvedProbeTarget } from "../src/traffic/health.ts";
import type { HealthStore } from "../src/traffic/health-monitor-service.ts";

/**
 * A health monitor's state in its Durable Object's SQLite storage: one row holding the watched
 * target (secrets by name only, never a value) and the health snapshot, both as JSON.
 */
export class SqliteHealthStore implements HealthStore {
  readonly #storage: DurableObjectStorage;
  readonly #sql: SqlStorage;

  constructor(storage: DurableObjectStorage) {
    this.#storage = storage;
    this.#sql = storage.sql;
    this.#ensureTable();
  }

  /** Runs `fn` atomically (`transactionSync`): it must not await, so no other call interleaves. */
  transaction<T>(fn: () => T): T {
    return this.#storage.transactionSync(fn);
  }

  /** The watched target; undefined when none (or an unreadable one) is stored. */
  loadTarget(): ResolvedProbeTarget | undefined {
    const raw = this.#row()?.target;
    if (raw === undefined || raw === null) return undefined;
    try {
      return resolveProbeTarget(JSON.parse(raw));
    } catch {
      return undefined;
    }
  }

  /** The stored health; a fresh `unknown` one when none (or an unreadable one) is stored. */
  loadHealth(): HealthSnapshot {
    return parseHealthSnapshot(this.#row()?.health ?? undefined);
  }

  saveTarget(target: ResolvedProbeTarget): void {
    this.#sql.exec(
      "INSERT INTO health (id, target, health) VALUES (1, ?, NULL) ON CONFLICT(id) DO UPDATE SET target = excluded.target",
      JSON.stringify(target),
    );
  }

  saveHealth(health: HealthSnapshot): void {
    this.#sql.exec(
      "INSERT INTO health (id, target, health) VALUES (1, NULL, ?) ON CONFLICT(id) DO UPDATE SET health = excluded.health",
      JSON.stringify(health),
    );
  }

  /** Deletes everything this object stored (alarm included); the store stays usable afterwards. */
  async drop(): Promise<void> {
    await this.#storage.deleteAlarm();
    await this.#storage.deleteAll();
    this.#ensureTable();
  }

  #row(): { target: string | null; health: string | null } | undefined {
    return this.#sql.exec<{ target: string | null; health: string | null }>("SELECT target, health FROM health WHERE id = 1").toArray()[0];
  }

  #ensureTable(): void {
    this.#sql.exec("CREATE TABLE IF NOT EXISTS health (id INTEGER PRIMARY KEY CHECK (id = 1), target TEXT, health TEXT)");
  }
}
