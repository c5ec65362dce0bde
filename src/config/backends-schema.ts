import { z } from "zod";
import { capabilitySchema } from "./publication-schema.ts";
import { BACKEND_PROTOCOL_IDS, type ProtocolId } from "../protocol/codec.ts";
import { responseHeaderRefusal } from "../egress/response-headers.ts";

const name = z
  .string()
  .regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, "names are 1-64 lower-case letters, digits, '.', '_' or '-'");

/** Protocols a backend may speak; each needs a registered codec. */
export const backendProtocolSchema = z.enum(BACKEND_PROTOCOL_IDS);
export type BackendProtocol = z.infer<typeof backendProtocolSchema>;

/** Protocols whose backends are reached through a runtime binding of the Worker, not over HTTP. */
const BINDING_PROTOCOLS: ReadonlySet<BackendProtocol> = new Set(["workers-ai"]);

/** Whether a backend of this protocol is reached through a binding (else at its `baseUrl`). */
export function isBindingProtocol(protocol: BackendProtocol): protocol is Exclude<BackendProtocol, ProtocolId> {
  return BINDING_PROTOCOLS.has(protocol);
}

const secretName = z.string().regex(/^[A-Z_][A-Z0-9_]*$/, "secret names are upper-case env-style names");

/** A provider credential sent as it is stored: a reference to a secret or env binding by name. */
const staticCredentialSchema = z.strictObject({
  secret: secretName,
  /**
   * How the provider expects it: `Authorization: Bearer` (OpenAI style), `x-api-key` (Anthropic),
   * `api-key` (Azure OpenAI's key header) or `x-goog-api-key` (the Gemini API's).
   */
  scheme: z.enum(["bearer", "x-api-key", "api-key", "x-goog-api-key"]).default("bearer"),
});

/**
 * A Microsoft Entra ID application (client credentials grant): the gateway mints an access token
 * with the client secret, sends it as `Authorization: Bearer`, and caches it per isolate until
 * shortly before it expires. Only the secret's name is configured.
 */
const entraCredentialSchema = z.strictObject({
  kind: z.literal("entra"),
  /** The directory (tenant) id or domain the application is registered in. */
  tenantId: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9.-]{0,127}$/, "a tenant id is a GUID or a domain"),
  /** The application (client) id. */
  clientId: z.string().min(1).max(128),
  /** The name of the secret holding the application's client secret. */
  secret: secretName,
  /** The token endpoint; default `https://login.microsoftonline.com/{tenantId}/oauth2/v2.0/token` (sovereign clouds have their own). */
  tokenUrl: z.url({ protocol: /^https?$/ }).optional(),
  /** The scope asked for; default `https://cognitiveservices.azure.com/.default` (Azure OpenAI). */
  scope: z.string().min(1).max(512).default("https://cognitiveservices.azure.com/.default"),
});

/** The scope a Google service account's token is asked for by default: Vertex AI and the Gemini API accept it. */
export const GOOGLE_CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform";

/**
 * A Google service account (Gemini backends): the secret holds the account's key file (its JSON);
 * the gateway signs a JWT assertion with the key, exchanges it at the token URI for an access
 * token, sends it as `Authorization: Bearer`, and caches it per isolate until shortly before it
 * expires. Only the secret's name is configured.
 */
const googleServiceAccountCredentialSchema = z.strictObject({
  kind: z.literal("google-service-account"),
  /** The name of the secret holding the service account's key file (JSON). */
  secret: secretName,
  /** The token endpoint; default the key file's `token_uri` (Google's is `https://oauth2.googleapis.com/token`). */
  tokenUrl: z.url({ protocol: /^https?$/ }).optional(),
  /** The scope asked for; default `https://www.googleapis.com/auth/cloud-platform`. */
  scope: z.string().min(1).max(512).default(GOOGLE_CLOUD_PLATFORM_SCOPE),
});

/** A provider credential: a secret sent as is, or an application or account that mints tokens. Never the value itself. */
const credentialSchema = z.union([staticCredentialSchema, entraCredentialSchema, googleServiceAccountCredentialSchema]);
export type BackendCredential = z.infer<typeof credentialSchema>;

/** A credential whose access tokens the gateway mints (an Entra ID application, a Google service account), not a key sent as is. */
export function isMintedCredential(c: BackendCredential): c is Exclude<BackendCredential, { readonly scheme: unknown }> {
  return "kind" in c;
}

