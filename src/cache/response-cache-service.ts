import type { AlarmStorage } from "../deps/alarm-storage.ts";
import type { Clock } from "../deps/clock.ts";
import type { CacheEntry, CacheHit, CacheLookup, PurgeScope, ResponseCacheStore } from "./cache-store.ts";

/** The ResponseCache Durable Object's RPC surface (one object per tenant: `RESPONSE_CACHE.getByName(tenant)`). */
export interface ResponseCacheRpc {
  lookup(q: CacheLookup): Promise<CacheHit | undefined>;
  /** True when this call stored the entry (false: the scope key already held one for the prompt). */
  put(e: CacheEntry): Promise<boolean>;
  /** Deletes by scope (see `PurgeScope`); the number of entries deleted. */
  purge(scope: PurgeScope): Promise<number>;
}

/** The part of a Durable Object's storage the service uses: transactions and the alarm. */
export interface ResponseCacheObjectStorage extends AlarmStorage {
  transactionSync<T>(fn: () => T): T;
}

/** What the service asks of the entries: {@link ResponseCacheStore}, or a fake in tests. */
export type ResponseCacheRecords = Pick<ResponseCacheStore, "lookup" | "put" | "purge" | "sweep" | "nextExpiry">;

/**
 * What the ResponseCache object serves over RPC and runs on its alarm, runnable without it. Each
 * call runs in one transaction, so two concurrent puts of one prompt are serialized and the second
 * finds the first. Expired entries are never served (lookups compare `expires_at`); the alarm only
 * reclaims their space, in bounded batches.
 */
export class ResponseCacheService implements ResponseCacheRpc {
  readonly #store: ResponseCacheRecords;
  readonly #storage: ResponseCacheObjectStorage;
  readonly #clock: Clock;
  #alarmArmed = false;

  constructor(store: ResponseCacheRecords, storage: ResponseCacheObjectStorage, clock: Clock) {
    this.#store = store;
    this.#storage = storage;
    this.#clock = clock;
  }

  async lookup(q: CacheLookup): Promise<CacheHit | undefined> {
    const now = this.#clock.now();
    return this.#storage.transactionSync(() => this.#store.lookup(q, now));
  }

  async put(e: CacheEntry): Promise<boolean> {
    const now = this.#clock.now();
    const stored = this.#storage.transactionSync(() => this.#store.put(e, now));
    if (stored && !this.#alarmArmed) await this.#arm();
    return stored;
  }

  async purge(scope: PurgeScope): Promise<number> {
    return this.#storage.transactionSync(() => this.#store.purge(scope));
  }

  async alarm(): Promise<void> {
    this.#alarmArmed = false;
    const now = this.#clock.now();
    const { more } = this.#storage.transactionSync(() => this.#store.sweep(now));
    if (more) {
      await this.#storage.setAlarm(now);
      this.#alarmArmed = true;
    } else await this.#arm();
  }

  async #arm(): Promise<void> {
    const next = this.#storage.transactionSync(() => this.#store.nextExpiry());
    if (next === undefined) return;
    const current = await this.#storage.getAlarm();
    if (current === null || current > next) await this.#storage.setAlarm(next);
    this.#alarmArmed = true;
  }
}
