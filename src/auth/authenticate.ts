import { sha256Hex } from "../digest/canonical-digest.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { CompiledPublication } from "../publication/compile-publication.ts";
import type { Principal } from "../publication/principal.ts";

/** Most key digests an isolate remembers. */
const DIGEST_CACHE_SIZE = 1_024;

/**
 * Digests of keys that matched a publication entry, by the presented key. A key's SHA-256 is the
 * same under every publication, and hashing is a visible part of a request's cost; only keys that
 * matched are kept, so a caller spraying random keys cannot fill the cache.
 */
const digests = new Map<string, string>();

async function digestOf(presented: string): Promise<{ digest: string; cached: boolean }> {
  const hit = digests.get(presented);
  return hit === undefined ? { digest: await sha256Hex(presented), cached: false } : { digest: hit, cached: true };
}

/**
 * The authenticate phase: a presented API key to a Principal. Keys are looked up by their SHA-256
 * in the compiled publication, so the config holds no usable secret and the comparison is on a
 * digest, not the key text.
 *
 * A key's `expiresAt`, and a rotated-out value's grace end, are checked against `now` here, not
 * by publishing: a key stops working at its instant in every isolate at once.
 *
 * @throws GatewayError missing_api_key / invalid_api_key.
 */
export async function authenticate(publication: CompiledPublication, presented: string | undefined, now: number): Promise<Principal> {
  if (presented === undefined || presented === "") {
    throw new GatewayError("missing_api_key", "You didn't provide an API key. Send it as 'Authorization: Bearer <key>' or 'x-api-key: <key>'.");
  }
  const { digest, cached } = await digestOf(presented);
  const entry = publication.keys.get(digest);
  if (!entry || entry.disabled) throw new GatewayError("invalid_api_key", "Incorrect API key provided.");
  if (entry.notAfter !== undefined && now >= entry.notAfter) throw new GatewayError("invalid_api_key", "This API key has expired.");
  if (!cached) {
    // Oldest first out: a Map iterates in insertion order.
    if (digests.size >= DIGEST_CACHE_SIZE) digests.delete(digests.keys().next().value!);
    digests.set(presented, digest);
  }
  return entry.principal;
}