/** An entra credential's token endpoint: its own, or Microsoft's global one for the tenant (sovereign clouds configure `tokenUrl`). */
export function entraTokenUrl(c: { readonly tenantId: string; readonly tokenUrl?: string | undefined }): string {
  return c.tokenUrl ?? `https://login.microsoftonline.com/${encodeURIComponent(c.tenantId)}/oauth2/v2.0/token`;
}

/** Protocols whose backends need an API version on each request (`apiVersion`). */
const VERSIONED_PROTOCOLS: ReadonlySet<BackendProtocol> = new Set(["azure-openai"]);

/** Protocols whose requests are signed with AWS SigV4 (a region and an AWS access key, by secret names). */
const SIGV4_PROTOCOLS: ReadonlySet<BackendProtocol> = new Set(["bedrock-converse"]);

/** An AWS access key, as the names of the secrets holding its parts. */
const awsCredentialSchema = z.strictObject({
  accessKeyId: secretName,
  secretAccessKey: secretName,
  /** Temporary credentials only: the secret holding the session token. */
  sessionToken: secretName.optional(),
});

/** A host name a TLS server's certificate is verified against (no port, no scheme). */
const serverNameSchema = z.string().regex(/^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}))*$/, "a host name such as vllm.internal");

/** One or more PEM certificates. */
const pemBundleSchema = z
  .string()
  .max(65_536)
  .regex(/^\s*(?:-----BEGIN CERTIFICATE-----[A-Za-z0-9+/=\s]+-----END CERTIFICATE-----\s*)+$/, "a PEM bundle: one or more -----BEGIN CERTIFICATE----- blocks");

/**
 * How an HTTP backend's TLS connection is made when the runtime's defaults do not fit (a private
 * CA, a server name other than the URL's host, a client certificate). The backend is reached
 * through a Worker fetcher binding that carries this material: a workerd `external` service that
 * `sluice serve` and the container render at start, or a Cloudflare mTLS certificate binding on
 * the edge. Key material is named by secret, never written here.
 */
export const backendTlsSchema = z.strictObject({
  /** The Worker's fetcher binding the backend is reached through (`[[mtls_certificates]] binding` on the edge). */
  binding: z.string().regex(/^[A-Z_][A-Z0-9_]{0,63}$/, "a binding name is upper-case letters, digits and '_' (BACKEND_TLS)"),
  /** CA certificates (PEM) trusted for this backend instead of the system store. */
  ca: pemBundleSchema.optional(),
  /** The name the server's certificate must be valid for; default the base URL's host. */
  serverName: serverNameSchema.optional(),
  /** The client certificate presented (mTLS): the secrets holding its PEM chain and its private key. */
  clientCertificate: z
    .strictObject({
      certificateSecret: secretName,
      keySecret: secretName,
    })
    .optional(),
});
export type BackendTls = z.infer<typeof backendTlsSchema>;

