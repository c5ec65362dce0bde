import { importPKCS8, SignJWT } from "jose";
import { z } from "zod";
import type { Clock } from "../../deps/clock.ts";
import { GOOGLE_CLOUD_PLATFORM_SCOPE } from "../../config/backends-schema.ts";
import { checkEgress, type EgressPolicy } from "../../egress/egress-guard.ts";
import { GatewayError } from "../../errors/gateway-error.ts";
import { requestToken } from "./oauth-token-request.ts";
import type { TokenSource } from "./token-cache.ts";

/*
 * A Google service account's access token, minted the way Google's OAuth 2.0 server-to-server
 * flow defines it: the account's key signs a JWT assertion (RS256; `iss` the account's email,
 * `aud` its token URI, `scope`, `iat`, `exp` at most an hour later), which is exchanged at the
 * token URI with the JWT-bearer grant for an `access_token` that expires in `expires_in` seconds.
 * jose does the signing on Web Crypto (it runs on workerd as on Node). Caching and refreshing the
 * token is the shared token cache's work, not this file's.
 */

/** The scope Vertex AI and the Gemini API accept for a service account's token. */
export const CLOUD_PLATFORM_SCOPE = GOOGLE_CLOUD_PLATFORM_SCOPE;

const DEFAULT_TOKEN_URI = "https://oauth2.googleapis.com/token";

/** The fields of a service-account key file (`type: service_account`) the flow reads. */
const serviceAccountSchema = z.looseObject({
  type: z.literal("service_account"),
  client_email: z.string().min(1),
  private_key: z.string().min(1),
  private_key_id: z.string().optional(),
  token_uri: z.url({ protocol: /^https?$/ }).optional(),
});

/** What a Google service-account token source needs. */
export interface GoogleServiceAccountOptions {
  /** The service-account key file's JSON text (the secret's value). */
  readonly credentials: string;
  readonly scope?: string | undefined;
  /** Overrides the key file's `token_uri` (tests; a private endpoint). */
  readonly tokenUri?: string | undefined;
  readonly fetch: typeof fetch;
  readonly clock: Clock;
  /** The egress guard's policy: the token URI must pass it like any provider address. */
  readonly egress?: EgressPolicy | undefined;
}

/** Assertions are valid for an hour, Google's maximum. */
const ASSERTION_SECONDS = 3600;

/** A credential problem of the gateway's own configuration: nothing reached the provider. */
function misconfigured(cause: string): GatewayError {
  return new GatewayError("internal_error", "The gateway could not obtain a provider credential.", { cause });
}

/**
 * A token source for one service account. The key file is read and its key imported once, when
 * first needed; a key file that cannot be read fails every mint with the same error, which names
 * the field, never its value.
 */
export function googleServiceAccountTokenSource(options: GoogleServiceAccountOptions): TokenSource {
  let json: unknown;
  try {
    json = JSON.parse(options.credentials);
  } catch {
    json = undefined;
  }
  const parsed = serviceAccountSchema.safeParse(json);
  const scope = options.scope ?? CLOUD_PLATFORM_SCOPE;
  const account = parsed.success ? parsed.data : undefined;
  const tokenUri = options.tokenUri ?? account?.token_uri ?? DEFAULT_TOKEN_URI;
  let key: Promise<CryptoKey> | undefined;

  return {
    // The key id (not secret) tells a rotated key from the old one, so a new key mints anew.
    key: `google-service-account:${account?.client_email ?? "unreadable"}:${account?.private_key_id ?? ""}:${scope}:${tokenUri}`,
    async mint(signal: AbortSignal) {
      if (account === undefined) {
        const field = parsed.error?.issues[0]?.path.join(".") || "the key file";
        throw misconfigured(`the service-account key file is not valid JSON with the expected fields (${field})`);
      }
      if (options.egress) {
        const verdict = checkEgress(tokenUri, options.egress);
        if (!verdict.ok) throw misconfigured(`egress refused the token URI (${verdict.refusal.code}): ${verdict.refusal.message}`);
      }
      key ??= importPKCS8(account.private_key, "RS256");
      let signing: CryptoKey;
      try {
        signing = await key;
      } catch {
        key = undefined;
        throw misconfigured("the service account's private_key is not a PKCS#8 RSA key");
      }
      const now = Math.floor(options.clock.now() / 1000);
      const header: { alg: "RS256"; typ: "JWT"; kid?: string } = { alg: "RS256", typ: "JWT" };
      if (account.private_key_id !== undefined) header.kid = account.private_key_id;
      const assertion = await new SignJWT({ scope })
        .setProtectedHeader(header)
        .setIssuer(account.client_email)
        .setAudience(tokenUri)
        .setIssuedAt(now)
        .setExpirationTime(now + ASSERTION_SECONDS)
        .sign(signing);
      const body = new URLSearchParams({ grant_type: "urn:ietf:params:oauth:grant-type:jwt-bearer", assertion });
      return requestToken(options.fetch, tokenUri, body, signal, options.clock);
    },
  };
}
