import type { Clock } from "../../deps/clock.ts";
import { checkEgress, type EgressPolicy } from "../../egress/egress-guard.ts";
import { entraTokenUrl } from "../../config/backends-schema.ts";
import { GatewayError } from "../../errors/gateway-error.ts";
import { decodeUtf8Strict, readBounded } from "../../io/bounded-read.ts";
import type { MintedToken, TokenSource } from "./token-cache.ts";

/** A token answer larger than this is refused: real ones are a few KiB. */
const MAX_TOKEN_RESPONSE_BYTES = 64 * 1024;

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
      let res: Response;
      try {
        // Never redirected: the secret goes only to the address the guard checked.
        res = await deps.fetch(url, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" }, body: form.toString(), redirect: "manual", signal });
      } catch (err) {
        throw new GatewayError("upstream_unreachable", "The model provider's token service could not be reached.", { cause: { tokenEndpoint: origin(url), error: err instanceof Error ? err.name : "unknown" } });
      }
      const json = await readJson(res);
      if (res.status !== 200) {
        // Only Entra's error code is kept (invalid_client, unauthorized_client…): its description can echo request fields.
        const code = typeof json?.["error"] === "string" ? json["error"].slice(0, 64) : undefined;
        const cause = { tokenEndpoint: origin(url), status: res.status, error: code };
        if (res.status >= 500 || res.status === 429) throw new GatewayError("upstream_unreachable", "The model provider's token service is unavailable.", { cause });
        throw new GatewayError("upstream_error", "The model provider's token service refused the gateway's credential.", { cause });
      }
      const token = json?.["access_token"];
      const expiresIn = Number(json?.["expires_in"]);
      if (typeof token !== "string" || token === "" || !Number.isFinite(expiresIn) || expiresIn <= 0) {
        throw new GatewayError("upstream_protocol_error", "The model provider's token service returned an unreadable answer.", { cause: { tokenEndpoint: origin(url), status: res.status } });
      }
      return { token, expiresAt: deps.clock.now() + expiresIn * 1000 } satisfies MintedToken;
    },
  };
}

/** The token answer as JSON, or undefined when it is not a JSON object (never thrown: the status decides). */
async function readJson(res: Response): Promise<Record<string, unknown> | undefined> {
  if (!res.body) return undefined;
  try {
    const read = await readBounded(res.body, { maxBytes: MAX_TOKEN_RESPONSE_BYTES });
    if (read.overflowed) return undefined;
    const v: unknown = JSON.parse(decodeUtf8Strict(read.bytes));
    return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The endpoint's origin and path, for causes (never a query). */
function origin(url: string): string {
  const u = new URL(url);
  return `${u.origin}${u.pathname}`;
}

/** 32-bit FNV-1a of the secret, hex: tells two secrets apart, too short to stand for one. */
function fingerprint(s: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return (h >>> 0).toString(16).padStart(8, "0");
}