const backendSchema = z
  .strictObject({
    name,
    protocol: backendProtocolSchema,
    /** HTTP protocols: the base URL the protocol's paths are appended to, e.g. `https://api.openai.com/v1`. */
    baseUrl: z.url({ protocol: /^https?$/ }).optional(),
    /**
     * Binding protocols (`workers-ai`): the name of the Worker's binding the backend is reached
     * through (`AI` for `[ai] binding = "AI"`), instead of a base URL.
     */
    binding: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/, "a binding name is 1-64 letters, digits or '_', not starting with a digit")
      .optional(),
    credential: credentialSchema.optional(),
    /** HTTP protocols: the backend's own TLS trust, server name and client certificate (see docs/security.md). */
    tls: backendTlsSchema.optional(),
    /**
     * Azure OpenAI: the data-plane API version sent as `?api-version=` on each request
     * (`2024-10-21`, `2025-04-01-preview`). Required there, refused for other protocols.
     */
    apiVersion: z
      .string()
      .regex(/^\d{4}-\d{2}-\d{2}(-preview)?$/, "an API version is a date, optionally with -preview (2024-10-21)")
      .optional(),
    /** SigV4 protocols (`bedrock-converse`): the AWS region requests are signed for, e.g. `us-east-1`. */
    region: z
      .string()
      .regex(/^[a-z]{2}(-[a-z]+)+-\d+$/, "an AWS region such as us-east-1")
      .optional(),
    /** SigV4 protocols: the AWS access key the requests are signed with, by secret names. */
    awsCredential: awsCredentialSchema.optional(),
    /** Gemini backends on Vertex AI: the Google Cloud project (its id or number). Absent: the Gemini API. */
    project: z
      .string()
      .regex(/^(?:[a-z][a-z0-9-]{4,28}[a-z0-9]|\d{1,20})$/, "a Google Cloud project id (6-30 lower-case letters, digits or '-') or number")
      .optional(),
    /** Gemini backends on Vertex AI: the location the model is served from (`us-central1`, `global`). */
    location: z
      .string()
      .regex(/^[a-z][a-z0-9-]{1,62}$/, "a Google Cloud location such as us-central1 or global")
      .optional(),
    capabilities: z.array(capabilitySchema).min(1),
    /** Extra static headers for the provider (never secrets: use `credential`). */
    headers: z.record(z.string().regex(/^[a-z0-9-]+$/), z.string()).default({}),
    /**
     * Provider response headers passed to the client on a successful answer (a provider's request
     * id, say). None by default; hop-by-hop, cookie, server-software and the gateway's own headers
     * are refused here and never passed.
     */
    responseHeaders: z
      .array(
        z
          .string()
          .regex(/^[a-z0-9-]+$/, "header names are lower-case letters, digits and '-'")
          .superRefine((n, ctx) => {
            const why = responseHeaderRefusal(n);
            if (why !== undefined) ctx.addIssue({ code: "custom", message: why });
          }),
      )
      .default([]),
    /**
     * Open a TCP connection before each attempt and only then send the request. A connection that
     * cannot be opened proves nothing was sent (known-zero), so the attempt may be retried elsewhere;
     * fetch alone cannot tell a refused connection from a reset after the body was written. Costs
     * one extra TCP handshake per attempt.
     */
    connectCheck: z.boolean().default(false),
    /**
     * Send the attempt's W3C `traceparent` (and the client's `tracestate`) to this provider, so its
     * spans join the gateway's trace. Off by default: a trace id is an identifier the provider
     * would otherwise never see.
     */
    propagateTraceContext: z.boolean().default(false),
    /**
     * Active health probes on a non-billable path (GET `baseUrl` + `path`), run by one Durable
     * Object per backend, so replicas never multiply them. Omitted: no active probes.
     */
    healthCheck: z
      .strictObject({
        path: z.string().regex(/^\/[A-Za-z0-9._~\/-]*$/, "a path starting with '/'").default("/models"),
        intervalMs: z.number().int().min(1000).max(3_600_000).default(30_000),
        timeoutMs: z.number().int().min(100).max(60_000).default(5_000),
      })
      .optional(),
  })
  .superRefine((b, ctx) => {
    for (const issue of transportIssues(b)) ctx.addIssue({ code: "custom", path: [issue.key], message: issue.message });
  });

/**
 * A backend names exactly the fields of how it is reached: an HTTP protocol's backend a `baseUrl`
 * (and, optionally, what is sent with each request); a binding protocol's backend its `binding`
 * and nothing that only HTTP has.
 */
