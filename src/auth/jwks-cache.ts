import { createLocalJWKSet, type JSONWebKeySet, type JWTVerifyGetKey } from "jose";
import type { Clock } from "../deps/clock.ts";
import { checkEgress, type EgressPolicy } from "../egress/egress-guard.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import { decodeUtf8Strict, readBounded } from "../io/bounded-read.ts";

/** A JWKS larger than this is refused: real ones are a few keys, a few KiB. */
const MAX_JWKS_BYTES = 256 * 1024;

/** How one issuer's JWKS is fetched and kept. */
export interface JwksCacheOptions {
  readonly url: string;
  /** The egress guard's policy: the JWKS URL is an outbound target like any other. */
  readonly egress: EgressPolicy;
  readonly fetch: typeof fetch;
  readonly clock: Clock;
  /** How long a fetched set is used before it is fetched again. */
  readonly ttlMs: number;
  /** Least time between two fetches (after a failure, or for an unknown key id). */
  readonly minRefetchMs: number;
  readonly timeoutMs: number;
  /** Fetch failures, for the operator (a stale set may still be serving). */
  readonly onError?: ((error: string) => void) | undefined;
}

/**
 * One issuer's JWKS, fetched by the gateway itself and cached per isolate. jose's
 * `createRemoteJWKSet` would fetch on its own, past the egress guard and following redirects; here
 * the fetch is ours (guarded, no redirects, bounded, timed) and jose only reads the fetched JSON
 * with `createLocalJWKSet`.
 *
 * Fetches are rate-limited: at most one every `minRefetchMs`, whatever asks for it. A token with an
 * unknown `kid` may trigger a refetch (the issuer rotated its keys), but a flood of made-up kids
 * costs the issuer at most one request per interval. Concurrent callers share one fetch. A failed
 * fetch keeps the last good set in use (it expires only when a fetch succeeds).
 */
export class JwksCache {
  readonly #o: JwksCacheOptions;
  #keys: JWTVerifyGetKey | undefined;
  #fetchedAt = Number.NEGATIVE_INFINITY;
  #attemptedAt = Number.NEGATIVE_INFINITY;
  #inflight: Promise<JWTVerifyGetKey | undefined> | undefined;

  constructor(o: JwksCacheOptions) {
    this.#o = o;
  }

  /**
   * The current key set: the cached one while fresh, else a new fetch (or the stale set while a
   * refetch is not yet allowed or has failed).
   *
   * @throws GatewayError jwks_unavailable when there is no set at all.
   */
  async keys(): Promise<JWTVerifyGetKey> {
    const now = this.#o.clock.now();
    if (this.#keys !== undefined && now - this.#fetchedAt < this.#o.ttlMs) return this.#keys;
    const fetched = now - this.#attemptedAt >= this.#o.minRefetchMs || this.#inflight ? await this.#fetchShared() : undefined;
    const keys = fetched ?? this.#keys;
    if (keys === undefined) throw new GatewayError("jwks_unavailable", "The token issuer's signing keys could not be read; try again shortly.");
    return keys;
  }

  /**
   * A newer set for a token whose key the current set lacks, or undefined when a fetch was made
   * too recently to make another (or it failed): then the key is unknown.
   */
  async refresh(): Promise<JWTVerifyGetKey | undefined> {
    if (this.#inflight) return await this.#inflight;
    if (this.#o.clock.now() - this.#attemptedAt < this.#o.minRefetchMs) return undefined;
    return await this.#fetchShared();
  }

  #fetchShared(): Promise<JWTVerifyGetKey | undefined> {
    this.#inflight ??= this.#fetch().finally(() => {
      this.#inflight = undefined;
    });
    return this.#inflight;
  }

  async #fetch(): Promise<JWTVerifyGetKey | undefined> {
    this.#attemptedAt = this.#o.clock.now();
    try {
      const keys = createLocalJWKSet(await this.#download());
      this.#keys = keys;
      this.#fetchedAt = this.#o.clock.now();
      return keys;
    } catch (err) {
      this.#o.onError?.(err instanceof Error ? err.message : String(err));
      return undefined;
    }
  }

  async #download(): Promise<JSONWebKeySet> {
    // Checked at send time too: the configuration was checked at load, this is the address leaving.
    const verdict = checkEgress(this.#o.url, this.#o.egress);
    if (!verdict.ok) throw new Error(`JWKS ${this.#o.url} refused by the egress guard (${verdict.refusal.code}): ${verdict.refusal.message}`);
    const res = await this.#o.fetch(verdict.url.href, { method: "GET", headers: { accept: "application/jwk-set+json, application/json" }, redirect: "manual", signal: AbortSignal.timeout(this.#o.timeoutMs) });
    if (res.status !== 200 || !res.body) {
      await res.body?.cancel();
      // A redirect is never followed: the configured URL is the one the guard checked.
      throw new Error(`JWKS ${verdict.url.origin}${verdict.url.pathname} answered ${res.status}`);
    }
    const read = await readBounded(res.body, { maxBytes: MAX_JWKS_BYTES });
    if (read.overflowed) throw new Error(`JWKS ${verdict.url.origin}${verdict.url.pathname} is larger than ${MAX_JWKS_BYTES} bytes`);
    const json: unknown = JSON.parse(decodeUtf8Strict(read.bytes));
    if (typeof json !== "object" || json === null || !Array.isArray((json as { keys?: unknown }).keys)) throw new Error(`JWKS ${verdict.url.origin}${verdict.url.pathname} is not a JSON Web Key Set`);
    return json as JSONWebKeySet;
  }
}
