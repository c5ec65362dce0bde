import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { cachePairs, measurePairs, NEAR_MISS_KINDS, PARAPHRASE_KINDS, resultTable } from "../../scripts/cache-false-hits.ts";
import { DEFAULT_SEMANTIC_THRESHOLD } from "../../src/cache/semantic-match.ts";

describe("false hits of the semantic cache, measured with the simulator's embeddings", () => {
  const pairs = cachePairs();
  const results = measurePairs(pairs, DEFAULT_SEMANTIC_THRESHOLD);

  it("labels a few thousand pairs, half paraphrases and half near-misses of every kind", () => {
    expect(pairs.length).toBeGreaterThanOrEqual(4000);
    expect(results.map((r) => r.kind)).toEqual([...PARAPHRASE_KINDS, ...NEAR_MISS_KINDS]);
    expect(pairs.filter((p) => p.same).length).toBe(pairs.filter((p) => !p.same).length);
  });

  it("serves no near-miss at the shipped threshold: the lexical gate stops every one the cosine lets through", () => {
    for (const r of results.filter((x) => !x.same)) expect({ kind: r.kind, served: r.served }).toEqual({ kind: r.kind, served: 0 });
    // The gate is what holds: cosine alone lets reversed questions and swapped directions through.
    expect(results.filter((r) => !r.same).some((r) => r.aboveThreshold > 0)).toBe(true);
  });

  it("is quoted as measured in docs/cache.md", () => {
    expect(readFileSync(new URL("../../docs/cache.md", import.meta.url), "utf8")).toContain(resultTable(results, DEFAULT_SEMANTIC_THRESHOLD));
  });
});
