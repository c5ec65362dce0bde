import type { Capability } from "../config/publication-schema.ts";
import type { PoolRequirement } from "../publication/compile-publication.ts";
import { canonicalDigest, sha256Hex } from "../digest/canonical-digest.ts";
import { formatPath } from "../errors/issue-path.ts";
import type { SelectorKind } from "../traffic/selector.ts";
import { entraTokenUrl, isMintedCredential, snapshotSourceSchema, type BackendCredential, type BackendProtocol } from "../config/backends-schema.ts";
import { checkEgress, type EgressPolicy } from "../egress/egress-guard.ts";
import type { BackendTls } from "../config/backends-schema.ts";
import { tlsRefusal, type TlsBindings } from "./tls-bindings.ts";

/** Why a snapshot candidate was refused; safe to return to the admin caller. */
export interface SnapshotReason {
  readonly code:
    | "schema"
    | "duplicate_name"
    | "unknown_backend"
    | "duplicate_member"
    | "unsupported_protocol"
    | "capability_not_carried"
    | "url_not_allowed"
    | "missing_pool"
    | "capability_missing"
    | "tls_unavailable";
  readonly path: string;
  readonly message: string;
}

/** What every backend has, however it is reached. */
interface BackendBase {
  readonly id: string;
  readonly name: string;
  readonly protocol: BackendProtocol;
  /** A secret by name, sent as is, or an application or account whose tokens are minted per isolate (`kind: entra`, `kind: google-service-account`). */
  readonly credential?: BackendCredential | undefined;
  /** Sorted, unique. */
  readonly capabilities: readonly Capability[];
  readonly headers: Readonly<Record<string, string>>;
  /** Provider response headers passed to the client; sorted, unique; absent when none. */
  readonly responseHeaders?: readonly string[] | undefined;
  readonly healthCheck?: { readonly path: string; readonly intervalMs: number; readonly timeoutMs: number } | undefined;
  /** Open a TCP connection before each attempt, so a refused one is known-zero evidence. */
  readonly connectCheck?: boolean | undefined;
  /** Send the attempt's `traceparent` to the provider. */
  readonly propagateTraceContext?: boolean | undefined;
}

/** A backend reached over HTTP at its base URL. */
export interface HttpBackend extends BackendBase {
  /** No trailing slash. */
  readonly baseUrl: string;
  readonly binding?: undefined;
  /** Azure OpenAI: the `api-version` sent with each request. */
  readonly apiVersion?: string | undefined;
  /** SigV4 protocols (Bedrock): the region requests are signed for. */
  readonly region?: string | undefined;
  /** SigV4 protocols: the secret names of the AWS access key requests are signed with. */
  readonly awsCredential?: { readonly accessKeyId: string; readonly secretAccessKey: string; readonly sessionToken?: string | undefined } | undefined;
  /** Gemini on Vertex AI: the Google Cloud project (absent: the Gemini API). */
  readonly project?: string | undefined;
  /** Gemini on Vertex AI: the location the model is served from. */
  readonly location?: string | undefined;
  /** Reached through this TLS binding (a private CA, a server name, a client certificate). */
  readonly tls?: BackendTls | undefined;
}

/**
 * A backend reached through a runtime binding of the Worker (Workers AI's `env.AI`): no URL, no
 * credential, no headers of its own; the binding is looked up by name at attempt time.
 */
export interface BindingBackend extends BackendBase {
  readonly binding: string;
  readonly baseUrl?: undefined;
}

/** A backend after normalization; `id` is deterministic, so equal content has equal ids everywhere. */
export type NormalizedBackend = HttpBackend | BindingBackend;

export interface NormalizedMember {
  readonly backendId: string;
  readonly model: string;
  readonly weight: number;
}

export interface NormalizedPool {
  readonly name: string;
  readonly selector: SelectorKind;
  /** Sorted by backend id then model, so member order carries no meaning. */
  readonly members: readonly NormalizedMember[];
}

/** The canonical form of a BackendSnapshot: what is digested, stored and served. */
export interface NormalizedSnapshot {
  readonly version: 1;
  /** Sorted by name. */
  readonly backends: readonly NormalizedBackend[];
  /** Sorted by name. */
  readonly pools: readonly NormalizedPool[];
}

/** What a candidate is checked against besides itself. */
export interface SnapshotContext {
  /** Backend protocols this build can speak (registered codecs). */
  readonly supportedProtocols: ReadonlySet<BackendProtocol>;
  /** Backend protocols whose codec asks for and reads log-probabilities: only their backends may declare `logprobs`. */
  readonly logprobsProtocols: ReadonlySet<BackendProtocol>;
  /** Pools and capabilities the running publication needs. */
  readonly requirements: readonly PoolRequirement[];
  /** The egress guard's policy (gateway.yaml `security.egress`): every base URL must pass it (a binding has none). */
  readonly egress: EgressPolicy;
  /**
   * The TLS bindings the running gateway was started with; absent where the candidate is checked
   * before a start that renders its own (`sluice config validate`, `serve`), so nothing is refused for it.
   */
  readonly tlsBindings?: TlsBindings | undefined;
}

