import { decodeJwt, decodeProtectedHeader, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from "jose";
import type { OAuthConfig, OAuthIssuerConfig } from "../config/oauth-schema.ts";
import { isChargeTo } from "../config/publication-schema.ts";
import type { Clock } from "../deps/clock.ts";
import type { EgressPolicy } from "../egress/egress-guard.ts";
import { GatewayError, type BearerChallenge } from "../errors/gateway-error.ts";
import type { Principal } from "../publication/principal.ts";
import { JwksCache } from "./jwks-cache.ts";

/** What the verifier needs besides its configuration. */
export interface OAuthVerifierDeps {
  /**
   * Tenant ids the publication configures, each with the charge targets it has (`team`,
   * `team/project`; see chargeTargetsOf): a token mapped to another tenant, or charged to a team
   * or project its tenant does not have, is refused.
   */
  readonly tenants: ReadonlyMap<string, ReadonlySet<string>>;
  readonly egress: EgressPolicy;
  readonly fetch: typeof fetch;
  readonly clock: Clock;
  readonly onError?: ((event: Readonly<Record<string, unknown>>) => void) | undefined;
}

/** A verified token: who it is for, and the scopes it grants. */
export interface VerifiedToken {
  readonly principal: Principal;
  readonly scopes: ReadonlySet<string>;
  readonly issuer: string;
}

/** RFC 9728 protected resource metadata, as served at the well-known URLs. */
export interface ProtectedResourceMetadata {
  readonly resource: string;
  readonly authorization_servers: readonly string[];
  readonly scopes_supported?: readonly string[];
  readonly bearer_methods_supported: readonly ["header"];
  readonly resource_name: string;
}

/** Longest subject accepted: it becomes a key id in audit lines. */
const MAX_SUBJECT = 256;

/** The three dot-separated base64url parts of a compact JWS: what an API key never looks like. */
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

interface Issuer {
  readonly config: OAuthIssuerConfig;
  readonly audience: string;
  readonly jwks: JwksCache;
}

/**
 * The gateway's OAuth 2.1 resource server, the token link of the authenticator chain
 * (authenticator-chain.ts): verifies a bearer JWT against the configured issuers and maps it to
 * the same principal model as an API key, on every endpoint.
 *
 * A token is accepted when its `iss` is a configured issuer, its header's `alg` is one the issuer
 * is pinned to, its signature verifies with a key of that issuer's JWKS, its `aud` names this
 * gateway's resource (RFC 8707; the issuer's `audience` when configured), it has an `exp` that has
 * not passed and no `nbf` still to come (both within the configured clock skew), and its subject
 * and tenant map to a configured tenant. Then the required scopes are checked (`insufficient_scope`).
 *
 * The principal is `{ tenantId, keyId: "<issuer name>:<subject>", chargeTo, entrypoints }`. The colon keeps the
 * two kinds of key ids apart: an API key id never has one, so no token can pose as an API key in a
 * policy. `chargeTo` is the issuer's fixed one or its `claims.chargeTo` claim, and must name a team
 * (or project) of the token's tenant: budgets and task rules then hold the caller to it as they
 * hold an API key to its configured `chargeTo`. `entrypoints` are what its scopes grant on the model
 * API (`scopeEntrypoints`), as an API key's `entrypoints`.
 */
export class OAuthVerifier {
  readonly #config: OAuthConfig;
  readonly #deps: OAuthVerifierDeps;
  readonly #issuers: ReadonlyMap<string, Issuer>;
  /** The protected resource metadata URL (RFC 9728 section 3.1: the resource's path after the well-known prefix). */
  readonly metadataUrl: string;

  /** `shared`: a verifier whose issuers (and their JWKS caches) this one uses too. */
  constructor(config: OAuthConfig, deps: OAuthVerifierDeps, shared?: OAuthVerifier) {
    this.#config = config;
    this.#deps = deps;
    this.#issuers = shared !== undefined ? shared.#issuers : new Map(
      config.issuers.map((i) => [
        i.issuer,
        {
          config: i,
          audience: i.audience ?? config.resource,
          jwks: new JwksCache({
            url: i.jwksUrl,
            egress: deps.egress,
            fetch: deps.fetch,
            clock: deps.clock,
            ttlMs: config.jwksCacheTtlMs,
            minRefetchMs: config.jwksMinRefetchMs,
            timeoutMs: config.jwksTimeoutMs,
            onError: (error) => deps.onError?.({ kind: "jwks_fetch_failed", issuer: i.name, error }),
          }),
        },
      ]),
    );
    this.metadataUrl = protectedResourceMetadataUrl(config.resource);
  }

  /**
   * The same verifier for another publication revision's tenants. The issuers' JWKS caches are
   * shared: the signing keys depend on the bootstrap config only, so a new revision neither
   * refetches them nor forgets a key set it holds.
   */
  withTenants(tenants: ReadonlyMap<string, ReadonlySet<string>>): OAuthVerifier {
    return new OAuthVerifier(this.#config, { ...this.#deps, tenants }, this);
  }

  /**
   * Whether a presented bearer is to be verified as a token rather than looked up as an API key:
   * a compact JWS whose header is JSON naming an algorithm. An API key that merely has two dots
   * stays an API key.
   */
  claims(bearer: string): boolean {
    if (!COMPACT_JWS.test(bearer)) return false;
    try {
      return typeof decodeProtectedHeader(bearer).alg === "string";
    } catch {
      return false;
    }
  }

  /** The challenge of a 401 (no credential, or one that is not accepted). */
  challenge(error?: "invalid_token", errorDescription?: string): BearerChallenge {
    return { error, errorDescription, scope: this.#config.requiredScopes.join(" ") || undefined, resourceMetadata: this.metadataUrl };
  }

  /** The RFC 9728 document for this resource. */
  metadata(): ProtectedResourceMetadata {
    const scopes = this.#config.scopesSupported ?? this.#config.requiredScopes;
    return {
      resource: this.#config.resource,
      authorization_servers: this.#config.issuers.map((i) => i.issuer),
      ...(scopes.length > 0 ? { scopes_supported: scopes } : {}),
      bearer_methods_supported: ["header"],
      resource_name: "Sluice MCP gateway",
    };
  }

  /**
   * Verifies a token and maps it to a principal, then checks the required scopes.
   *
   * @throws GatewayError invalid_token (401), insufficient_scope (403), jwks_unavailable (503);
   *   each with the Bearer challenge the HTTP adapter renders; tool_not_allowed (403, no
   *   challenge) for a token charged to a team or project its tenant does not have.
   */
  async authenticate(token: string): Promise<VerifiedToken> {
    const verified = await this.verify(token);
    const missing = this.#config.requiredScopes.filter((s) => !verified.scopes.has(s));
    if (missing.length > 0) {
      throw new GatewayError("insufficient_scope", `The access token lacks the scope${missing.length > 1 ? "s" : ""} ${missing.join(", ")} this endpoint requires.`, {
        challenge: { error: "insufficient_scope", errorDescription: "The access token lacks a required scope", scope: this.#config.requiredScopes.join(" "), resourceMetadata: this.metadataUrl },
      });
    }
    return verified;
  }

  /** Verifies a token and maps it to a principal; scopes are reported, not checked. */
  async verify(token: string): Promise<VerifiedToken> {
    let iss: unknown;
    let alg: unknown;
    try {
      alg = decodeProtectedHeader(token).alg;
      iss = decodeJwt(token).iss;
    } catch {
      throw this.#invalid("The access token is not a well-formed JWT.");
    }
    const issuer = typeof iss === "string" ? this.#issuers.get(iss) : undefined;
    if (!issuer) throw this.#invalid("The access token's issuer is not accepted by this gateway.");
    if (typeof alg !== "string" || !(issuer.config.algorithms as readonly string[]).includes(alg)) throw this.#invalid("The access token's signature algorithm is not accepted.");
    const check = (keys: JWTVerifyGetKey) =>
      jwtVerify(token, keys, {
        issuer: issuer.config.issuer,
        audience: issuer.audience,
        algorithms: issuer.config.algorithms,
        clockTolerance: this.#config.clockSkewSeconds,
        currentDate: new Date(this.#deps.clock.now()),
        requiredClaims: ["exp"],
      });
    let payload: JWTPayload;
    try {
      payload = (await check(await issuer.jwks.keys())).payload;
    } catch (err) {
      if (!isJoseError(err, "ERR_JWKS_NO_MATCHING_KEY")) throw this.#classify(err);
      // The issuer may have rotated its keys since the set was fetched: one refetch, rate-limited.
      const fresh = await issuer.jwks.refresh();
      if (!fresh) throw this.#invalid("The access token is signed with a key the issuer does not publish.");
      try {
        payload = (await check(fresh)).payload;
      } catch (again) {
        throw isJoseError(again, "ERR_JWKS_NO_MATCHING_KEY") ? this.#invalid("The access token is signed with a key the issuer does not publish.") : this.#classify(again);
      }
    }
    const scopes = scopesOf(payload[issuer.config.claims.scope]);
    return { principal: { ...this.#principal(issuer.config, payload), entrypoints: this.#entrypoints(scopes) }, scopes, issuer: issuer.config.name };
  }

  /** The entrypoints a token's scopes grant on the model API (`scopeEntrypoints`): the union, `*` alone when any grants all. */
  #entrypoints(scopes: ReadonlySet<string>): readonly string[] {
    const granted = new Set<string>();
    for (const scope of scopes) for (const name of Object.hasOwn(this.#config.scopeEntrypoints, scope) ? this.#config.scopeEntrypoints[scope]! : []) granted.add(name);
    return granted.has("*") ? ["*"] : [...granted].sort();
  }

  #principal(issuer: OAuthIssuerConfig, payload: JWTPayload): Principal {
    const subject = payload[issuer.claims.subject];
    if (typeof subject !== "string" || subject === "" || subject.length > MAX_SUBJECT || !/^[\x21-\x7e]+$/.test(subject)) {
      throw this.#invalid(`The access token has no usable ${issuer.claims.subject} claim.`);
    }
    const tenant = issuer.tenant ?? payload[issuer.claims.tenant!];
    const targets = typeof tenant === "string" ? this.#deps.tenants.get(tenant) : undefined;
    if (typeof tenant !== "string" || !targets) throw this.#invalid("The access token's tenant is not configured on this gateway.");
    const keyId = `${issuer.name}:${subject}`;
    const chargeTo = this.#chargeTo(issuer, payload);
    if (chargeTo === undefined) return { tenantId: tenant, keyId };
    if (!targets.has(chargeTo)) {
      // A well-formed token the gateway will not serve: charging its tenant alone instead would let
      // it slip past its project's budget and task rules, so it is refused. Not invalid_token (a new
      // token from the same issuer would say the same) nor insufficient_scope (no scope helps): the
      // policy's 403, without a challenge, so no client tries a step-up that cannot succeed.
      throw new GatewayError("tool_not_allowed", `The access token charges ${chargeTo.includes("/") ? "project" : "team"} '${chargeTo}', which tenant '${tenant}' does not have; ask the gateway's operator to configure it, or get a token for a configured one.`);
    }
    return { tenantId: tenant, keyId, chargeTo };
  }

  /** The issuer's fixed `chargeTo`, or the value of its `claims.chargeTo` claim, checked for form only. */
  #chargeTo(issuer: OAuthIssuerConfig, payload: JWTPayload): string | undefined {
    if (issuer.chargeTo !== undefined) return issuer.chargeTo;
    const claim = issuer.claims.chargeTo;
    if (claim === undefined) return undefined;
    const value = payload[claim];
    // The claim is how the operator said this issuer's callers are charged: one without it is not
    // charged to the tenant alone by default, it is refused like a token without its tenant.
    if (value === undefined) throw this.#invalid(`The access token has no ${claim} claim: it must name the team or team/project its caller is charged to.`);
    if (!isChargeTo(value)) throw this.#invalid(`The access token's ${claim} claim must be a team id or team/project.`);
    return value;
  }

  /** jose's errors by their code (never their message) to the caller's words. */
  #classify(err: unknown): GatewayError {
    if (err instanceof GatewayError) return err;
    const code = (err as { code?: unknown } | null)?.code;
    const claim = (err as { claim?: unknown } | null)?.claim;
    switch (code) {
      case "ERR_JWT_EXPIRED":
        return this.#invalid("The access token has expired.");
      case "ERR_JWT_CLAIM_VALIDATION_FAILED":
        if (claim === "aud") return this.#invalid("The access token was not issued for this resource (audience).");
        if (claim === "nbf") return this.#invalid("The access token is not valid yet.");
        if (claim === "exp") return this.#invalid("The access token has no expiry.");
        if (claim === "iss") return this.#invalid("The access token's issuer is not accepted by this gateway.");
        return this.#invalid("A claim of the access token is not accepted.");
      case "ERR_JOSE_ALG_NOT_ALLOWED":
      case "ERR_JOSE_NOT_SUPPORTED":
        return this.#invalid("The access token's signature algorithm is not accepted.");
      case "ERR_JWS_SIGNATURE_VERIFICATION_FAILED":
        return this.#invalid("The access token's signature does not verify.");
      default:
        return this.#invalid("The access token is not valid.", err);
    }
  }

  #invalid(message: string, cause?: unknown): GatewayError {
    // The description in the header is fixed text: the message may name a claim, never the token.
    return new GatewayError("invalid_token", message, { cause, challenge: this.challenge("invalid_token", "The access token is not valid") });
  }
}

function isJoseError(err: unknown, code: string): boolean {
  return (err as { code?: unknown } | null)?.code === code;
}

/** Scopes from a `scope` string (RFC 9068, space-separated) or a list (`scp`, as some issuers send). */
function scopesOf(value: unknown): ReadonlySet<string> {
  if (typeof value === "string") return new Set(value.split(" ").filter((s) => s !== ""));
  if (Array.isArray(value)) return new Set(value.filter((s): s is string => typeof s === "string"));
  return new Set();
}

/**
 * The protected resource metadata URL of a resource (RFC 9728 section 3.1): the well-known path
 * inserted between the host and the resource's path, `https://h/mcp` →
 * `https://h/.well-known/oauth-protected-resource/mcp`.
 */
export function protectedResourceMetadataUrl(resource: string): string {
  const u = new URL(resource);
  const path = u.pathname === "/" ? "" : u.pathname.replace(/\/+$/, "");
  return `${u.origin}/.well-known/oauth-protected-resource${path}${u.search}`;
}
