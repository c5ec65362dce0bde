import type { Clock } from "../../deps/clock.ts";
import { checkEgress, type EgressPolicy } from "../../egress/egress-guard.ts";
import { entraTokenUrl } from "../../config/backends-schema.ts";
import { GatewayError } from "../../errors/gateway-error.ts";
import { requestToken } from "./oauth-token-request.ts";
import type { TokenSource } from "./token-cache.ts";

/** An Entra ID application's client-credentials grant, as a backend's `credential` names it. */
export interface EntraCredential {
  readonly tenantId: string;
  readonly clientId: string;
  readonly tokenUrl?: string | undefined;
  readonly scope: string;
}


/** What minting needs from its surroundings. */
export interface EntraDeps {
  readonly fetch: typeof fetch;
  readonly clock: Clock;
  /** The egress guard's policy: the token endpoint is an outbound target like a backend. */
  readonly egress?: EgressPolicy | undefined;
}

/**
 * A token source for an Entra ID application: `POST {tokenUrl}` with
 * `grant_type=client_credentials`, the client id and secret and the scope, answered with
 * `{access_token, expires_in}` (https://learn.microsoft.com/entra/identity-platform/v2-oauth2-client-creds-grant-flow).
 * The key names the application and a short fingerprint of its secret, so a rotated secret mints
 * anew while the key itself reveals nothing usable.
 */
export function entraTokenSource(c: EntraCredential, secret: string, deps: EntraDeps): TokenSource {
  const url = entraTokenUrl(c);
  return {
    key: `entra ${url} ${c.clientId} ${c.scope} ${fingerprint(secret)}`,
    async mint(signal) {
      // Checked at send time: the address leaving now is the one the guard judges.
      if (deps.egress !== undefined) {
        const verdict = checkEgress(url, deps.egress);
        if (!verdict.ok) throw new GatewayError("internal_error", "The gateway refused to call the token endpoint its configuration names.", { cause: `egress refused (${verdict.refusal.code}): ${verdict.refusal.message}` });
      }
      const form = new URLSearchParams({ grant_type: "client_credentials", client_id: c.clientId, client_secret: secret, scope: c.scope });
      return requestToken(deps.fetch, url, form, signal, deps.clock);
    },
  };
}

/** 32-bit FNV-1a of the secret, hex: tells two secrets apart, too short to stand for one. */
function fingerprint(s: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return (h >>> 0).toString(16).padStart(8, "0");
}
