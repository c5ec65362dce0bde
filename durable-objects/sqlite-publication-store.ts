import type { PublicationCanary, PublicationEvent, PublicationRevisionInfo, PublicationStore, StoredPublication } from "../src/publication-lifecycle/controller.ts";
import { SqliteRevisionStore } from "./sqlite-revision-store.ts";

/** PublicationStore on a Durable Object's SQLite storage; `transaction` is `transactionSync`. */
export class SqlitePublicationStore extends SqliteRevisionStore<PublicationEvent> implements PublicationStore {
  constructor(storage: DurableObjectStorage) {
    super(
      storage,
      `CREATE TABLE IF NOT EXISTS revisions (
        revision INTEGER PRIMARY KEY, digest TEXT NOT NULL UNIQUE, label TEXT NOT NULL, document TEXT NOT NULL,
        created_at TEXT NOT NULL, source TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS ledger_roots (root TEXT PRIMARY KEY, stripes INTEGER NOT NULL)`,
    );
  }

  #row(where: string, arg: string | number): StoredPublication | undefined {
    const row = this.sql
      .exec<{ revision: number; digest: string; label: string; document: string; created_at: string; source: string }>(
        `SELECT revision, digest, label, document, created_at, source FROM revisions WHERE ${where} = ?`,
        arg,
      )
      .toArray()[0];
    if (!row) return undefined;
    return { revision: row.revision, digest: row.digest, label: row.label, document: JSON.parse(row.document) as unknown, createdAt: row.created_at, source: row.source };
  }

  getRevision(revision: number): StoredPublication | undefined {
    return this.#row("revision", revision);
  }

  findByDigest(digest: string): StoredPublication | undefined {
    return this.#row("digest", digest);
  }

  insertRevision(r: Omit<StoredPublication, "revision">): number {
    const revision = this.takeRevisionNumber();
    this.sql.exec(
      "INSERT INTO revisions (revision, digest, label, document, created_at, source) VALUES (?, ?, ?, ?, ?, ?)",
      revision,
      r.digest,
      r.label,
      JSON.stringify(r.document),
      r.createdAt,
      r.source,
    );
    return revision;
  }

  revisions(limit: number): PublicationRevisionInfo[] {
    return this.sql
      .exec<{ revision: number; digest: string; label: string; created_at: string; source: string }>(
        "SELECT revision, digest, label, created_at, source FROM revisions ORDER BY revision DESC LIMIT ?",
        limit,
      )
      .toArray()
      .map((r) => ({ revision: r.revision, digest: r.digest, label: r.label, createdAt: r.created_at, source: r.source }));
  }

  seedDigest(): string | undefined {
    return this.meta("seed_digest");
  }

  setSeedDigest(digest: string): void {
    this.setMeta("seed_digest", digest);
  }

  // The canary is one JSON value in the meta table: no schema change, so stores written before canaries read as they did.
  canary(): PublicationCanary | undefined {
    const v = this.meta("canary");
    return v === undefined || v === "" ? undefined : (JSON.parse(v) as PublicationCanary);
  }

  setCanary(canary: PublicationCanary | undefined): void {
    this.setMeta("canary", canary === undefined ? "" : JSON.stringify(canary));
  }

  ledgerRoots(): ReadonlyMap<string, number> {
    return new Map(this.sql.exec<{ root: string; stripes: number }>("SELECT root, stripes FROM ledger_roots").toArray().map((r) => [r.root, r.stripes]));
  }

  addLedgerRoots(roots: ReadonlyMap<string, number>): void {
    for (const [root, stripes] of roots) this.sql.exec("INSERT INTO ledger_roots (root, stripes) VALUES (?, ?) ON CONFLICT(root) DO NOTHING", root, stripes);
  }
}
