import { describe, expect, it } from "vitest";
import { cachePartition, promptDigest, type CacheKeyParts } from "../../../src/cache/cache-key.ts";

const base: CacheKeyParts = {
  tenant: "acme",
  entrypoint: "default",
  decision: "general",
  models: "chat@1",
  systemDigest: "",
  toolsDigest: "",
  responseFormat: "text",
  historyDigest: "",
  matcher: "exact",
  knowledgeVersion: "",
  scope: "project",
  project: "p1",
  key: "k1",
};

describe("cache key", () => {
  it("separates every part an answer depends on", async () => {
    const k = (await cachePartition(base)).scopeKey;
    const changes: Partial<CacheKeyParts>[] = [
      { tenant: "other" },
      { entrypoint: "beta" },
      { decision: "code" },
      { models: "chat-large@1" },
      { models: "chat@2" },
      { systemDigest: "sha256:1" },
      { toolsDigest: "sha256:2" },
      { responseFormat: "json_object" },
      { historyDigest: "sha256:3" },
      { matcher: "semantic:embed" },
      { knowledgeVersion: "kb-2" },
      { project: "p2" },
      { scope: "key" },
    ];
    const keys = await Promise.all(changes.map(async (c) => (await cachePartition({ ...base, ...c })).scopeKey));
    for (const other of keys) expect(other).not.toBe(k);
    expect(new Set(keys).size).toBe(keys.length);
  });

  it("shares a project's entries across its keys by default, and only a key's own under key scope", async () => {
    expect((await cachePartition({ ...base, key: "k2" })).scopeKey).toBe((await cachePartition(base)).scopeKey);
    const keyed = await cachePartition({ ...base, scope: "key" });
    expect((await cachePartition({ ...base, scope: "key", key: "k2" })).scopeKey).not.toBe(keyed.scopeKey);
    expect(keyed).toMatchObject({ tenant: "acme", project: "p1", key: "k1" });
    expect((await cachePartition(base)).key).toBeUndefined();
  });

  it("matches a resent prompt exactly whatever its white space", async () => {
    expect(await promptDigest("  What is 2+2?\n")).toBe(await promptDigest("What  is 2+2?"));
    expect(await promptDigest("What is 2+3?")).not.toBe(await promptDigest("What is 2+2?"));
  });
});
