/**
 * A fake Google OAuth 2.0 token endpoint (`POST /token`) for service accounts: the JWT-bearer
 * grant, whose assertion must be RS256-signed by a service account the simulator knows (its
 * public key given at start), issued by that account's email, addressed to this endpoint and
 * valid for at most an hour. It answers `{ access_token, expires_in, token_type }`, and Vertex
 * routes accept the tokens it issued until they expire or are revoked (`DELETE /__sim/google-token`;
 * `POST /__sim/reset` keeps them, as it keeps Entra's, so a gateway's cached token outlives a test's
 * reset). Knobs (`PUT /__sim/google-token`): fail every grant with a status, or issue short-lived
 * tokens.
 */

import { decodeJwt, importSPKI, jwtVerify } from "jose";
import type { IncomingMessage } from "node:http";
import { randomUUID } from "node:crypto";

/** The grant type of a signed JWT assertion (RFC 7523). */
export const JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/** The token endpoint's path. */
export const TOKEN_PATH = "/token";

/** What the token endpoint answers: a status and a JSON body. */
export interface TokenAnswer {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

/** Knobs of the token endpoint. */
export interface TokenKnobs {
  /** Answer every grant with this status (an OAuth error body), e.g. 503 or 400. */
  readonly status?: number | undefined;
  /** Lifetime of issued tokens, in seconds (Google's is 3599). */
  readonly expiresIn: number;
}

const DEFAULT_KNOBS: TokenKnobs = { expiresIn: 3599 };

/** Service accounts, issued tokens and knobs of one simulator. */
export class GoogleTokens {
  readonly #keys = new Map<string, Promise<CryptoKey>>();
  readonly #issued = new Map<string, number>();
  knobs: TokenKnobs = DEFAULT_KNOBS;
  /** Grants answered with a token, for tests. */
  granted = 0;

  /** `accounts`: client email → the account's public key (SPKI PEM). */
  constructor(accounts: Readonly<Record<string, string>> = {}) {
    for (const [email, pem] of Object.entries(accounts)) this.#keys.set(email, importSPKI(pem, "RS256"));
  }

  /** Whether any service account is configured (then Vertex routes require a token). */
  get enabled(): boolean {
    return this.#keys.size > 0;
  }

  /** Whether `token` was issued here and has not expired. */
  valid(token: string): boolean {
    const until = this.#issued.get(token);
    return until !== undefined && until > Date.now();
  }

  /** Sets the knobs from a JSON object (`status`, `expires-in`); throws a message on a bad one. */
  configure(settings: Record<string, unknown>): TokenKnobs {
    const status = settings["status"];
    const expiresIn = settings["expires-in"] ?? DEFAULT_KNOBS.expiresIn;
    if (status !== undefined && status !== null && (typeof status !== "number" || !Number.isInteger(status) || status < 400 || status > 599)) throw new Error("status must be an HTTP error status (400-599)");
    if (typeof expiresIn !== "number" || !Number.isInteger(expiresIn) || expiresIn < 1) throw new Error("expires-in must be a positive whole number of seconds");
    this.knobs = { status: typeof status === "number" ? status : undefined, expiresIn };
    return this.knobs;
  }

  /** Back to the default knobs and no grants counted; issued tokens stay valid. */
  reset(): void {
    this.knobs = DEFAULT_KNOBS;
    this.granted = 0;
  }

  /** Forgets every token issued (as if revoked): Vertex refuses them from now on. Returns how many. */
  revoke(): number {
    const n = this.#issued.size;
    this.#issued.clear();
    return n;
  }

  /** Answers one token request (`body`: the form-encoded body's text). */
  async grant(req: IncomingMessage, body: string): Promise<TokenAnswer> {
    const refuse = (status: number, error: string, description: string): TokenAnswer => ({ status, body: { error, error_description: description } });
    if (this.knobs.status !== undefined) return refuse(this.knobs.status, this.knobs.status >= 500 ? "internal_failure" : "invalid_grant", "Simulated token endpoint failure.");
    const form = new URLSearchParams(body);
    if (form.get("grant_type") !== JWT_BEARER) return refuse(400, "unsupported_grant_type", "Invalid grant_type.");
    const assertion = form.get("assertion");
    if (assertion === null) return refuse(400, "invalid_request", "Missing required parameter: assertion");
    let iss: string | undefined;
    try {
      iss = decodeJwt(assertion).iss;
    } catch {
      return refuse(400, "invalid_grant", "Invalid JWT: Token must be a short-lived token and in a reasonable timeframe.");
    }
    const key = iss === undefined ? undefined : this.#keys.get(iss);
    if (key === undefined) return refuse(400, "invalid_grant", "Invalid grant: account not found");
    const audience = `http://${req.headers.host ?? ""}${TOKEN_PATH}`;
    try {
      const { payload } = await jwtVerify(assertion, await key, { algorithms: ["RS256"], issuer: iss, audience, requiredClaims: ["iat", "exp", "scope"] });
      if ((payload.exp ?? 0) - (payload.iat ?? 0) > 3600) return refuse(400, "invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.");
    } catch {
      return refuse(400, "invalid_grant", "Invalid JWT Signature.");
    }
    const token = `ya29.sim-${randomUUID()}`;
    this.#issued.set(token, Date.now() + this.knobs.expiresIn * 1000);
    this.granted++;
    return { status: 200, body: { access_token: token, expires_in: this.knobs.expiresIn, token_type: "Bearer" } };
  }
}
