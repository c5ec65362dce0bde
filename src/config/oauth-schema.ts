import { z } from "zod";
import { chargeToSchema, publicName } from "./publication-schema.ts";

/**
 * gateway.yaml `auth.oauth`: the gateway as an OAuth 2.1 resource server on every public endpoint
 * (docs/security.md, "Identity"; docs/mcp.md, "Authentication"). Beside the API keys, a JWT access
 * token from a configured issuer is accepted when it is signed by a key of the issuer's JWKS, names
 * this gateway's resource as its audience and is within its lifetime; the MCP endpoint also wants
 * the required scopes, the model API an entrypoint one of its scopes grants.
 */

/**
 * Signature algorithms an issuer may use: asymmetric only. `none` and the HMAC family are not
 * offered at all — a verifier that accepts HS256 with a public key as its secret can be fooled by
 * anyone who has read the JWKS.
 */
export const JWT_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"] as const;

/** An absolute http(s) URL without fragment: what RFC 9728 and RFC 8707 allow as a resource. */
const resourceUrl = z.url({ protocol: /^https?$/, message: "an http(s) URL" }).refine((u) => !u.includes("#"), { message: "a URL without a fragment" });

const claimName = z.string().regex(/^[A-Za-z0-9_:.\/-]{1,128}$/, "a claim name");

/** One accepted token issuer (an OAuth authorization server). */
export const oauthIssuerSchema = z
  .strictObject({
    /** Short name: the prefix of the key ids of its callers (`<name>:<subject>`), and in logs. */
    name: z.string().regex(/^[a-z0-9][a-z0-9-]{0,31}$/, "lower-case letters, digits and '-', at most 32"),
    /** The issuer identifier, compared exactly with the token's `iss`; advertised in `authorization_servers`. */
    issuer: z.url({ protocol: /^https?$/, message: "an http(s) URL" }),
    /** Where its signing keys are published; fetched by the gateway through the egress guard. */
    jwksUrl: z.url({ protocol: /^https?$/, message: "an http(s) URL" }),
    /** The audience its tokens must name; the resource (`auth.oauth.resource`) when unset. */
    audience: z.string().min(1).max(512).optional(),
    /** Signature algorithms accepted from it. */
    algorithms: z.array(z.enum(JWT_ALGORITHMS)).min(1),
    /** A fixed tenant for all of its callers; otherwise `claims.tenant` names the claim holding it. */
    tenant: z.string().regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, "a tenant id").optional(),
    /**
     * A fixed team (`team`) or project (`team/project`) of the fixed `tenant` that all of its
     * callers are charged to, as an API key's `chargeTo`; otherwise `claims.chargeTo` may name the
     * claim holding it. Neither: its callers are charged to their tenant alone.
     */
    chargeTo: chargeToSchema.optional(),
    claims: z
      .strictObject({
        /** The claim whose string value is the caller's tenant id (when `tenant` is not fixed). */
        tenant: claimName.optional(),
        /**
         * The claim whose string value is the team (`team`) or project (`team/project`) the caller is
         * charged to, in the grammar of an API key's `chargeTo`; every token must carry it, and it
         * must name a team (and project) of the token's tenant.
         */
        chargeTo: claimName.optional(),
        /** The claim that identifies the caller: the key-like id is `<name>:<value>`. */
        subject: claimName.default("sub"),
        /** The claim with the granted scopes: a space-separated string (RFC 9068) or a list of strings. */
        scope: claimName.default("scope"),
      })
      .prefault({}),
  })
  .refine((i) => (i.tenant === undefined) !== (i.claims.tenant === undefined), { message: "give exactly one of `tenant` (fixed) and `claims.tenant` (from the token)" })
  .refine((i) => i.chargeTo === undefined || i.claims.chargeTo === undefined, { message: "give at most one of `chargeTo` (fixed) and `claims.chargeTo` (from the token)", path: ["chargeTo"] })
  // A team is only a team of one tenant: a fixed one is checked against the fixed tenant at load.
  .refine((i) => i.chargeTo === undefined || i.tenant !== undefined, { message: "a fixed `chargeTo` needs a fixed `tenant`", path: ["chargeTo"] });

const scopeToken = z.string().regex(/^[\x21\x23-\x5b\x5d-\x7e]+$/, "a scope token (RFC 6749: visible ASCII without '\"' and '\\')");

/** gateway.yaml `auth.oauth`: the resource, its issuers, the scopes it requires and how JWKS are kept. */
export const oauthConfigSchema = z.strictObject({
  /**
   * This gateway as an OAuth protected resource (RFC 8707, RFC 9728), such as
   * `https://gateway.example.com/mcp` or the gateway's origin: the audience tokens must name on
   * every endpoint, and `resource` in the protected resource metadata.
   */
  resource: resourceUrl,
  issuers: z.array(oauthIssuerSchema).min(1),
  /** Scopes every token must carry to use the MCP endpoint; named in the challenges. */
  requiredScopes: z.array(scopeToken).default([]),
  /**
   * What a token may call on the model API: each scope to the entrypoints it grants (`*`: all), as
   * an API key's `entrypoints`. A token's grants are the union over its scopes; none: no model.
   */
  scopeEntrypoints: z.record(scopeToken, z.array(z.union([publicName, z.literal("*")])).min(1)).default({}),
  /** `scopes_supported` in the metadata; `requiredScopes` when unset. */
  scopesSupported: z.array(scopeToken).optional(),
  /** Tolerance for `exp` and `nbf` against the gateway's clock. */
  clockSkewSeconds: z.number().int().min(0).max(300).default(30),
  /** How long an isolate uses a fetched JWKS before fetching it again. */
  jwksCacheTtlMs: z.number().int().min(10_000).max(86_400_000).default(600_000),
  /** Least time between two fetches of one JWKS: bounds refetches for unknown key ids and retries after a failure. */
  jwksMinRefetchMs: z.number().int().min(1000).max(3_600_000).default(30_000),
  /** Time allowed for one JWKS fetch. */
  jwksTimeoutMs: z.number().int().min(100).max(60_000).default(5000),
});

/** Parsed `auth.oauth`. */
export type OAuthConfig = z.infer<typeof oauthConfigSchema>;
/** One parsed `auth.oauth.issuers[]` entry. */
export type OAuthIssuerConfig = z.infer<typeof oauthIssuerSchema>;
