import { fromBase64url, toBase64url } from "./base64url.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * A JSON value sealed with AES-GCM under `key` — `<iv>.<ciphertext>` in base64url, with `aad`
 * authenticated beside it — for the tokens the gateway hands out and reads back (MCP session ids,
 * approval task handles): their readers can neither read nor forge them.
 */
export async function sealJson(key: CryptoKey, aad: string, value: unknown): Promise<string> {
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const sealed = new Uint8Array(await crypto.subtle.encrypt({ name: "AES-GCM", iv, additionalData: encoder.encode(aad) }, key, encoder.encode(JSON.stringify(value))));
  return `${toBase64url(iv)}.${toBase64url(sealed)}`;
}

/**
 * The value {@link sealJson} sealed, from its two parts: `malformed` when they are not a sealed
 * value's shape, `tampered` when they do not open under `key` and `aad` (or are not JSON).
 */
export async function openJson<T>(key: CryptoKey, aad: string, ivText: string, sealedText: string): Promise<{ readonly ok: true; readonly value: T } | { readonly ok: false; readonly why: "malformed" | "tampered" }> {
  const iv = fromBase64url(ivText);
  const sealed = fromBase64url(sealedText);
  if (!iv || iv.length !== 12 || !sealed) return { ok: false, why: "malformed" };
  try {
    const plain = await crypto.subtle.decrypt({ name: "AES-GCM", iv, additionalData: encoder.encode(aad) }, key, sealed);
    return { ok: true, value: JSON.parse(decoder.decode(plain)) as T };
  } catch {
    return { ok: false, why: "tampered" };
  }
}

/**
 * A sealed token as the gateway hands it out: `<version>.<iv>.<ciphertext>`, the version
 * authenticated with the value (task handles, agent task handles, push relay addresses).
 */
export async function sealToken(key: CryptoKey, version: string, value: unknown): Promise<string> {
  return `${version}.${await sealJson(key, version, value)}`;
}

/**
 * The value of a token {@link sealToken} made under `version`: `malformed` when the text is longer
 * than `maxChars` (not read at all) or not of the token's shape and version, `tampered` when it
 * does not open.
 */
export async function openToken<T>(key: CryptoKey, version: string, text: string, maxChars: number): Promise<{ readonly ok: true; readonly value: T } | { readonly ok: false; readonly why: "malformed" | "tampered" }> {
  const parts = text.length <= maxChars ? text.split(".") : [];
  if (parts.length !== 3 || parts[0] !== version) return { ok: false, why: "malformed" };
  return openJson<T>(key, version, parts[1]!, parts[2]!);
}
