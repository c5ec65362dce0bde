import type { PublicationConfig } from "../config/publication-schema.ts";
import { sha256Hex } from "../digest/canonical-digest.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { Principal } from "../engine/principal.ts";

/**
 * Resolves a presented API key to a Principal. Keys are looked up by their SHA-256, so the config
 * holds no usable secret and the comparison is on a digest, not the key text.
 */
export class ApiKeyAuthenticator {
  readonly #byHash: ReadonlyMap<string, { principal: Principal; disabled: boolean }>;

  constructor(publication: PublicationConfig) {
    const map = new Map<string, { principal: Principal; disabled: boolean }>();
    for (const t of publication.tenants) {
      for (const k of t.apiKeys) map.set(k.sha256, { principal: { tenantId: t.id, keyId: k.id }, disabled: k.disabled });
    }
    this.#byHash = map;
  }

  /** Throws GatewayError missing_api_key / invalid_api_key. */
  async authenticate(presented: string | undefined): Promise<Principal> {
    if (presented === undefined || presented === "") {
      throw new GatewayError("missing_api_key", "You didn't provide an API key. Send it as 'Authorization: Bearer <key>' or 'x-api-key: <key>'.");
    }
    const entry = this.#byHash.get(await sha256Hex(presented));
    if (!entry || entry.disabled) throw new GatewayError("invalid_api_key", "Incorrect API key provided.");
    return entry.principal;
  }
}
