import type { LexicalSignature } from "./lexical-gate.ts";
import { semanticMatch, unitVector } from "./semantic-match.ts";

/** The SQL part of a Durable Object's storage the store uses (vectors are bound as ArrayBuffers). */
export interface CacheSql {
  exec(query: string, ...bindings: (string | number | null | ArrayBuffer)[]): { toArray(): Record<string, unknown>[] };
}

/** A partition within the tenant's object (see `CachePartition`): every lookup and store names exactly one. */
export interface EntryScope {
  readonly scopeKey: string;
  readonly project: string;
  readonly key?: string | undefined;
}

/** One lookup, confined to `scopeKey`. */
export interface CacheLookup {
  readonly scopeKey: string;
  /** The exact-match digest of the prompt (`promptDigest`). */
  readonly promptDigest: string;
  /** For a semantic lookup: the prompt's embedding, the cosine it must reach, and its lexical signature. */
  readonly semantic?: { readonly vector: Float32Array; readonly threshold: number; readonly signature: LexicalSignature } | undefined;
}

/** A served entry: its stored response, how it matched and how old it is. */
export interface CacheHit {
  readonly response: string;
  readonly match: "exact" | "semantic";
  /** 1 for an exact match; the cosine for a semantic one (rounded to 4 decimals). */
  readonly similarity: number;
  readonly ageMs: number;
}

/** One answer to keep. */
export interface CacheEntry {
  readonly scope: EntryScope;
  readonly promptDigest: string;
  readonly signature: LexicalSignature;
  readonly vector?: Float32Array | undefined;
  readonly response: string;
  readonly ttlMs: number;
  /** Entries kept per scope key; the least recently used go first. */
  readonly maxEntries: number;
}

/** Which entries an operator deletes: all of the tenant's, one project's, or one key's (key-scoped entries). */
export interface PurgeScope {
  readonly project?: string | undefined;
  readonly key?: string | undefined;
}

/** Bounds of one tenant's object. */
export interface CacheStoreLimits {
  /** Entries per tenant, whatever their scope keys; past it the tenant's least recently used go. */
  readonly maxTenantEntries: number;
  /** Entries compared per semantic lookup (a scope key holds at most its `maxEntries`; this caps a misconfiguration). */
  readonly maxScan: number;
}

/** The bounds a tenant's object runs with unless told otherwise (docs/cache.md explains the sizes). */
export const DEFAULT_STORE_LIMITS: CacheStoreLimits = { maxTenantEntries: 10_000, maxScan: 1_000 };

/**
 * Hits whose recency is held in memory, at most; the lookup that reaches it writes them all. A hit
 * writes nothing before that (or before the next store, purge or sweep, which write them first):
 * one write per hit was a commit per hit, which cost more than the rest of serving it.
 */
export const PENDING_TOUCHES = 256;

/** Expired rows removed per sweep, so no alarm run holds the object long. */
export const SWEEP_BATCH = 500;

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS rc_entries (
    id INTEGER PRIMARY KEY,
    scope_key TEXT NOT NULL,
    prompt_digest TEXT NOT NULL,
    project TEXT NOT NULL,
    key_id TEXT,
    terms TEXT NOT NULL,
    vector BLOB,
    response TEXT NOT NULL,
    stored_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_seq INTEGER NOT NULL,
    UNIQUE (scope_key, prompt_digest)
  );
  CREATE INDEX IF NOT EXISTS rc_scope_used ON rc_entries (scope_key, used_seq);
  CREATE INDEX IF NOT EXISTS rc_used ON rc_entries (used_seq);
  CREATE INDEX IF NOT EXISTS rc_expires ON rc_entries (expires_at);
  CREATE INDEX IF NOT EXISTS rc_principal ON rc_entries (project, key_id);
