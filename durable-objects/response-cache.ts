import { DurableObject } from "cloudflare:workers";
import { ResponseCacheStore, type CacheEntry, type CacheHit, type CacheLookup, type PurgeScope } from "../src/cache/cache-store.ts";
import { ResponseCacheService, type ResponseCacheRpc } from "../src/cache/response-cache-service.ts";
import { systemClock } from "../src/deps/clock.ts";

/**
 * ResponseCache: one instance per tenant (`RESPONSE_CACHE.getByName(tenant)`), the tenant's
 * partition of the response cache. A thin RPC shell: what it serves is ResponseCacheService over
 * ResponseCacheStore, both tested without this class. Its alarm reclaims expired entries.
 */
export class ResponseCache extends DurableObject<Env> implements ResponseCacheRpc {
  readonly #cache: ResponseCacheService;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#cache = new ResponseCacheService(ctx.storage.transactionSync(() => new ResponseCacheStore(ctx.storage)), ctx.storage, systemClock);
  }

  async lookup(q: CacheLookup): Promise<CacheHit | undefined> {
    return this.#cache.lookup(q);
  }

  async put(e: CacheEntry): Promise<boolean> {
    return this.#cache.put(e);
  }

  async purge(scope: PurgeScope): Promise<number> {
    return this.#cache.purge(scope);
  }

  override async alarm(): Promise<void> {
    await this.#cache.alarm();
  }
}