function transportIssues(b: {
  readonly protocol: BackendProtocol;
  readonly baseUrl?: string | undefined;
  readonly binding?: string | undefined;
  readonly credential?: BackendCredential | undefined;
  readonly tls?: BackendTls | undefined;
  readonly apiVersion?: string | undefined;
  readonly headers: Readonly<Record<string, string>>;
  readonly connectCheck: boolean;
  readonly propagateTraceContext: boolean;
  readonly healthCheck?: unknown;
  readonly region?: string | undefined;
  readonly awsCredential?: unknown;
  readonly project?: string | undefined;
  readonly location?: string | undefined;
}): { key: string; message: string }[] {
  if (!isBindingProtocol(b.protocol)) {
    const out: { key: string; message: string }[] = [];
    if (b.baseUrl === undefined) out.push({ key: "baseUrl", message: `protocol ${b.protocol} is reached over HTTP: the backend needs a baseUrl` });
    if (b.binding !== undefined) out.push({ key: "binding", message: `binding is for protocols reached through a Worker binding (workers-ai); protocol ${b.protocol} is reached at the backend's baseUrl` });
    if (b.tls !== undefined && b.baseUrl !== undefined && !b.baseUrl.startsWith("https:")) out.push({ key: "tls", message: "tls is for backends reached over https: the baseUrl starts with http:" });
    out.push(...signingIssues(b));
    if (VERSIONED_PROTOCOLS.has(b.protocol) && b.apiVersion === undefined) out.push({ key: "apiVersion", message: `protocol ${b.protocol} names an API version on every request: set apiVersion (2024-10-21, say)` });
    if (!VERSIONED_PROTOCOLS.has(b.protocol) && b.apiVersion !== undefined) out.push({ key: "apiVersion", message: `apiVersion is for azure-openai backends; protocol ${b.protocol} has no API version parameter` });
    out.push(...googleIssues(b));
    // A probe sends the stored credential as is; it has no token of its own to mint.
    if (b.credential !== undefined && isMintedCredential(b.credential) && b.healthCheck !== undefined) out.push({ key: "healthCheck", message: `active health probes send a stored secret; a ${b.credential.kind} credential's token is minted per request, so probe this backend passively` });
    return out;
  }
  const why = `protocol ${b.protocol} is reached through a Worker binding`;
  const out: { key: string; message: string }[] = [];
  if (b.region !== undefined) out.push({ key: "region", message: `${why}: it is not signed for an AWS region` });
  if (b.awsCredential !== undefined) out.push({ key: "awsCredential", message: `${why}, which carries the account's authorization: no credential is sent` });
  if (b.project !== undefined) out.push({ key: "project", message: `${why}: project is for gemini backends on Vertex AI` });
  if (b.location !== undefined) out.push({ key: "location", message: `${why}: location is for gemini backends on Vertex AI` });
  if (b.binding === undefined) out.push({ key: "binding", message: `${why}: name it (binding: AI) instead of a baseUrl` });
  if (b.baseUrl !== undefined) out.push({ key: "baseUrl", message: `${why}, not a URL: name the binding instead` });
  if (b.apiVersion !== undefined) out.push({ key: "apiVersion", message: `${why}: it has no API version parameter` });
  if (b.tls !== undefined) out.push({ key: "tls", message: `${why}: there is no TLS connection of the gateway's own to configure` });
  if (b.credential !== undefined) out.push({ key: "credential", message: `${why}, which carries the account's authorization: no credential is sent` });
  if (Object.keys(b.headers).length > 0) out.push({ key: "headers", message: `${why}: it sends no HTTP headers of the backend's` });
  if (b.connectCheck) out.push({ key: "connectCheck", message: `${why}: there is no connection of the gateway's own to check` });
  if (b.propagateTraceContext) out.push({ key: "propagateTraceContext", message: `${why}: it carries no trace headers` });
  if (b.healthCheck !== undefined) out.push({ key: "healthCheck", message: `${why}: it has no non-billable path to probe` });
  return out;
}

const memberSchema = z.strictObject({
  backend: name,
  /** The provider's own model id. */
  model: z.string().min(1).max(256),
  weight: z.number().int().min(1).max(10_000).default(1),
});

const poolSchema = z.strictObject({
  name,
  selector: z.enum(["random", "round-robin", "weighted-round-robin", "affinity", "p2c"]).default("p2c"),
  members: z.array(memberSchema).min(1),
});

/** BackendSnapshot source (`config/backends.yaml`, or a candidate pushed through the admin API). */
export const snapshotSourceSchema = z.strictObject({
  version: z.literal(1),
  backends: z.array(backendSchema).min(1),
  pools: z.array(poolSchema).min(1),
});

export type SnapshotSource = z.infer<typeof snapshotSourceSchema>;

/**
 * A SigV4 protocol's backend names its region and AWS access key, and nothing else carries its
 * authorization (a bearer credential) or needs one (an unsigned health probe); any other
 * protocol's backend names neither.
 */
function signingIssues(b: {
  readonly protocol: BackendProtocol;
  readonly credential?: unknown;
  readonly healthCheck?: unknown;
  readonly region?: string | undefined;
  readonly awsCredential?: unknown;
}): { key: string; message: string }[] {
  const out: { key: string; message: string }[] = [];
  if (!SIGV4_PROTOCOLS.has(b.protocol)) {
    if (b.region !== undefined) out.push({ key: "region", message: `region is for protocols signed with AWS SigV4 (bedrock-converse), not ${b.protocol}` });
    if (b.awsCredential !== undefined) out.push({ key: "awsCredential", message: `awsCredential is for protocols signed with AWS SigV4 (bedrock-converse); protocol ${b.protocol} takes a credential` });
    return out;
  }
  const why = `protocol ${b.protocol} signs every request with AWS SigV4`;
  if (b.region === undefined) out.push({ key: "region", message: `${why}: name the region (region: us-east-1)` });
  if (b.awsCredential === undefined) out.push({ key: "awsCredential", message: `${why}: name the secrets of the access key (awsCredential: {accessKeyId, secretAccessKey})` });
  if (b.credential !== undefined) out.push({ key: "credential", message: `${why}: its key goes in awsCredential, and no bearer or x-api-key credential is sent` });
  if (b.healthCheck !== undefined) out.push({ key: "healthCheck", message: `${why}: it has no unsigned, non-billable path to probe` });
  return out;
}

