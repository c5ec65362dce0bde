const enc = new TextEncoder();

type DerivedAlgorithm = Parameters<SubtleCrypto["deriveKey"]>[2];
type Usages = Parameters<SubtleCrypto["deriveKey"]>[4];

/** The shortest configured secret a key is derived from: below it a secret is guessable offline. */
export const MIN_SECRET_LENGTH = 16;

/**
 * A key derived from a configured secret by HKDF-SHA-256: `salt` names the feature the secret is
 * configured for, `info` the one use, so the keys of different uses never coincide even when one
 * secret serves several.
 */
export async function deriveSecretKey(secret: string, salt: string, info: string, algorithm: DerivedAlgorithm, usages: Usages): Promise<CryptoKey> {
  const base = await crypto.subtle.importKey("raw", enc.encode(secret), "HKDF", false, ["deriveKey"]);
  return crypto.subtle.deriveKey({ name: "HKDF", hash: "SHA-256", salt: enc.encode(salt), info: enc.encode(info) }, base, algorithm, false, usages);
}
