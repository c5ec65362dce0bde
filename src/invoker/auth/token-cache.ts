import type { Clock } from "../../deps/clock.ts";

/** An access token and when it stops being accepted (epoch ms). */
export interface MintedToken {
  readonly token: string;
  readonly expiresAt: number;
}

/**
 * Where a credential's access tokens come from: an Entra ID application (entra.ts) today, a
 * Google service account's signed JWT assertion tomorrow. `key` names the credential's identity
 * (never its secret): tokens are cached and single-flighted per key. `mint` throws a
 * GatewayError whose message and cause hold no secret and no token.
 */
export interface TokenSource {
  readonly key: string;
  mint(signal: AbortSignal): Promise<MintedToken>;
}

/** How tokens are kept. */
export interface TokenCacheOptions {
  readonly clock: Clock;
  /**
   * A token is replaced this long before it expires (at most half its lifetime), so a request
   * never leaves with one that expires on the way; 5 minutes by default.
   */
  readonly refreshMarginMs?: number | undefined;
  /** After a failed mint, callers fail at once for this long instead of asking again; 1 s by default. */
  readonly failureHoldMs?: number | undefined;
  /** Longest a mint may take, whoever waits for it; 10 s by default. */
  readonly mintTimeoutMs?: number | undefined;
  /** Bound on credentials remembered; past it the least recently minted is dropped. */
  readonly maxEntries?: number | undefined;
}

/** What the cache has done since the isolate started (for metrics and tests). */
export interface TokenCacheStats {
  readonly minted: number;
  readonly failed: number;
}

interface Entry {
  token?: MintedToken;
  /** When the token was minted: its lifetime bounds the refresh margin. */
  mintedAt?: number;
  inflight?: Promise<MintedToken>;
  failedAt?: number;
  failure?: unknown;
}

/**
 * Access tokens minted for provider credentials, kept per isolate. A token is used until a margin
 * before it expires; then the next caller mints a new one. Concurrent callers share one mint
 * (single flight), so a burst of requests after a cold start or an expiry costs the token
 * endpoint one call, not one per request. A failed mint is remembered briefly so a down token
 * endpoint is not hammered; a token still valid is used while its replacement cannot be minted.
 */
export class TokenCache {
  readonly #clock: Clock;
  readonly #marginMs: number;
  readonly #holdMs: number;
  readonly #timeoutMs: number;
  readonly #max: number;
  readonly #entries = new Map<string, Entry>();
  #minted = 0;
  #failed = 0;

  constructor(o: TokenCacheOptions) {
    this.#clock = o.clock;
    this.#marginMs = o.refreshMarginMs ?? 5 * 60_000;
    this.#holdMs = o.failureHoldMs ?? 1_000;
    this.#timeoutMs = o.mintTimeoutMs ?? 10_000;
    this.#max = o.maxEntries ?? 256;
  }

  /**
   * A token of the source's credential, minted now when none is fresh. `signal` stops this
   * caller's wait, not a mint others share.
   *
   * @throws the mint's GatewayError, or the caller's abort reason.
   */
  async token(source: TokenSource, signal: AbortSignal): Promise<string> {
    const now = this.#clock.now();
    let e = this.#entries.get(source.key);
    if (e === undefined) {
      if (this.#entries.size >= this.#max) this.#entries.delete(this.#entries.keys().next().value!);
      this.#entries.set(source.key, (e = {}));
    }
    if (e.token !== undefined && now < this.#refreshAt(e)) return e.token.token;
    if (e.inflight === undefined && e.failedAt !== undefined && now - e.failedAt < this.#holdMs) return this.#fallback(e, now);
    const shared = (e.inflight ??= this.#mint(source, e));
    try {
      return (await abortable(shared, signal)).token;
    } catch (err) {
      if (signal.aborted) throw err;
      return this.#fallback(e, this.#clock.now());
    }
  }

  /**
   * Forgets the source's token when it is `token` (the provider refused it: revoked, or its
   * audience changed), so the next caller mints a new one. A newer token is kept.
   */
  invalidate(source: TokenSource, token: string): void {
    const e = this.#entries.get(source.key);
    if (e?.token?.token === token) {
      e.token = undefined;
      e.mintedAt = undefined;
    }
  }

  /** Counts since the isolate started. */
  stats(): TokenCacheStats {
    return { minted: this.#minted, failed: this.#failed };
  }

  /** When the entry's token is replaced: a margin before it expires, at most half its lifetime. */
  #refreshAt(e: Entry): number {
    const t = e.token!;
    const life = t.expiresAt - (e.mintedAt ?? t.expiresAt);
    return t.expiresAt - Math.min(this.#marginMs, life / 2);
  }

  /** The still-valid token while a new one cannot be had, else the mint's failure. */
  #fallback(e: Entry, now: number): string {
    if (e.token !== undefined && now < e.token.expiresAt) return e.token.token;
    throw e.failure;
  }

  #mint(source: TokenSource, e: Entry): Promise<MintedToken> {
    return source
      .mint(AbortSignal.timeout(this.#timeoutMs))
      .then(
        (t) => {
          this.#minted++;
          e.token = t;
          e.mintedAt = this.#clock.now();
          e.failedAt = undefined;
          e.failure = undefined;
          return t;
        },
        (err: unknown) => {
          this.#failed++;
          e.failedAt = this.#clock.now();
          e.failure = err;
          throw err;
        },
      )
      .finally(() => {
        e.inflight = undefined;
      });
  }
}

/** The promise, or the signal's reason once it fires first (the promise keeps running for others). */
function abortable<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}
