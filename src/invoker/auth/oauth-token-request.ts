import type { Clock } from "../../deps/clock.ts";
import { GatewayError } from "../../errors/gateway-error.ts";
import { decodeUtf8Strict, readBounded } from "../../io/bounded-read.ts";
import type { MintedToken } from "./token-cache.ts";

/** A token answer larger than this is refused: real ones are a few KiB. */
const MAX_TOKEN_RESPONSE_BYTES = 64 * 1024;

/**
 * One OAuth 2.0 token request (RFC 6749 §4.4 client credentials, RFC 7523 JWT bearer): the form
 * POSTed to the token endpoint, never redirected (the secret or assertion goes only to the address
 * the egress guard checked), and `{access_token, expires_in}` read back into a token with its
 * expiry. A 5xx or 429, or no answer, is `upstream_unreachable` (the endpoint is down); another
 * refusal is `upstream_auth_failed` (the credential was refused). Causes name the endpoint, its status
 * and OAuth's error code, never a description (it may echo the request) and never a secret.
 */
export async function requestToken(fetcher: typeof fetch, url: string, form: URLSearchParams, signal: AbortSignal, clock: Clock): Promise<MintedToken> {
  const tokenEndpoint = withoutQuery(url);
  let res: Response;
  try {
    res = await fetcher(url, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" }, body: form.toString(), redirect: "manual", signal });
  } catch (err) {
    throw new GatewayError("upstream_unreachable", "The model provider's token service could not be reached.", { cause: { tokenEndpoint, error: err instanceof Error ? err.name : "unknown" } });
  }
  const json = await readJson(res);
  if (res.status !== 200) {
    const error = typeof json?.["error"] === "string" ? json["error"].slice(0, 64) : undefined;
    const cause = { tokenEndpoint, status: res.status, error };
    if (res.status >= 500 || res.status === 429) throw new GatewayError("upstream_unreachable", "The model provider's token service is unavailable.", { cause });
    throw new GatewayError("upstream_auth_failed", "The model provider's token service refused the gateway's credential.", { cause });
  }
  const token = json?.["access_token"];
  const expiresIn = Number(json?.["expires_in"]);
  if (typeof token !== "string" || token === "" || !Number.isFinite(expiresIn) || expiresIn <= 0) {
    throw new GatewayError("upstream_protocol_error", "The model provider's token service returned an unreadable answer.", { cause: { tokenEndpoint, status: res.status } });
  }
  return { token, expiresAt: clock.now() + expiresIn * 1000 };
}

/** The token answer as a JSON object, or undefined (never thrown: the status decides). */
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
function withoutQuery(url: string): string {
  const u = new URL(url);
  return `${u.origin}${u.pathname}`;
}
