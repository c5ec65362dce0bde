import { deriveSecretKey, MIN_SECRET_LENGTH } from "../digest/derived-key.ts";

/**
 * A key derived from the approvals' state secret (`governance.approvals.stateSecret`) by
 * HKDF-SHA-256, one per use (`info`), so the requestState's HMAC key and the task handles' AES
 * key never coincide even though one secret is configured.
 */
export async function deriveApprovalKey(secret: string, info: string, algorithm: Parameters<typeof deriveSecretKey>[3], usages: Parameters<typeof deriveSecretKey>[4]): Promise<CryptoKey> {
  if (secret.length < MIN_SECRET_LENGTH) throw new RangeError(`the approval state secret must be at least ${MIN_SECRET_LENGTH} characters`);
  return deriveSecretKey(secret, "sluice approvals", info, algorithm, usages);
}
