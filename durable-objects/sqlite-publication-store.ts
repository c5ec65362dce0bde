import type { PublicationEvent, PublicationRevisionInfo, PublicationStore, StoredPublication } from "../src/publication-lifecycle/controller.ts";

const MAX_EVENTS = 500;

/** PublicationStore on a Durable Object's SQLite storage; `transaction` is `transactionSync`. */
export class SqlitePublicationStore implements PublicationStore {
  readonly #storage: DurableObjectStorage;
  readonly #sql: SqlStorage;

  constructor(storage: DurableObjectStorage) {
    this.#storage = storage;
    this.#sql = storage.sql;
    this.#sql.exec(`
      CREATE TABLE IF NOT EXISTS revisions (
        revision INTEGER PRIMARY KEY, digest TEXT NOT NULL UNIQUE, label TEXT NOT NULL, document TEXT NOT NULL,
        created_at TEXT NOT NULL, source TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS ledger_roots (root TEXT PRIMARY KEY, stripes INTEGER NOT NULL);
    `);
  }

  transaction<T>(fn: () => T): T {
    return this.#storage.transactionSync(fn);
  }

  #meta(key: string): string | undefined {
    return this.#sql.exec<{ value: string }>("SELECT value FROM meta WHERE key = ?", key).toArray()[0]?.value;
  }

  #setMeta(key: string, value: string): void {
    this.#sql.exec("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", key, value);
  }

  activeRevision(): number | undefined {
    const v = this.#meta("active");
    return v === undefined ? undefined : Number(v);
  }

  #row(where: string, arg: string | number): StoredPublication | undefined {
    const row = this.#sql
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
    // A counter, not MAX(revision): numbers of pruned revisions are never reused.
    const revision = Number(this.#meta("next_revision") ?? "1");
    this.#sql.exec(
      "INSERT INTO revisions (revision, digest, label, document, created_at, source) VALUES (?, ?, ?, ?, ?, ?)",
      revision,
      r.digest,
      r.label,
      JSON.stringify(r.document),
      r.createdAt,
      r.source,
    );
    this.#setMeta("next_revision", String(revision + 1));
    return revision;
  }

  setActive(revision: number): void {
    this.#setMeta("active", String(revision));
  }

  appendEvent(e: PublicationEvent): void {
    this.#sql.exec("INSERT INTO events (body) VALUES (?)", JSON.stringify(e));
    this.#sql.exec("DELETE FROM events WHERE id <= (SELECT MAX(id) FROM events) - ?", MAX_EVENTS);
  }

  events(limit: number): PublicationEvent[] {
    return this.#sql
      .exec<{ body: string }>("SELECT body FROM events ORDER BY id DESC LIMIT ?", limit)
      .toArray()
      .map((r) => JSON.parse(r.body) as PublicationEvent);
  }

  revisions(limit: number): PublicationRevisionInfo[] {
    return this.#sql
      .exec<{ revision: number; digest: string; label: string; created_at: string; source: string }>(
        "SELECT revision, digest, label, created_at, source FROM revisions ORDER BY revision DESC LIMIT ?",
        limit,
      )
      .toArray()
      .map((r) => ({ revision: r.revision, digest: r.digest, label: r.label, createdAt: r.created_at, source: r.source }));
  }

  prune(keep: number, protect: readonly number[]): void {
    const doomed = this.#sql
      .exec<{ revision: number }>("SELECT revision FROM revisions ORDER BY revision DESC LIMIT -1 OFFSET ?", keep)
      .toArray()
      .map((r) => r.revision)
      .filter((r) => !protect.includes(r));
    for (const r of doomed) this.#sql.exec("DELETE FROM revisions WHERE revision = ?", r);
  }

  seedDigest(): string | undefined {
    return this.#meta("seed_digest");
  }

  setSeedDigest(digest: string): void {
    this.#setMeta("seed_digest", digest);
  }

  ledgerRoots(): ReadonlyMap<string, number> {
    return new Map(this.#sql.exec<{ root: string; stripes: number }>("SELECT root, stripes FROM ledger_roots").toArray().map((r) => [r.root, r.stripes]));
  }

  addLedgerRoots(roots: ReadonlyMap<string, number>): void {
    for (const [root, stripes] of roots) this.#sql.exec("INSERT INTO ledger_roots (root, stripes) VALUES (?, ?) ON CONFLICT(root) DO NOTHING", root, stripes);
  }
}
