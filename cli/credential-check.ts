import { request } from "node:https";
import { probeTargetFor } from "../src/invoker/health-target.ts";
import { builtinCodecs } from "../src/protocol/registry.ts";
import type { BackendTls } from "../src/config/backends-schema.ts";
import type { NormalizedBackend } from "../src/snapshot/normalize.ts";
import { credentialHeaders } from "../src/traffic/health.ts";

/** What one backend's credential check found. */
export interface CredentialCheck {
  readonly backend: string;
  /** The secret whose value was sent (by name; never the value). */
  readonly secret?: string | undefined;
  /**
   * `accepted`: the provider answered 2xx. `refused`: 401 or 403, the key is wrong. `inconclusive`:
   * another status or no answer (the probe path may not exist there; nothing is known of the key).
   * `skipped`: nothing cheap to check (a binding, a minted or signed credential, no credential).
   */
  readonly result: "accepted" | "refused" | "inconclusive" | "skipped";
  /** One line for the operator: the status and URL, or why it was skipped. */
  readonly detail: string;
}

/** A probe answer later than this is inconclusive: a check must never hold a start for long. */
const CHECK_TIMEOUT_MS = 5_000;

/**
 * One cheap authenticated call per backend: the GET the backend's active health probe makes (its
 * `healthCheck.path`, else `/models`: a model list, never billed), with the credential the gateway
 * would send, read from `env` by its secret name. Backends whose credential is minted or signed per
 * request (Entra ID, Google service accounts, SigV4) and binding backends are skipped: no single
 * unbilled GET proves them.
 */
export async function checkCredentials(backends: readonly NormalizedBackend[], env: NodeJS.ProcessEnv, fetcher: typeof fetch = fetch): Promise<CredentialCheck[]> {
  return await Promise.all(backends.map((b) => checkOne(b, env, fetcher)));
}

async function checkOne(b: NormalizedBackend, env: NodeJS.ProcessEnv, fetcher: typeof fetch): Promise<CredentialCheck> {
  const skipped = (detail: string): CredentialCheck => ({ backend: b.name, result: "skipped", detail });
  if (b.baseUrl === undefined) return skipped("reached through a binding: nothing to call");
  if ("awsCredential" in b && b.awsCredential) return skipped("SigV4-signed: no unsigned call proves the key");
  if (!b.credential) return skipped("no credential");
  if (!("scheme" in b.credential)) return skipped(`a ${b.credential.kind} credential is minted per request: not checked here`);
  const codec = builtinCodecs.backend(b.protocol);
  const target = codec && probeTargetFor({ ...b, healthCheck: b.healthCheck ?? { path: "/models", intervalMs: 30_000, timeoutMs: CHECK_TIMEOUT_MS } }, codec);
  if (!target) return skipped("its protocol has no probe path");
  const secret = b.credential.secret;
  const creds = credentialHeaders(target, (name) => env[name]);
  if ("missing" in creds) return { backend: b.name, secret, result: "refused", detail: `secret ${creds.missing} is not set` };
  const where = `GET ${target.url}`;
  const headers = { ...target.headers, ...creds.headers };
  try {
    // A backend with its own TLS (a private CA, a client certificate) is checked over exactly that TLS, as the gateway reaches it.
    const status =
      "tls" in b && b.tls !== undefined
        ? await tlsGet(target.url, headers, b.tls, env)
        : await fetcher(target.url, { method: "GET", headers, redirect: "manual", signal: AbortSignal.timeout(CHECK_TIMEOUT_MS) }).then(async (res) => (await res.body?.cancel(), res.status));
    if (status >= 200 && status < 300) return { backend: b.name, secret, result: "accepted", detail: `${status} ${where}` };
    if (status === 401 || status === 403) return { backend: b.name, secret, result: "refused", detail: `${status} ${where}` };
    return { backend: b.name, secret, result: "inconclusive", detail: `${status} ${where}` };
  } catch (err) {
    const e = err as { cause?: { code?: string }; code?: string; name?: string };
    const cause = e.cause?.code ?? e.code ?? e.name;
    return { backend: b.name, secret, result: "inconclusive", detail: `no answer (${cause}) ${where}` };
  }
}

/** One GET over a backend's `tls`: its CA instead of the system store, its server name, its client certificate. */
function tlsGet(url: string, headers: Record<string, string>, tls: BackendTls, env: NodeJS.ProcessEnv): Promise<number> {
  const c = tls.clientCertificate;
  const host = new URL(url).hostname.replace(/^\[|\]$/g, "");
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: "GET",
        headers,
        agent: false,
        minVersion: "TLSv1.2",
        servername: tls.serverName ?? host,
        ...(tls.ca !== undefined ? { ca: tls.ca } : {}),
        ...(c !== undefined ? { cert: env[c.certificateSecret], key: env[c.keySecret] } : {}),
        signal: AbortSignal.timeout(CHECK_TIMEOUT_MS),
      },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    );
    req.on("error", reject);
    req.end();
  });
}

/** The line `serve --check-credentials` prints for a check. */
export function checkLine(c: CredentialCheck): string {
  return `credential check: ${c.backend}${c.secret ? ` (${c.secret})` : ""}: ${c.result}: ${c.detail}`;
}