/** The Gemini API's host: it names no project; Vertex AI's hosts end in `aiplatform.googleapis.com`. */
const GEMINI_API_HOST = "generativelanguage.googleapis.com";
const VERTEX_HOST = /^(?:([a-z0-9-]+)-)?aiplatform\.googleapis\.com$/;

/**
 * A gemini backend is the Gemini API (no project) or Vertex AI (a project and a location), and
 * takes the credential its endpoint does: an API key in `x-goog-api-key` on the Gemini API, a
 * service account on either. Other protocols name no project, location or Google credential.
 * Google's own hosts are checked against the mode they serve, so a Vertex address without a
 * project (or the reverse) is refused here, not by a 404 on every request.
 */
function googleIssues(b: {
  readonly protocol: BackendProtocol;
  readonly baseUrl?: string | undefined;
  readonly credential?: BackendCredential | undefined;
  readonly project?: string | undefined;
  readonly location?: string | undefined;
}): { key: string; message: string }[] {
  const out: { key: string; message: string }[] = [];
  const kind = b.credential !== undefined && isMintedCredential(b.credential) ? b.credential.kind : undefined;
  if (b.protocol !== "gemini") {
    if (b.project !== undefined) out.push({ key: "project", message: `project is for gemini backends on Vertex AI, not ${b.protocol}` });
    if (b.location !== undefined) out.push({ key: "location", message: `location is for gemini backends on Vertex AI, not ${b.protocol}` });
    if (kind === "google-service-account") out.push({ key: "credential", message: `a google-service-account credential is for gemini backends, not ${b.protocol}` });
    return out;
  }
  const vertex = b.project !== undefined || b.location !== undefined;
  if (b.project !== undefined && b.location === undefined) out.push({ key: "location", message: "a gemini backend on Vertex AI names its location with its project (location: us-central1, or global)" });
  if (b.location !== undefined && b.project === undefined) out.push({ key: "project", message: "a gemini backend on Vertex AI names its project with its location (project: my-project)" });
  const credential = b.credential;
  if (credential !== undefined) {
    if (kind === "entra") out.push({ key: "credential", message: "a gemini backend takes an API key (scheme: x-goog-api-key) or a Google service account (kind: google-service-account), not an entra application" });
    else if (kind === undefined && "scheme" in credential) {
      if (vertex) out.push({ key: "credential", message: "a gemini backend on Vertex AI is called with a service account's token (kind: google-service-account); API keys (Vertex AI express mode) are not supported" });
      else if (credential.scheme !== "x-goog-api-key") out.push({ key: "credential", message: `the Gemini API takes its key in x-goog-api-key (scheme: x-goog-api-key), not ${credential.scheme}` });
    }
  }
  if (b.baseUrl !== undefined && URL.canParse(b.baseUrl)) {
    const url = new URL(b.baseUrl);
    if (/\/v1(?:beta\d*)?\/*$/.test(url.pathname)) out.push({ key: "baseUrl", message: "a gemini backend's paths start with the API version (/v1beta/models/… or /v1/projects/…): give the base URL without it" });
    const host = VERTEX_HOST.exec(url.hostname);
    if (url.hostname === GEMINI_API_HOST && vertex) out.push({ key: "project", message: `${GEMINI_API_HOST} is the Gemini API, which names no project or location: remove them, or point baseUrl at Vertex AI` });
    if (host !== null && !vertex) out.push({ key: "project", message: `${url.hostname} is Vertex AI: name the project and location (project: my-project, location: ${host[1] ?? "global"})` });
    if (host !== null && host[1] !== undefined && b.location !== undefined && b.location !== host[1]) out.push({ key: "location", message: `${url.hostname} serves location ${host[1]}, not ${b.location}` });
  }
  return out;
}