export type NormalizeResult =
  | { readonly ok: true; readonly snapshot: NormalizedSnapshot; readonly digest: string }
  | { readonly ok: false; readonly reasons: readonly SnapshotReason[] };

const byString = <T>(key: (t: T) => string) => (a: T, b: T) => {
  const ka = key(a);
  const kb = key(b);
  return ka < kb ? -1 : ka > kb ? 1 : 0;
};

/**
 * Deterministic backend id: the same name, protocol and address always get the same id, on every
 * isolate and every revision, so per-backend state (load, breakers) follows the backend itself. A
 * changed address is a different physical backend and gets a new id. A binding's address is its
 * name, marked so no URL can spell it.
 */
async function backendId(name: string, protocol: string, address: string): Promise<string> {
  return `be_${(await sha256Hex(`${name}\n${protocol}\n${address}`)).slice(0, 16)}`;
}

/**
 * validate → normalize → deterministic ids → egress, reference, protocol and capability checks → digest.
 * Collects every reason rather than stopping at the first, so one push shows all that is wrong.
 */
export async function normalizeSnapshot(candidate: unknown, ctx: SnapshotContext): Promise<NormalizeResult> {
  const parsed = snapshotSourceSchema.safeParse(candidate);
  if (!parsed.success) {
    const reasons: SnapshotReason[] = parsed.error.issues.flatMap((issue) =>
      issue.code === "unrecognized_keys"
        ? issue.keys.map((k) => ({ code: "schema" as const, path: formatPath([...issue.path, k]), message: "unknown key" }))
        : [{ code: "schema" as const, path: formatPath(issue.path), message: issue.message }],
    );
    return { ok: false, reasons };
  }
  const source = parsed.data;
  const reasons: SnapshotReason[] = [];

  const backends: NormalizedBackend[] = [];
  const byName = new Map<string, NormalizedBackend>();
  for (const [i, b] of source.backends.entries()) {
    const path = `backends[${i}]`;
    if (byName.has(b.name)) {
      reasons.push({ code: "duplicate_name", path: `${path}.name`, message: `backend "${b.name}" is defined twice` });
      continue;
    }
    if (!ctx.supportedProtocols.has(b.protocol)) {
      reasons.push({ code: "unsupported_protocol", path: `${path}.protocol`, message: `protocol "${b.protocol}" is not supported by this build` });
    } else if (b.capabilities.includes("logprobs") && !ctx.logprobsProtocols.has(b.protocol)) {
      // Declared but not carried, it would pass the capability check and then answer every
      // cascade step without a score: the cascade would escalate every time.
      const carriers = [...ctx.logprobsProtocols].sort().join(", ");
      reasons.push({
        code: "capability_not_carried",
        path: `${path}.capabilities`,
        message: `backend "${b.name}" declares logprobs, but protocol ${b.protocol} carries no log-probabilities${carriers === "" ? "" : ` (only ${carriers} do)`}: remove logprobs from its capabilities`,
      });
    }
    const common = {
      name: b.name,
      protocol: b.protocol,
      capabilities: [...new Set(b.capabilities)].sort(),
      // Only recorded when some are listed, so snapshots without them keep their digests.
      responseHeaders: b.responseHeaders.length > 0 ? [...new Set(b.responseHeaders)].sort() : undefined,
    };
    let nb: NormalizedBackend;
    if (b.binding !== undefined) {
      // The schema admits a binding only where it is the whole transport (no URL, credential or headers).
      nb = { id: await backendId(b.name, b.protocol, `binding:${b.binding}`), ...common, binding: b.binding, headers: {} };
    } else {
      const url = new URL(b.baseUrl!);
      // Credentials, scheme and address: the one egress check every outbound target passes.
      const egress = checkEgress(url, ctx.egress);
      if (!egress.ok) reasons.push({ code: "url_not_allowed", path: `${path}.baseUrl`, message: egress.refusal.message });
      if (b.credential !== undefined && isMintedCredential(b.credential)) {
        // The token endpoint receives the client secret (or a signed assertion): it passes the same
        // guard as the backend. A service account's own token_uri is in its key file, a secret
        // read only at mint time, which checks it then.
        const tokenUrl = b.credential.kind === "entra" ? entraTokenUrl(b.credential) : b.credential.tokenUrl;
        const token = tokenUrl === undefined ? undefined : checkEgress(tokenUrl, ctx.egress);
        if (token !== undefined && !token.ok) reasons.push({ code: "url_not_allowed", path: `${path}.credential.tokenUrl`, message: token.refusal.message });
      }
      if (url.search !== "" || url.hash !== "") {
        reasons.push({ code: "url_not_allowed", path: `${path}.baseUrl`, message: "a base URL has no query or fragment" });
      }
      const baseUrl = `${url.origin}${url.pathname.replace(/\/+$/, "")}`;
      if (b.tls !== undefined && ctx.tlsBindings !== undefined) {
        const why = await tlsRefusal(b.name, baseUrl, b.tls, ctx.tlsBindings);
        if (why !== undefined) reasons.push({ code: "tls_unavailable", path: `${path}.tls`, message: why });
      }
      // A Vertex AI project and location are part of the address: another project is another backend.
      const vertex = b.project !== undefined ? ` vertex:${b.project}/${b.location ?? ""}` : "";
      nb = {
        id: await backendId(b.name, b.protocol, `${baseUrl}${vertex}`),
        ...common,
        baseUrl,
        credential: b.credential,
        // Only recorded when set (Azure OpenAI), so other snapshots keep their digests.
        ...(b.apiVersion !== undefined ? { apiVersion: b.apiVersion } : {}),
        headers: Object.fromEntries(Object.entries(b.headers).sort(([a], [c]) => (a < c ? -1 : 1))),
        healthCheck: b.healthCheck,
        // Only recorded when on, so snapshots without it keep their digests.
        connectCheck: b.connectCheck ? true : undefined,
        // Only recorded when on, so snapshots without it keep their digests.
        propagateTraceContext: b.propagateTraceContext ? true : undefined,
        // Only SigV4 backends have them (so other snapshots keep their digests).
        region: b.region,
        awsCredential: b.awsCredential,
        // Only Gemini backends on Vertex AI have them (so other snapshots keep their digests).
        ...(b.project !== undefined ? { project: b.project, location: b.location } : {}),
        // Only TLS-bound backends have it (so other snapshots keep their digests).
        ...(b.tls !== undefined ? { tls: { ...b.tls, ...(b.tls.ca !== undefined ? { ca: b.tls.ca.trim() } : {}) } } : {}),
      };
    }
    byName.set(b.name, nb);
    backends.push(nb);
  }

  const pools: NormalizedPool[] = [];
  const poolByName = new Map<string, NormalizedPool>();
  for (const [i, p] of source.pools.entries()) {
    const path = `pools[${i}]`;
    if (poolByName.has(p.name)) {
      reasons.push({ code: "duplicate_name", path: `${path}.name`, message: `pool "${p.name}" is defined twice` });
      continue;
    }
    const members: NormalizedMember[] = [];
    const seen = new Set<string>();
    for (const [j, m] of p.members.entries()) {
      const backend = byName.get(m.backend);
      if (!backend) {
        reasons.push({ code: "unknown_backend", path: `${path}.members[${j}].backend`, message: `no backend named "${m.backend}"` });
        continue;
      }
      const key = `${backend.id}\n${m.model}`;
      if (seen.has(key)) {
        reasons.push({ code: "duplicate_member", path: `${path}.members[${j}]`, message: `"${m.backend}" with model "${m.model}" is listed twice` });
        continue;
      }
      seen.add(key);
      members.push({ backendId: backend.id, model: m.model, weight: m.weight });
    }
    const pool: NormalizedPool = {
      name: p.name,
      selector: p.selector,
      members: members.sort(byString((m) => `${m.backendId}\n${m.model}`)),
    };
    poolByName.set(p.name, pool);
    pools.push(pool);
  }

  const backendById = new Map(backends.map((b) => [b.id, b]));
  for (const req of ctx.requirements) {
    const pool = poolByName.get(req.pool);
    if (!pool) {
      reasons.push({ code: "missing_pool", path: "pools", message: `pool "${req.pool}" is needed by ${req.neededBy}` });
      continue;
    }
    for (const m of pool.members) {
      const b = backendById.get(m.backendId);
      if (!b) continue;
      const missing = req.requires.filter((c) => !b.capabilities.includes(c));
      if (missing.length > 0) {
        reasons.push({
          code: "capability_missing",
          path: `pools.${pool.name}`,
          message: `backend "${b.name}" lacks ${missing.join(", ")} needed by ${req.neededBy}`,
        });
      }
    }
  }

  if (reasons.length > 0) return { ok: false, reasons };
  const snapshot: NormalizedSnapshot = {
    version: 1,
    backends: backends.sort(byString((b) => b.name)),
    pools: pools.sort(byString((p) => p.name)),
  };
  return { ok: true, snapshot, digest: await canonicalDigest(snapshot) };
}
