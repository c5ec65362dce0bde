import type { Clock } from "../deps/clock.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { CompiledPublication } from "../publication/compile-publication.ts";
import type { Principal } from "../publication/principal.ts";
import { authenticate } from "./authenticate.ts";
import type { OAuthVerifier } from "./oauth-verifier.ts";

/** The credentials a request presented, as its adapter read them. */
export interface PresentedCredentials {
  /** `Authorization: Bearer`, else `x-api-key`: where an API key may come from. */
  readonly apiKey: string | undefined;
  /** `Authorization: Bearer` alone: where an access token may come from (RFC 6750 header method). */
  readonly bearer: string | undefined;
}

/** What the chain authenticates against: the publication's keys, and the token verifier when `auth.oauth` is configured. */
export interface AuthenticatorDeps {
  readonly publication: CompiledPublication;
  readonly oauth?: OAuthVerifier | undefined;
  /** What keys' expiry and rotation grace are checked against. */
  readonly clock: Clock;
}

/**
 * Which public surface asks. They differ only in their challenges and in what a token must carry
 * before anything else is looked at: the MCP endpoint wants `requiredScopes` and points clients at
 * its protected resource metadata (MCP clients discover their issuer from it); the model API
 * checks a token's grants per entrypoint in the authorize phase, as it does a key's.
 */
export type AuthEndpoint = "model" | "mcp";

/**
 * The authenticate phase of every public endpoint: one chain, API key then access token, into one
 * principal.
 *
 * A bearer in `Authorization` that has the shape of a JWT (three base64url parts, the first a JSON
 * header naming an algorithm) goes to the token verifier when `auth.oauth` is configured; anything
 * else — and `x-api-key` always — is looked up as an API key. An API key never has that shape (a
 * key with two dots whose first part is not such a header stays a key), and a token's key id
 * (`<issuer>:<subject>`) never names an API key, so neither can pose as the other.
 *
 * Refusals: an API key's as always (`missing_api_key`, `invalid_api_key`); a token's
 * `invalid_token` (401), `insufficient_scope` (403, MCP's `requiredScopes`), `jwks_unavailable`
 * (503), or `tool_not_allowed` (403) for a charge target its tenant lacks. Each 401 and 403 of a
 * token carries a Bearer challenge (RFC 6750 section 3); on the MCP endpoint with `auth.oauth`
 * every 401 does, with the resource metadata URL, so a client without a credential can find where
 * to get one.
 */
export async function authenticateCaller(deps: AuthenticatorDeps, presented: PresentedCredentials, endpoint: AuthEndpoint): Promise<Principal> {
  const oauth = deps.oauth;
  if (oauth === undefined) return await authenticate(deps.publication, presented.apiKey, deps.clock.now());
  if (presented.bearer !== undefined && oauth.claims(presented.bearer)) {
    if (endpoint === "mcp") return (await oauth.authenticate(presented.bearer)).principal;
    try {
      return (await oauth.verify(presented.bearer)).principal;
    } catch (err) {
      throw plainChallenge(err);
    }
  }
  try {
    return await authenticate(deps.publication, presented.apiKey, deps.clock.now());
  } catch (err) {
    // The model API answers a key's refusal as its protocol's own servers do: no challenge.
    if (endpoint === "model" || !(err instanceof GatewayError) || (err.code !== "missing_api_key" && err.code !== "invalid_api_key")) throw err;
    const challenge = err.code === "missing_api_key" ? oauth.challenge() : oauth.challenge("invalid_token", "The credential is not valid");
    const message = err.code === "missing_api_key" ? "No credential was sent: send an API key or an OAuth access token as 'Authorization: Bearer <credential>'." : err.message;
    throw new GatewayError(err.code, message, { challenge });
  }
}

/**
 * A token's refusal on the model API: the challenge keeps its error and description but not the
 * MCP resource's metadata URL or required scopes, which describe another endpoint.
 */
function plainChallenge(err: unknown): unknown {
  if (!(err instanceof GatewayError) || err.challenge === undefined) return err;
  return new GatewayError(err.code, err.message, { cause: err.cause, param: err.param, retryAfterSeconds: err.retryAfterSeconds, details: err.details, challenge: { error: err.challenge.error, errorDescription: err.challenge.errorDescription } });
}
