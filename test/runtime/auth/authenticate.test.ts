import { describe, expect, it } from "vitest";
import { authenticate } from "../../../src/auth/authenticate.ts";
import { publicationSchema } from "../../../src/config/publication-schema.ts";
import { sha256Hex } from "../../../src/digest/canonical-digest.ts";
import { compilePublication, type CompiledPublication } from "../../../src/publication/compile-publication.ts";

/** A publication of one key, as far as the authenticate phase reads it. */
const publicationWith = async (key: string, disabled: boolean) =>
  ({ keys: new Map([[await sha256Hex(key), { principal: { tenantId: "t", keyId: "k" }, disabled }]]) }) as unknown as CompiledPublication;

const NOW = Date.parse("2026-06-01T12:00:00Z");

describe("authenticate", () => {
  it("finds a key by its digest, again from the isolate's cache, and a publication that disables it still refuses it", async () => {
    const on = await publicationWith("sk-cached", false);
    expect(await authenticate(on, "sk-cached", NOW)).toEqual({ tenantId: "t", keyId: "k" });
    expect(await authenticate(on, "sk-cached", NOW)).toEqual({ tenantId: "t", keyId: "k" });
    const off = await publicationWith("sk-cached", true);
    await expect(authenticate(off, "sk-cached", NOW)).rejects.toMatchObject({ code: "invalid_api_key" });
  });

  it("refuses a missing or unknown key with its own code", async () => {
    const pub = await publicationWith("sk-known", false);
    await expect(authenticate(pub, undefined, NOW)).rejects.toMatchObject({ code: "missing_api_key" });
    await expect(authenticate(pub, "sk-unknown", NOW)).rejects.toMatchObject({ code: "invalid_api_key" });
    await expect(authenticate(pub, "sk-unknown", NOW)).rejects.toMatchObject({ code: "invalid_api_key" });
  });
});

describe("authenticate: a key's lifecycle as the compiled publication holds it", () => {
  const compiled = async () => {
    const key = (id: string, extra: Record<string, unknown>) => ({ id, entrypoints: ["*"], ...extra });
    const doc = {
      version: 1,
      revision: "keys",
      tenants: [
        {
          id: "acme",
          teams: [{ id: "ml", projects: [{ id: "bot" }] }],
          apiKeys: [
            key("expiring", { sha256: await sha256Hex("sk-expiring"), expiresAt: "2026-06-01T12:00:00Z" }),
            key("revoked", { sha256: await sha256Hex("sk-revoked"), revokedAt: "2026-05-01T00:00:00Z" }),
            key("rotated", {
              sha256: await sha256Hex("sk-rotated-3"),
              chargeTo: "ml/bot",
              // Two rotations inside each other's grace: both earlier values still count, each to its own end.
              previous: [
                { sha256: await sha256Hex("sk-rotated-1"), until: "2026-06-01T12:00:00Z" },
                { sha256: await sha256Hex("sk-rotated-2"), until: "2026-06-02T00:00:00Z" },
              ],
            }),
          ],
        },
      ],
      entrypoints: [{ name: "chat", default: [["m"]] }],
      models: [{ id: "m", activeRevision: 1, revisions: [{ revision: 1, pool: "p" }] }],
    };
    return compilePublication(publicationSchema.parse(doc));
  };

  it("refuses a key from its expiresAt on, and a revoked key always", async () => {
    const pub = await compiled();
    expect(await authenticate(pub, "sk-expiring", NOW - 1)).toEqual({ tenantId: "acme", keyId: "expiring" });
    await expect(authenticate(pub, "sk-expiring", NOW)).rejects.toMatchObject({ code: "invalid_api_key", message: "This API key has expired." });
    await expect(authenticate(pub, "sk-revoked", Date.parse("2026-01-01T00:00:00Z"))).rejects.toMatchObject({ code: "invalid_api_key", message: "Incorrect API key provided." });
  });

  it("accepts every value of a rotated key as the same principal until that value's grace ends, the current one after", async () => {
    const pub = await compiled();
    const principal = { tenantId: "acme", keyId: "rotated", chargeTo: "ml/bot" };
    for (const k of ["sk-rotated-1", "sk-rotated-2", "sk-rotated-3"]) expect(await authenticate(pub, k, NOW - 1)).toEqual(principal);
    await expect(authenticate(pub, "sk-rotated-1", NOW)).rejects.toMatchObject({ code: "invalid_api_key" });
    expect(await authenticate(pub, "sk-rotated-2", NOW)).toEqual(principal);
    const later = Date.parse("2026-06-02T00:00:00Z");
    await expect(authenticate(pub, "sk-rotated-2", later)).rejects.toMatchObject({ code: "invalid_api_key" });
    expect(await authenticate(pub, "sk-rotated-3", later + 365 * 86_400_000)).toEqual(principal);
  });
});
