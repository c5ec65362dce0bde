import { describe, expect, it } from "vitest";
import { authenticate } from "../../../src/auth/authenticate.ts";
import { sha256Hex } from "../../../src/digest/canonical-digest.ts";
import type { CompiledPublication } from "../../../src/publication/compile-publication.ts";

/** A publication of one key, as far as the authenticate phase reads it. */
const publicationWith = async (key: string, disabled: boolean) =>
  ({ keys: new Map([[await sha256Hex(key), { principal: { tenantId: "t", keyId: "k" }, disabled }]]) }) as unknown as CompiledPublication;

describe("authenticate", () => {
  it("finds a key by its digest, again from the isolate's cache, and a publication that disables it still refuses it", async () => {
    const on = await publicationWith("sk-cached", false);
    expect(await authenticate(on, "sk-cached")).toEqual({ tenantId: "t", keyId: "k" });
    expect(await authenticate(on, "sk-cached")).toEqual({ tenantId: "t", keyId: "k" });
    const off = await publicationWith("sk-cached", true);
    await expect(authenticate(off, "sk-cached")).rejects.toMatchObject({ code: "invalid_api_key" });
  });

  it("refuses a missing or unknown key with its own code", async () => {
    const pub = await publicationWith("sk-known", false);
    await expect(authenticate(pub, undefined)).rejects.toMatchObject({ code: "missing_api_key" });
    await expect(authenticate(pub, "sk-unknown")).rejects.toMatchObject({ code: "invalid_api_key" });
    await expect(authenticate(pub, "sk-unknown")).rejects.toMatchObject({ code: "invalid_api_key" });
  });
});
