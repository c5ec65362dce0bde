import { env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import type { ResponseCache } from "../../../durable-objects/response-cache.ts";
import { cachePartition, promptDigest, type CacheKeyParts } from "../../../src/cache/cache-key.ts";
import { PENDING_TOUCHES, ResponseCacheStore, SWEEP_BATCH, type CacheEntry, type EntryScope } from "../../../src/cache/cache-store.ts";
import { lexicalSignature } from "../../../src/cache/lexical-gate.ts";

const parts = (over: Partial<CacheKeyParts> = {}): CacheKeyParts => ({
  tenant: "acme",
  entrypoint: "default",
  decision: "general",
  models: "chat@1",
  systemDigest: "",
  toolsDigest: "",
  responseFormat: "text",
  historyDigest: "",
  matcher: "semantic:embed",
  knowledgeVersion: "",
  scope: "project",
  project: "p1",
  key: "k1",
  ...over,
});

/** A unit-ish vector pointing mostly along axis `i`, tilted towards axis `j` by `tilt`. */
function vec(i: number, j = i, tilt = 0): Float32Array {
  const v = new Float32Array(8);
  v[i] = 1;
  v[j] = (v[j] ?? 0) + tilt;
  return v;
}

async function entry(scope: EntryScope, prompt: string, response: string, over: Partial<CacheEntry> = {}): Promise<CacheEntry> {
  return { scope, promptDigest: await promptDigest(prompt), signature: lexicalSignature(prompt), vector: vec(0), response, ttlMs: 60_000, maxEntries: 10, ...over };
}

async function lookup(scopeKey: string, prompt: string, vector?: Float32Array, threshold = 0.9) {
  return {
    scopeKey,
    promptDigest: await promptDigest(prompt),
    semantic: vector === undefined ? undefined : { vector, threshold, signature: lexicalSignature(prompt) },
  };
}

describe("ResponseCache object", () => {
  it("serves an entry only within its tenant's object and its own scope key", async () => {
    const p = await cachePartition(parts({ tenant: "iso-a" }));
    const a = env.RESPONSE_CACHE.getByName("iso-a");
    const b = env.RESPONSE_CACHE.getByName("iso-b");
    expect(await a.put(await entry(p, "What is our refund policy?", "A"))).toBe(true);
    // Another tenant: its own object, so the same scope key finds nothing.
    expect(await b.lookup(await lookup(p.scopeKey, "What is our refund policy?", vec(0)))).toBeUndefined();
    // Another project in the same tenant: another scope key.
    const other = await cachePartition(parts({ tenant: "iso-a", project: "p2" }));
    expect(await a.lookup(await lookup(other.scopeKey, "What is our refund policy?", vec(0)))).toBeUndefined();
    // The same scope: an exact hit, then a semantic one.
    expect(await a.lookup(await lookup(p.scopeKey, "What is our refund policy?"))).toMatchObject({ response: "A", match: "exact", similarity: 1 });
    expect(await a.lookup(await lookup(p.scopeKey, "what's our refund policy", vec(0, 1, 0.2)))).toMatchObject({ response: "A", match: "semantic" });
  });

  it("hits a paraphrase above the threshold, misses below it, and never passes the lexical gate's near-misses", async () => {
    const p = await cachePartition(parts({ tenant: "sem" }));
    const c = env.RESPONSE_CACHE.getByName("sem");
    await c.put(await entry(p, "transfer $100 to Alice", "sent to Alice"));
    const close = vec(0, 1, 0.3); // cosine ≈ 0.958
    const far = vec(0, 1, 0.8); // cosine ≈ 0.781
    const hit = await c.lookup(await lookup(p.scopeKey, "Please transfer $100 to Alice.", close));
    expect(hit).toMatchObject({ response: "sent to Alice", match: "semantic" });
    expect(hit!.similarity).toBeCloseTo(0.9578, 3);
    expect(await c.lookup(await lookup(p.scopeKey, "Please transfer $100 to Alice.", far))).toBeUndefined();
    // Identical vector, different name or amount: the gate refuses.
    expect(await c.lookup(await lookup(p.scopeKey, "transfer $100 to Bob", vec(0)))).toBeUndefined();
    expect(await c.lookup(await lookup(p.scopeKey, "transfer $1000 to Alice", vec(0)))).toBeUndefined();
  });

  it("stores one entry for concurrent identical misses", async () => {
    const p = await cachePartition(parts({ tenant: "race" }));
    const c = env.RESPONSE_CACHE.getByName("race");
    const results = await Promise.all(Array.from({ length: 8 }, async (_, i) => c.put(await entry(p, "same prompt", `answer ${i}`))));
    expect(results.filter(Boolean)).toHaveLength(1);
    const served = await c.lookup(await lookup(p.scopeKey, "same prompt"));
    expect(served!.response).toBe(`answer ${results.indexOf(true)}`);
    const n = await runInDurableObject(c, (_o: ResponseCache, state) => state.storage.sql.exec("SELECT COUNT(*) AS n FROM rc_entries").one().n);
    expect(n).toBe(1);
  });

  it("expires entries after their TTL, bounds a scope key by LRU and the tenant overall", async () => {
    const c = env.RESPONSE_CACHE.getByName("bounds");
    await runInDurableObject(c, async (_o: ResponseCache, state) => {
      const store = new ResponseCacheStore(state.storage, { maxTenantEntries: 5, maxScan: 100 });
      const p = await cachePartition(parts({ tenant: "bounds" }));
      const q = await cachePartition(parts({ tenant: "bounds", project: "p2" }));
      expect(store.put(await entry(p, "one", "1", { ttlMs: 1000 }), 0)).toBe(true);
      expect(store.lookup(await lookup(p.scopeKey, "one"), 999)?.ageMs).toBe(999);
      expect(store.lookup(await lookup(p.scopeKey, "one"), 1000)).toBeUndefined();
      // An expired duplicate is replaced, not kept.
      expect(store.put(await entry(p, "one", "1b", { ttlMs: 1000 }), 2000)).toBe(true);
      expect(store.lookup(await lookup(p.scopeKey, "one"), 2001)?.response).toBe("1b");
      // Per scope key: three entries, the least recently used goes.
      for (const w of ["two", "three"]) store.put(await entry(p, w, w, { maxEntries: 3 }), 2100);
      expect(store.lookup(await lookup(p.scopeKey, "one"), 2200)?.response).toBe("1b"); // "one" is now the most recent
      store.put(await entry(p, "four", "four", { maxEntries: 3 }), 2300);
      expect(store.count(p.scopeKey)).toBe(3);
      expect(store.lookup(await lookup(p.scopeKey, "two"), 2400)).toBeUndefined();
      expect(store.lookup(await lookup(p.scopeKey, "one"), 2400)?.response).toBe("1b");
      // Tenant-wide: five entries at most, across scope keys.
      for (const w of ["a", "b", "c"]) store.put(await entry(q, w, w), 2500);
      expect(store.count()).toBe(5);
      expect(store.lookup(await lookup(p.scopeKey, "three"), 2600)).toBeUndefined();
      expect(store.lookup(await lookup(q.scopeKey, "c"), 2600)?.response).toBe("c");
    });
  });

  it("writes a hit's recency with the next write, not one write per hit", async () => {
    const c = env.RESPONSE_CACHE.getByName("recency");
    await runInDurableObject(c, async (_o: ResponseCache, state) => {
      const store = new ResponseCacheStore(state.storage);
      const p = await cachePartition(parts({ tenant: "recency" }));
      const seqOf = (response: string) => Number(state.storage.sql.exec("SELECT used_seq FROM rc_entries WHERE response = ?", response).toArray()[0]!.used_seq);
      for (const w of ["old", "new"]) store.put(await entry(p, w, w, { maxEntries: 2 }), 100);
      const stored = seqOf("old");
      expect(store.lookup(await lookup(p.scopeKey, "old"), 200)?.response).toBe("old");
      expect(store.lookup(await lookup(p.scopeKey, "old"), 201)?.response).toBe("old");
      // Held in memory: the row is as stored.
      expect(store.pendingTouches).toBe(1);
      expect(seqOf("old")).toBe(stored);
      // The next store writes it before it trims, so the hit entry survives and the unused one goes.
      store.put(await entry(p, "newest", "newest", { maxEntries: 2 }), 300);
      expect(store.pendingTouches).toBe(0);
      expect(seqOf("old")).toBeGreaterThan(stored);
      expect(store.lookup(await lookup(p.scopeKey, "new"), 400)).toBeUndefined();
      expect(store.lookup(await lookup(p.scopeKey, "old"), 400)?.response).toBe("old");
      // At most PENDING_TOUCHES hits wait: the lookup reaching it writes them all.
      const many = await Promise.all(Array.from({ length: PENDING_TOUCHES }, (_, i) => entry(p, `many ${i}`, `m${i}`, { maxEntries: PENDING_TOUCHES + 2 })));
      for (const e of many) store.put(e, 500);
      for (let i = 0; i < PENDING_TOUCHES - 1; i++) store.lookup(await lookup(p.scopeKey, `many ${i}`), 600);
      expect(store.pendingTouches).toBe(PENDING_TOUCHES - 1);
      const before = seqOf("m0");
      store.lookup(await lookup(p.scopeKey, `many ${PENDING_TOUCHES - 1}`), 600);
      expect(store.pendingTouches).toBe(0);
      expect(seqOf("m0")).toBeGreaterThan(before);
    });
  });

  it("reclaims expired entries from its alarm in batches", async () => {
    const c = env.RESPONSE_CACHE.getByName("sweep");
    const p = await cachePartition(parts({ tenant: "sweep" }));
    await runInDurableObject(c, async (_o: ResponseCache, state) => {
      const store = new ResponseCacheStore(state.storage);
      for (let i = 0; i < SWEEP_BATCH + 5; i++) store.put(await entry(p, `prompt ${i}`, "x", { ttlMs: 1, maxEntries: 10_000 }), Date.now() - 10_000);
    });
    await c.put(await entry(p, "live", "y"));
    // The put armed the alarm for the oldest expiry (already due, so it may fire on its own); a
    // full batch re-arms it at once, so two runs reclaim everything expired and keep the live entry.
    const count = () => runInDurableObject(c, (_o: ResponseCache, state) => state.storage.sql.exec("SELECT COUNT(*) AS n FROM rc_entries").one().n);
    await vi.waitFor(async () => {
      await runDurableObjectAlarm(c);
      expect(await count()).toBe(1);
    });
    expect(await c.lookup(await lookup(p.scopeKey, "live"))).toMatchObject({ response: "y" });
  });

  it("deletes by scope: one key's entries, one project's, or the tenant's", async () => {
    const c = env.RESPONSE_CACHE.getByName("purge");
    const keyed = await cachePartition(parts({ tenant: "purge", scope: "key", key: "k9" }));
    const p1 = await cachePartition(parts({ tenant: "purge" }));
    const p2 = await cachePartition(parts({ tenant: "purge", project: "p2" }));
    await c.put(await entry(keyed, "x", "x"));
    await c.put(await entry(p1, "y", "y"));
    await c.put(await entry(p2, "z", "z"));
    expect(await c.purge({ key: "k9" })).toBe(1);
    expect(await c.purge({ project: "p1" })).toBe(1);
    expect(await c.lookup(await lookup(p2.scopeKey, "z"))).toMatchObject({ response: "z" });
    expect(await c.purge({})).toBe(1);
    expect(await c.lookup(await lookup(p2.scopeKey, "z"))).toBeUndefined();
  });
});
