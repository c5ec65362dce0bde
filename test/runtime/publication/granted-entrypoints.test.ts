import { describe, expect, it } from "vitest";
import { publicationSchema } from "../../../src/config/publication-schema.ts";
import { compilePublication } from "../../../src/publication/compile-publication.ts";
import { bundled } from "../support/fixtures.ts";

const names = (eps: readonly { readonly name: string }[]) => eps.map((e) => e.name);

describe("grantedEntrypoints (what /v1/models lists)", () => {
  it("lists what mayUse allows, in the publication's order, for keys and tokens alike", () => {
    const doc = bundled("publication");
    const all = doc.entrypoints.map((e: { name: string }) => e.name) as string[];
    // A key granted two entrypoints written out of order, one twice, and one that is also its tenant's other key's.
    doc.tenants[0].apiKeys.push({ id: "pair", sha256: "ab".repeat(32), entrypoints: ["sluice-embed", "sluice-chat", "sluice-embed"] });
    const pub = compilePublication(publicationSchema.parse(doc));
    const keyOf = (keyId: string) => ({ tenantId: "demo", keyId });
    for (const principal of [keyOf("demo"), keyOf("limited"), keyOf("pair"), keyOf("nobody"), { ...keyOf("x"), entrypoints: ["sluice-large", "sluice-chat"] }, { ...keyOf("x"), entrypoints: ["*"] }, { ...keyOf("demo"), entrypoints: [] }]) {
      expect(names(pub.grantedEntrypoints(principal))).toEqual(all.filter((n) => pub.mayUse(principal, n)));
    }
    expect(names(pub.grantedEntrypoints(keyOf("demo")))).toEqual(all);
    expect(names(pub.grantedEntrypoints(keyOf("pair")))).toEqual(["sluice-chat", "sluice-embed"]);
    expect(names(pub.grantedEntrypoints(keyOf("nobody")))).toEqual([]);
    // A token scope naming an entrypoint this revision does not have lists nothing for it.
    expect(names(pub.grantedEntrypoints({ ...keyOf("x"), entrypoints: ["gone", "sluice-large"] }))).toEqual(["sluice-large"]);
  });
});
