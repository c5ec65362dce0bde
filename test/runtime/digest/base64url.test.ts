import { describe, expect, it } from "vitest";
import { fromBase64url, toBase64url } from "../../../src/digest/base64url.ts";

describe("base64url", () => {
  it("round-trips bytes without padding, in the URL-safe alphabet", () => {
    for (let n = 0; n < 40; n++) {
      const bytes = Uint8Array.from({ length: n }, (_, i) => (i * 97 + n * 13) % 256);
      const text = toBase64url(bytes);
      expect(text).toMatch(/^[A-Za-z0-9_-]*$/);
      expect(fromBase64url(text)).toEqual(bytes);
    }
    expect(toBase64url(new Uint8Array([0xfb, 0xff]).buffer)).toBe("-_8");
  });

  it("refuses what is not base64url", () => {
    for (const bad of ["a+b", "a/b", "ab==", "a b", "é"]) expect(fromBase64url(bad), bad).toBeUndefined();
  });
});