`;

function blobOf(v: Float32Array): ArrayBuffer {
  const copy = new Float32Array(v);
  return copy.buffer;
}

function vectorOf(blob: unknown): Float32Array | undefined {
  if (blob instanceof ArrayBuffer) return new Float32Array(blob.slice(0));
  if (ArrayBuffer.isView(blob)) return new Float32Array(blob.buffer.slice(blob.byteOffset, blob.byteOffset + blob.byteLength));
  return undefined;
}

/**
 * One tenant's response cache in its Durable Object's SQLite: the object is the tenant's partition,
 * and every read and write here names one scope key and touches only its rows. There is no query
 * that crosses scope keys except the operator's purge and the tenant-wide bounds (expiry, LRU), so
 * isolation does not depend on what was embedded or on a prefix in a key.
 *
 * Exact lookups are one indexed read; a semantic lookup compares the prompt's unit vector with the
 * scope key's live entries (at most its `maxEntries`) and serves the most similar one that reaches
 * the threshold and passes the lexical gate. Callers run each method in one transaction.
 *
 * A hit's recency is held in memory, in the order of the hits, and written with the next write
 * (see {@link PENDING_TOUCHES}); if the object is evicted first, the entries served since look
 * older than they are, which only moves them up the eviction order.
 */
export class ResponseCacheStore {
  readonly #sql: CacheSql;
  readonly #limits: CacheStoreLimits;
  /** Ids of the entries hit since the last write, least recent first. */
  readonly #touched = new Set<number>();

  constructor(storage: { readonly sql: CacheSql }, limits: CacheStoreLimits = DEFAULT_STORE_LIMITS) {
    this.#sql = storage.sql;
    this.#limits = limits;
    this.#sql.exec(SCHEMA);
  }

  /** The entry serving `q` at `now`, or undefined; a hit becomes the scope key's most recently used. */
  lookup(q: CacheLookup, now: number): CacheHit | undefined {
    const exact = this.#sql
      .exec("SELECT id, response, stored_at FROM rc_entries WHERE scope_key = ? AND prompt_digest = ? AND expires_at > ?", q.scopeKey, q.promptDigest, now)
      .toArray()[0];
    if (exact !== undefined) {
      this.#touch(Number(exact.id));
      return { response: String(exact.response), match: "exact", similarity: 1, ageMs: now - Number(exact.stored_at) };
    }
    const s = q.semantic;
    if (s === undefined) return undefined;
    const query = { unit: unitVector(s.vector), signature: s.signature };
    const rows = this.#sql
      .exec(
        "SELECT id, terms, vector FROM rc_entries WHERE scope_key = ? AND expires_at > ? AND vector IS NOT NULL ORDER BY used_seq DESC LIMIT ?",
        q.scopeKey,
        now,
        this.#limits.maxScan,
      )
      .toArray();
    let best: { id: number; similarity: number } | undefined;
    for (const r of rows) {
      const unit = vectorOf(r.vector);
      if (unit === undefined) continue;
      const m = semanticMatch(query, { unit, signature: { terms: JSON.parse(String(r.terms)) as string[] } }, s.threshold);
      if (m.accepted && (best === undefined || m.similarity! > best.similarity)) best = { id: Number(r.id), similarity: m.similarity! };
    }
    if (best !== undefined) {
      const row = this.#sql.exec("SELECT response, stored_at FROM rc_entries WHERE id = ?", best.id).toArray()[0]!;
      this.#touch(best.id);
      return { response: String(row.response), match: "semantic", similarity: Math.round(best.similarity * 1e4) / 1e4, ageMs: now - Number(row.stored_at) };
    }
    return undefined;
  }

  /**
   * Keeps an answer unless its scope key already holds one for the same prompt (so concurrent
   * identical misses keep the first), then trims the scope key to `maxEntries` and the tenant to
   * its bound, least recently used first. True when this call stored it.
   */
  put(e: CacheEntry, now: number): boolean {
    // The trims below go by recency: the hits' must be in the rows first.
    this.#writeTouches();
    // A live duplicate wins; an expired one is replaced.
    this.#sql.exec("DELETE FROM rc_entries WHERE scope_key = ? AND prompt_digest = ? AND expires_at <= ?", e.scope.scopeKey, e.promptDigest, now);
    const stored = this.#sql
      .exec(
        `INSERT INTO rc_entries (scope_key, prompt_digest, project, key_id, terms, vector, response, stored_at, expires_at, used_seq)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (scope_key, prompt_digest) DO NOTHING RETURNING id`,
        e.scope.scopeKey,
        e.promptDigest,
        e.scope.project,
        e.scope.key ?? null,
        JSON.stringify(e.signature.terms),
        e.vector === undefined ? null : blobOf(unitVector(e.vector)),
        e.response,
        now,
        now + e.ttlMs,
        this.#nextSeq(),
      )
      .toArray();
    if (stored.length === 0) return false;
    this.#sql.exec(
      "DELETE FROM rc_entries WHERE id IN (SELECT id FROM rc_entries WHERE scope_key = ? ORDER BY used_seq DESC LIMIT -1 OFFSET ?)",
      e.scope.scopeKey,
      Math.max(1, e.maxEntries),
    );
    this.#sql.exec("DELETE FROM rc_entries WHERE id IN (SELECT id FROM rc_entries ORDER BY used_seq DESC LIMIT -1 OFFSET ?)", this.#limits.maxTenantEntries);
    return true;
  }

  /** Deletes the tenant's entries, or one project's, or one key's; the number deleted. */
  purge(scope: PurgeScope): number {
    this.#writeTouches();
    const where: string[] = [];
    const args: string[] = [];
    if (scope.project !== undefined) {
      where.push("project = ?");
      args.push(scope.project);
    }
    if (scope.key !== undefined) {
      where.push("key_id = ?");
      args.push(scope.key);
    }
    const rows = this.#sql.exec(`DELETE FROM rc_entries${where.length > 0 ? ` WHERE ${where.join(" AND ")}` : ""} RETURNING id`, ...args).toArray();
    return rows.length;
  }

  /** Removes up to {@link SWEEP_BATCH} expired entries; `more` when a full batch went. */
  sweep(now: number): { removed: number; more: boolean } {
    this.#writeTouches();
    const rows = this.#sql
      .exec("DELETE FROM rc_entries WHERE id IN (SELECT id FROM rc_entries WHERE expires_at <= ? ORDER BY expires_at LIMIT ?) RETURNING id", now, SWEEP_BATCH)
      .toArray();
    return { removed: rows.length, more: rows.length === SWEEP_BATCH };
  }

  /** When the next entry expires (epoch ms), undefined when there are none. */
  nextExpiry(): number | undefined {
    const r = this.#sql.exec("SELECT MIN(expires_at) AS t FROM rc_entries").toArray()[0];
    return r?.t === null || r?.t === undefined ? undefined : Number(r.t);
  }

  /** Live and expired entries held, in one scope key or the whole tenant. */
  count(scopeKey?: string): number {
    const r =
      scopeKey === undefined
        ? this.#sql.exec("SELECT COUNT(*) AS n FROM rc_entries").toArray()[0]
        : this.#sql.exec("SELECT COUNT(*) AS n FROM rc_entries WHERE scope_key = ?", scopeKey).toArray()[0];
    return Number(r?.n ?? 0);
  }

  /** Hits whose recency is not in the rows yet. */
  get pendingTouches(): number {
    return this.#touched.size;
  }

  #nextSeq(): number {
    const r = this.#sql.exec("SELECT MAX(used_seq) AS s FROM rc_entries").toArray()[0];
    return Number(r?.s ?? 0) + 1;
  }

  #touch(id: number): void {
    // Deleted and re-added: a later hit is the more recent.
    this.#touched.delete(id);
    this.#touched.add(id);
    if (this.#touched.size >= PENDING_TOUCHES) this.#writeTouches();
  }

  /** The pending hits become the most recently used, in the order they were hit. */
  #writeTouches(): void {
    if (this.#touched.size === 0) return;
    let seq = this.#nextSeq();
    for (const id of this.#touched) this.#sql.exec("UPDATE rc_entries SET used_seq = ? WHERE id = ?", seq++, id);
    this.#touched.clear();
  }
}
