import type { Clock } from "../deps/clock.ts";
import type { EgressPolicy } from "../egress/egress-guard.ts";
import type { BackendCodec } from "../protocol/codec.ts";
import type { HttpBackend } from "../snapshot/normalize.ts";
import { bearerTokenAuthorizer, sigV4Authorizer, type Authorizer } from "./auth/authorizer.ts";
import { entraTokenSource } from "./auth/entra.ts";
import { googleServiceAccountTokenSource } from "./auth/google-service-account.ts";
import { TokenCache, type TokenSource } from "./auth/token-cache.ts";
import type { CredentialSource } from "./credentials.ts";
import { credentialHeader } from "../egress/credential-header.ts";

/** What reading a backend's credentials needs. */
export interface AuthorizationDeps {
  readonly credentials: CredentialSource;
  readonly fetch: typeof fetch;
  readonly clock: Clock;
  readonly egress?: EgressPolicy | undefined;
  /** The isolate's token cache (the composition root's); absent, one of this module's. */
  readonly tokens?: TokenCache | undefined;
}

/** How a backend's requests are authorized: headers set now, and maybe an authorizer run just before sending. */
export type BackendAuthorization =
  | { readonly ok: true; readonly headers: Readonly<Record<string, string>>; readonly authorizer?: Authorizer | undefined }
  /** A secret the configuration names is not set: `missing` is its name (never a value). */
  | { readonly ok: false; readonly missing: string };

/** The token cache for deps that bring none (tests that never name a minted credential). */
let fallbackTokens: TokenCache | undefined;

/**
 * Reads the backend's credentials by secret name, now: a static secret becomes its header, an
 * application or service-account credential an authorizer that mints through the isolate's token cache, and a SigV4
 * protocol's access key a signer. Never a caller's credential.
 */
export function backendAuthorization(deps: AuthorizationDeps, backend: HttpBackend, codec: BackendCodec): BackendAuthorization {
  if (codec.sigV4Service !== undefined) {
    const names = backend.awsCredential;
    if (names === undefined) return { ok: false, missing: "awsCredential" };
    const accessKeyId = deps.credentials.get(names.accessKeyId);
    if (!accessKeyId) return { ok: false, missing: names.accessKeyId };
    const secretAccessKey = deps.credentials.get(names.secretAccessKey);
    if (!secretAccessKey) return { ok: false, missing: names.secretAccessKey };
    const sessionToken = names.sessionToken !== undefined ? deps.credentials.get(names.sessionToken) : undefined;
    if (names.sessionToken !== undefined && !sessionToken) return { ok: false, missing: names.sessionToken };
    if (backend.region === undefined) return { ok: false, missing: "region" };
    return { ok: true, headers: {}, authorizer: sigV4Authorizer({ accessKeyId, secretAccessKey, sessionToken }, backend.region, codec.sigV4Service, deps.clock) };
  }
  const credential = backend.credential;
  if (credential === undefined) return { ok: true, headers: {} };
  const secret = deps.credentials.get(credential.secret);
  if (secret === undefined || secret === "") return { ok: false, missing: credential.secret };
  if ("kind" in credential) {
    return { ok: true, headers: {}, authorizer: bearerTokenAuthorizer(tokenSource(deps, backend, credential, secret), deps.tokens ?? (fallbackTokens ??= new TokenCache({ clock: deps.clock }))) };
  }
  return { ok: true, headers: credentialHeader(credential.scheme, secret) };
}

type MintedCredential = Extract<NonNullable<HttpBackend["credential"]>, { readonly kind: string }>;

/**
 * Token sources by deps, then by backend, credential and secret. Building one parses the
 * credential (a service account's key file is JSON of a few KiB, checked by a schema) and is the
 * same for every request until the snapshot or the secret changes, so it is built once. Bounded:
 * past `MAX_SOURCES` a deps' map starts over.
 */
const sources = new WeakMap<AuthorizationDeps, Map<string, TokenSource>>();
const MAX_SOURCES = 256;

function tokenSource(deps: AuthorizationDeps, backend: HttpBackend, credential: MintedCredential, secret: string): TokenSource {
  let known = sources.get(deps);
  if (known === undefined) sources.set(deps, (known = new Map()));
  const key = `${backend.id}\n${JSON.stringify(credential)}\n${secret}`;
  let source = known.get(key);
  if (source === undefined) {
    if (known.size >= MAX_SOURCES) known.clear();
    source =
      credential.kind === "entra"
        ? entraTokenSource(credential, secret, deps)
        : googleServiceAccountTokenSource({ credentials: secret, scope: credential.scope, tokenUri: credential.tokenUrl, fetch: deps.fetch, clock: deps.clock, egress: deps.egress });
    known.set(key, source);
  }
  return source;
}
