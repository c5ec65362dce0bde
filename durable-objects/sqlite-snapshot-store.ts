import type { HistoryEvent, SnapshotStore, StoredRevision } from "../src/snapshot/controller.ts";
import type { NormalizedSnapshot } from "../src/snapshot/normalize.ts";

const MAX_EVENTS = 500;

/** SnapshotStore on a Durable Object's SQLite storage; `transaction` is `transactionSync`. */
export class SqliteSnapshotStore implements SnapshotStore {
  readonly #storage: DurableObjectStorage;
  readonly #sql: SqlStorage;

  constructor(storage: DurableObjectStorage) {
    this.#storage = storage;
    this.#sql = storage.sql;
    this.#sql.exec(`
      CREATE TABLE IF NOT EXISTS revisions (
        revision INTEGER PRIMARY KEY, digest TEXT NOT NULL UNIQUE, snapshot TEXT NOT NULL,
        created_at TEXT NOT NULL, source TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL);
    `);
  }

  transaction<T>(fn: () => T): T {
    return this.#storage.transactionSync(fn);
  }

  #meta(key: string): string | undefined {
    const row = this.#sql.exec<{ value: string }>("SELECT value FROM meta WHERE key = ?", key).toArray()[0];
    return row?.value;
  }

  #setMeta(key: string, value: string): void {
    this.#sql.exec("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", key, value);
  }

  activeRevision(): number | undefined {
    const v = this.#meta("active");
    return v === undefined ? undefined : Number(v);
  }

  #row(where: string, arg: string | number): StoredRevision | undefined {
    const row = this.#sql
      .exec<{ revision: number; digest: string; snapshot: string; created_at: string; source: string }>(
        `SELECT revision, digest, snapshot, created_at, source FROM revisions WHERE ${where} = ?`,
        arg,
      )
      .toArray()[0];
    if (!row) return undefined;
    return {
      revision: row.revision,
      digest: row.digest,
      snapshot: JSON.parse(row.snapshot) as NormalizedSnapshot,
      createdAt: row.created_at,
      source: row.source,
    };
  }

  getRevision(revision: number): StoredRevision | undefined {
    return this.#row("revision", revision);
  }

  findByDigest(digest: string): StoredRevision | undefined {
    return this.#row("digest", digest);
  }

  insertRevision(r: Omit<StoredRevision, "revision">): number {
    // A counter, not MAX(revision): numbers of pruned revisions are never reused.
    const revision = Number(this.#meta("next_revision") ?? "1");
    this.#sql.exec(
      "INSERT INTO revisions (revision, digest, snapshot, created_at, source) VALUES (?, ?, ?, ?, ?)",
      revision,
      r.digest,
      JSON.stringify(r.snapshot),
      r.createdAt,
      r.source,
    );
    this.#setMeta("next_revision", String(revision + 1));
    return revision;
  }

  setActive(revision: number): void {
    this.#setMeta("active", String(revision));
  }

  appendEvent(e: HistoryEvent): void {
    this.#sql.exec("INSERT INTO events (body) VALUES (?)", JSON.stringify(e));
    this.#sql.exec("DELETE FROM events WHERE id <= (SELECT MAX(id) FROM events) - ?", MAX_EVENTS);
  }

  events(limit: number): HistoryEvent[] {
    return this.#sql
      .exec<{ body: string }>("SELECT body FROM events ORDER BY id DESC LIMIT ?", limit)
      .toArray()
      .map((r) => JSON.parse(r.body) as HistoryEvent);
  }

  revisions(limit: number): Omit<StoredRevision, "snapshot">[] {
    return this.#sql
      .exec<{ revision: number; digest: string; created_at: string; source: string }>(
        "SELECT revision, digest, created_at, source FROM revisions ORDER BY revision DESC LIMIT ?",
        limit,
      )
      .toArray()
      .map((r) => ({ revision: r.revision, digest: r.digest, createdAt: r.created_at, source: r.source }));
  }

  prune(keep: number, protect: readonly number[]): void {
    const doomed = this.#sql
      .exec<{ revision: number }>("SELECT revision FROM revisions ORDER BY revision DESC LIMIT -1 OFFSET ?", keep)
      .toArray()
      .map((r) => r.revision)
      .filter((r) => !protect.includes(r));
    for (const r of doomed) this.#sql.exec("DELETE FROM revisions WHERE revision = ?", r);
  }
}
