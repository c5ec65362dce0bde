import type { RevisionLog } from "../src/snapshot/revision-log.ts";

/** How many history events a controller keeps; older ones are dropped as new ones come. */
const MAX_EVENTS = 500;

/**
 * {@link RevisionLog} on a Durable Object's SQLite storage, what the snapshot and publication
 * controllers' stores share: a `revisions` table (each store declares its own columns), a `meta`
 * table (the active revision, the revision counter and what else a store keeps by name) and a
 * bounded `events` history. `transaction` is `transactionSync`, so a controller's
 * read-check-write runs as one.
 */
export abstract class SqliteRevisionStore<E> implements RevisionLog<E> {
  protected readonly sql: SqlStorage;
  readonly #storage: DurableObjectStorage;

  /** @param revisionsTable the `CREATE TABLE IF NOT EXISTS revisions (…)` statement of the store's own columns. */
  constructor(storage: DurableObjectStorage, revisionsTable: string) {
    this.#storage = storage;
    this.sql = storage.sql;
    this.sql.exec(`
      ${revisionsTable};
      CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL);
    `);
  }

  transaction<T>(fn: () => T): T {
    return this.#storage.transactionSync(fn);
  }

  protected meta(key: string): string | undefined {
    return this.sql.exec<{ value: string }>("SELECT value FROM meta WHERE key = ?", key).toArray()[0]?.value;
  }

  protected setMeta(key: string, value: string): void {
    this.sql.exec("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", key, value);
  }

  /** The next revision number, taken: a counter, not MAX(revision), so numbers of pruned revisions are never reused. */
  protected takeRevisionNumber(): number {
    const revision = Number(this.meta("next_revision") ?? "1");
    this.setMeta("next_revision", String(revision + 1));
    return revision;
  }

  activeRevision(): number | undefined {
    const v = this.meta("active");
    return v === undefined ? undefined : Number(v);
  }

  setActive(revision: number): void {
    this.setMeta("active", String(revision));
  }

  appendEvent(e: E): void {
    this.sql.exec("INSERT INTO events (body) VALUES (?)", JSON.stringify(e));
    this.sql.exec("DELETE FROM events WHERE id <= (SELECT MAX(id) FROM events) - ?", MAX_EVENTS);
  }

  events(limit: number): E[] {
    return this.sql
      .exec<{ body: string }>("SELECT body FROM events ORDER BY id DESC LIMIT ?", limit)
      .toArray()
      .map((r) => JSON.parse(r.body) as E);
  }

  /** Drops all but the newest `keep` revisions, never one in `protect` (the active and last-known-good). */
  prune(keep: number, protect: readonly number[]): void {
    const doomed = this.sql
      .exec<{ revision: number }>("SELECT revision FROM revisions ORDER BY revision DESC LIMIT -1 OFFSET ?", keep)
      .toArray()
      .map((r) => r.revision)
      .filter((r) => !protect.includes(r));
    for (const r of doomed) this.sql.exec("DELETE FROM revisions WHERE revision = ?", r);
  }
}
