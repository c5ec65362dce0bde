import { parseHealthSnapshot, resolveProbeTarget, type HealthSnapshot, type ResolvedProbeTarget } from "../src/traffic/health.ts";
import type { HealthStore } from "../src/traffic/health-monitor-service.ts";
import { SqliteWatchRow } from "./sqlite-watch-row.ts";

/**
 * A health monitor's state in its Durable Object's SQLite storage: one row holding the watched
 * target (secrets by name only, never a value) and the health snapshot, both as JSON.
 */
export class SqliteHealthStore implements HealthStore {
  readonly #row: SqliteWatchRow;

  constructor(storage: DurableObjectStorage) {
    this.#row = new SqliteWatchRow(storage, "health", "health");
  }

  /** Runs `fn` atomically (`transactionSync`): it must not await, so no other call interleaves. */
  transaction<T>(fn: () => T): T {
    return this.#row.transaction(fn);
  }

  /** The watched target; undefined when none (or an unreadable one) is stored. */
  loadTarget(): ResolvedProbeTarget | undefined {
    const raw = this.#row.target();
    if (raw === undefined) return undefined;
    try {
      return resolveProbeTarget(JSON.parse(raw));
    } catch {
      return undefined;
    }
  }

  /** The stored health; a fresh `unknown` one when none (or an unreadable one) is stored. */
  loadHealth(): HealthSnapshot {
    return parseHealthSnapshot(this.#row.state());
  }

  saveTarget(target: ResolvedProbeTarget): void {
    this.#row.saveTarget(JSON.stringify(target));
  }

  saveHealth(health: HealthSnapshot): void {
    this.#row.saveState(JSON.stringify(health));
  }

  /** Deletes everything this object stored (alarm included); the store stays usable afterwards. */
  async drop(): Promise<void> {
    await this.#row.drop();
  }
}
