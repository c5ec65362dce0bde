import { sha256Hex } from "../digest/canonical-digest.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { CompiledPublication } from "../publication/compile-publication.ts";
import type { Principal } from "../publication/principal.ts";

/**
 * The authenticate phase: a presented API key to a Principal. Keys are looked up by their SHA-256
 * in the compiled publication, so the config holds no usable secret and the comparison is on a
 * digest, not the key text.
 *
 * @throws GatewayError missing_api_key / invalid_api_key.
 */
export async function authenticate(publication: CompiledPublication, presented: string | undefined): Promise<Principal> {
  if (presented === undefined || presented === "") {
    throw new GatewayError("missing_api_key", "You didn't provide an API key. Send it as 'Authorization: Bearer <key>' or 'x-api-key: <key>'.");
  }
  const entry = publication.keys.get(await sha256Hex(presented));
  if (!entry || entry.disabled) throw new GatewayError("invalid_api_key", "Incorrect API key provided.");
  return entry.principal;
}
