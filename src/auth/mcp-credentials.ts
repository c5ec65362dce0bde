import { GatewayError } from "../errors/gateway-error.ts";
import type { CompiledPublication } from "../publication/compile-publication.ts";
import type { Principal } from "../publication/principal.ts";
import { authenticate } from "./authenticate.ts";
import type { OAuthVerifier } from "./oauth-verifier.ts";

/** The credentials an MCP request presented, as the adapter read them. */
export interface McpCredentials {
  /** `Authorization: Bearer` or `x-api-key`: an API key (or, in the header, a token). */
  readonly apiKey: string | undefined;
  /** `Authorization: Bearer` alone: where an OAuth access token may come from (RFC 6750 header method). */
  readonly bearer: string | undefined;
}

/**
 * The MCP endpoint's authenticate phase: a bearer that is a JWT goes to the OAuth verifier when
 * one is configured, anything else is looked up as an API key. With OAuth configured, every 401
 * carries the Bearer challenge that points the client at the protected resource metadata, so an
 * MCP client without a credential can discover where to get one.
 */
export async function authenticateMcp(publication: CompiledPublication, oauth: OAuthVerifier | undefined, presented: McpCredentials): Promise<Principal> {
  if (oauth === undefined) return await authenticate(publication, presented.apiKey);
  if (presented.bearer !== undefined && oauth.claims(presented.bearer)) return (await oauth.authenticate(presented.bearer)).principal;
  try {
    return await authenticate(publication, presented.apiKey);
  } catch (err) {
    if (err instanceof GatewayError && (err.code === "missing_api_key" || err.code === "invalid_api_key")) {
      const challenge = err.code === "missing_api_key" ? oauth.challenge() : oauth.challenge("invalid_token", "The credential is not valid");
      const message = err.code === "missing_api_key" ? "No credential was sent: send an API key or an OAuth access token as 'Authorization: Bearer <credential>'." : err.message;
      throw new GatewayError(err.code, message, { challenge });
    }
    throw err;
  }
}
