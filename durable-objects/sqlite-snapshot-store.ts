import type { HistoryEvent, SnapshotStore, StoredRevision } from "../src/snapshot/controller.ts";
import type { NormalizedSnapshot } from "../src/snapshot/normalize.ts";
import { SqliteRevisionStore } from "./sqlite-revision-store.ts";

/** SnapshotStore on a Durable Object's SQLite storage; `transaction` is `transactionSync`. */
export class SqliteSnapshotStore extends SqliteRevisionStore<HistoryEvent> implements SnapshotStore {
  constructor(storage: DurableObjectStorage) {
    super(
      storage,
      `CREATE TABLE IF NOT EXISTS revisions (
        revision INTEGER PRIMARY KEY, digest TEXT NOT NULL UNIQUE, snapshot TEXT NOT NULL,
        created_at TEXT NOT NULL, source TEXT NOT NULL)`,
    );
  }

  #row(where: string, arg: string | number): StoredRevision | undefined {
    const row = this.sql
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
    const revision = this.takeRevisionNumber();
    this.sql.exec(
      "INSERT INTO revisions (revision, digest, snapshot, created_at, source) VALUES (?, ?, ?, ?, ?)",
      revision,
      r.digest,
      JSON.stringify(r.snapshot),
      r.createdAt,
      r.source,
    );
    return revision;
  }

  revisions(limit: number): Omit<StoredRevision, "snapshot">[] {
    return this.sql
      .exec<{ revision: number; digest: string; created_at: string; source: string }>(
        "SELECT revision, digest, created_at, source FROM revisions ORDER BY revision DESC LIMIT ?",
        limit,
      )
      .toArray()
      .map((r) => ({ revision: r.revision, digest: r.digest, createdAt: r.created_at, source: r.source }));
  }
}
