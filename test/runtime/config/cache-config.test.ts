import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config/load-config.ts";
import { issuesOf } from "../support/config-issues.ts";
import { bundled, textsWith } from "../support/fixtures.ts";

describe("cache plugin config", () => {
  const load = (...plugins: Record<string, unknown>[]) => {
    const p = bundled("publication");
    const first = p.plugins.length;
    p.plugins.push(...plugins);
    return { first, run: () => loadConfig(textsWith({ publication: p })) };
  };

  it("loads an exact and a semantic cache with their defaults", () => {
    const { first, run } = load({ name: "c1", kind: "cache", mode: "exact" }, { name: "c2", kind: "cache", mode: "semantic", model: "sluice-embed", scope: "key" });
    const plugins = run().publication.plugins;
    expect(plugins[first]).toMatchObject({ mode: "exact", threshold: 0.85, ttlMs: 3_600_000, maxEntries: 100, scope: "project", maxTemperature: 0.3, knowledgeVersion: "", maxResponseBytes: 65_536 });
    expect(plugins[first + 1]).toMatchObject({ mode: "semantic", model: "sluice-embed", scope: "key" });
  });

  it("refuses a semantic cache without an embeddings entrypoint, an exact one with a model, and an untrusted version header", () => {
    const { first, run } = load(
      { name: "c1", kind: "cache", mode: "semantic" },
      { name: "c2", kind: "cache", mode: "semantic", model: "sluice-chat" },
      { name: "c3", kind: "cache", mode: "semantic", model: "ghost" },
      { name: "c4", kind: "cache", mode: "exact", model: "sluice-embed" },
      { name: "c5", kind: "cache", mode: "exact", knowledgeVersionHeader: "x-not-trusted" },
    );
    const issues = issuesOf(run);
    const at = (i: number, key: string) => issues.find((x) => x.path === `plugins[${first + i}].${key}`)?.message;
    expect(at(0, "model")).toMatch(/names its embeddings entrypoint/);
    expect(at(3, "model")).toMatch(/exact cache names none/);
    // The cross-file checks run once the schemas pass: fix the schema issues and load again.
    const again = load(
      { name: "c2", kind: "cache", mode: "semantic", model: "sluice-chat" },
      { name: "c3", kind: "cache", mode: "semantic", model: "ghost" },
      { name: "c5", kind: "cache", mode: "exact", knowledgeVersionHeader: "x-not-trusted" },
    );
    const refs = issuesOf(again.run);
    const ref = (i: number, key: string) => refs.find((x) => x.path === `plugins[${again.first + i}].${key}`)?.message;
    expect(ref(0, "model")).toMatch(/serves chat; a semantic cache needs one with operation: embeddings/);
    expect(ref(1, "model")).toMatch(/unknown entrypoint "ghost"/);
    expect(ref(2, "knowledgeVersionHeader")).toMatch(/not in gateway.yaml security.trustedHeaders/);
  });
});
