import { importPKCS8, SignJWT } from "jose";
import { z } from "zod";
import type { Clock } from "../../deps/clock.ts";
import { GOOGLE_CLOUD_PLATFORM_SCOPE } from "../../config/backends-schema.ts";
import { checkEgress, type EgressPolicy } from "../../egress/egress-guard.ts";
import { GatewayError } from "../../errors/gateway-error.ts";
import { decodeUtf8Strict, readBounded } from "../../io/bounded-read.ts";
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

/** A token answer larger than this is refused: real ones are a few KiB. */
const MAX_TOKEN_RESPONSE_BYTES = 64 * 1024;

const DEFAULT_TOKEN_URI = "https://oauth2.googleapis.com/token";

/** The fields of a service-account key file (`type: service_account`) the flow reads. */
const serviceAccountSchema = z.looseObject({
  type: z.literal("service_account"),
  client_email: z.string().min(1),
  private_key: z.string().min(1),
  private_key_id: z.string().optional(),
  token_uri: z.url({ protocol: /^https?$/ }).optional(),
});

const tokenResponseSchema = z.looseObject({
  access_token: z.string().min(1),
  expires_in: z.number().positive(),
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
      let res: Response;
      try {
        // Never redirected: the assertion goes only to the address the guard checked.
        res = await options.fetch(tokenUri, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
          body: body.toString(),
          signal,
          redirect: "manual",
        });
      } catch (err) {
        if (signal.aborted) throw err;
        throw new GatewayError("upstream_unreachable", "The provider's token endpoint could not be reached.", { cause: { tokenEndpoint: endpoint(tokenUri), error: err instanceof Error ? err.name : "unknown" } });
      }
      const answer = await readJson(res);
      if (res.status !== 200) {
        // Only OAuth's error code is kept: the description may echo the assertion's claims.
        const error = typeof answer?.["error"] === "string" ? answer["error"].slice(0, 64) : "unreadable";
        const cause = { tokenEndpoint: endpoint(tokenUri), status: res.status, error };
        if (res.status >= 500 || res.status === 429) throw new GatewayError("upstream_unreachable", "The provider's token endpoint is unavailable.", { cause });
        throw new GatewayError("upstream_error", "The provider's token endpoint refused the gateway's credential.", { cause });
      }
      const token = tokenResponseSchema.safeParse(answer);
      if (!token.success) throw new GatewayError("upstream_protocol_error", "The provider's token endpoint returned an unreadable answer.", { cause: "no access_token and expires_in" });
      return { token: token.data.access_token, expiresAt: options.clock.now() + token.data.expires_in * 1000 };
    },
  };
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

/** The token endpoint's origin and path, for causes (never a query). */
function endpoint(url: string): string {
  const u = new URL(url);
  return `${u.origin}${u.pathname}`;
}
