const enc = new TextEncoder();

type DerivedAlgorithm = Parameters<SubtleCrypto["deriveKey"]>[2];
type Usages = Parameters<SubtleCrypto["deriveKey"]>[4];

/**
 * A key derived from the approvals' state secret (`governance.approvals.stateSecret`) by
 * HKDF-SHA-256, one per use (`info`), so the requestState's HMAC key and the task handles' AES
 * key never coincide even though one secret is configured.
 */
export async function deriveApprovalKey(secret: string, info: string, algorithm: DerivedAlgorithm, usages: Usages): Promise<CryptoKey> {
  if (secret.length < 16) throw new RangeError("the approval state secret must be at least 16 characters");
  const base = await crypto.subtle.importKey("raw", enc.encode(secret), "HKDF", false, ["deriveKey"]);
  return crypto.subtle.deriveKey({ name: "HKDF", hash: "SHA-256", salt: enc.encode("sluice approvals"), info: enc.encode(info) }, base, algorithm, false, usages);
}
