import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { DEMO_KEY_DIGESTS } from "../../../src/config/demo-keys.ts";
import { ConfigValidationError } from "../../../src/config/parse-file.ts";
import { sha256Hex } from "../../../src/digest/canonical-digest.ts";
import { validateCandidate } from "../../../src/publication-lifecycle/validate-candidate.ts";
import { isolateConfig } from "../../../src/worker/isolate-config.ts";
import { bundled } from "../support/fixtures.ts";

describe("the demo keys on the edge", () => {
  it("are the digests of the keys the README prints", async () => {
    for (const [digest, key] of DEMO_KEY_DIGESTS) expect(await sha256Hex(key)).toBe(digest);
  });

  it("an environment that refuses them fails its start on the bundled publication, naming each; others start", () => {
    const err = (() => {
      try {
        isolateConfig({ ...env, SLUICE_DEMO_KEYS: "refuse" });
        return undefined;
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(ConfigValidationError);
    expect((err as ConfigValidationError).issues.map((i) => [i.path, i.message.split(",")[0]])).toEqual([
      ["tenants[0].apiKeys[0]", "is the demo key sk-sluice-demo"],
      ["tenants[0].apiKeys[1]", "is the demo key sk-sluice-limited"],
    ]);
    // The same texts without the refusal start (the check is part of what is cached).
    expect(isolateConfig(env).publication.revision).toBe("demo-1");
  });

  it("a candidate listing one is rejected there, also as a rotated-out value; a revoked one is no key", async () => {
    const gateway = isolateConfig(env).gateway;
    const ctx = { gateway, snapshot: undefined, ledgerRoots: new Map(), refuseDemoKeys: true };
    const pub = bundled("publication");
    const [demo] = [...DEMO_KEY_DIGESTS.keys()];
    pub.tenants[0].apiKeys = [
      { id: "own", sha256: "a".repeat(64), entrypoints: ["*"], previous: [{ sha256: demo, until: "2030-01-01T00:00:00Z" }] },
      { id: "old", sha256: "b".repeat(64), entrypoints: ["*"], revokedAt: "2026-01-01T00:00:00Z" },
    ];
    const verdict = await validateCandidate(pub, ctx);
    expect(verdict.ok ? [] : verdict.issues.map((i) => i.path)).toEqual(["tenants[0].apiKeys[0]"]);
    pub.tenants[0].apiKeys[0].previous = [];
    pub.tenants[0].apiKeys[1].sha256 = demo;
    expect((await validateCandidate(pub, ctx)).ok).toBe(true);
    expect((await validateCandidate(bundled("publication"), { ...ctx, refuseDemoKeys: false })).ok).toBe(true);
  });
});
