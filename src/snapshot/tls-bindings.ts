import type { BackendTls } from "../config/backends-schema.ts";
import { canonicalDigest } from "../digest/canonical-digest.ts";

/**
 * The TLS bindings a running gateway was started with: binding name → the fingerprint of what it
 * was rendered for. workerd reads its config once, at start, while a snapshot can be replaced at
 * any time: a snapshot naming TLS material the process does not carry is refused at validation.
 * `edge`: no rendered bindings (Cloudflare), where a binding is an mTLS certificate binding that
 * presents a client certificate and trusts the public CAs only.
 */
export type TlsBindings = ReadonlyMap<string, string> | "edge";

/** The binding carrying the gateway's TLS bindings (`SLUICE_TLS_BINDINGS`, JSON: binding → fingerprint). */
export const TLS_BINDINGS_VAR = "SLUICE_TLS_BINDINGS";

/**
 * What a TLS binding is for: the address it connects to (host and port of the base URL; a workerd
 * external service ignores the URL's) and the backend's `tls` block. Equal fingerprints, equal
 * connections; the key's value is not in it (its secret's name is).
 */
export async function tlsFingerprint(baseUrl: string, tls: BackendTls): Promise<string> {
  const url = new URL(baseUrl);
  return await canonicalDigest({
    address: url.host,
    ca: tls.ca?.trim(),
    serverName: tls.serverName,
    clientCertificate: tls.clientCertificate,
  });
}

/** Reads `SLUICE_TLS_BINDINGS`; absent: the edge. A value that does not parse carries no bindings, so every TLS backend is refused rather than sent without its material. */
export function parseTlsBindings(text: string | undefined): TlsBindings {
  if (text === undefined) return "edge";
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return new Map();
    return new Map(Object.entries(parsed).filter((e): e is [string, string] => typeof e[1] === "string"));
  } catch {
    return new Map();
  }
}

/**
 * Why a backend's `tls` cannot be honoured by the running gateway, or undefined when it can. The
 * fix is always a restart with the file that names it: the runtime's TLS material is fixed at start.
 */
export async function tlsRefusal(name: string, baseUrl: string, tls: BackendTls, bindings: TlsBindings): Promise<string | undefined> {
  if (bindings === "edge") {
    if (tls.ca !== undefined || tls.serverName !== undefined) {
      return `backend "${name}": on Cloudflare's edge, TLS binding ${tls.binding} is an mTLS certificate binding, which presents a client certificate and verifies the server against the public CAs: ca and serverName cannot be honoured there`;
    }
    return undefined;
  }
  const started = bindings.get(tls.binding);
  if (started === undefined) {
    return `backend "${name}" is reached through TLS binding ${tls.binding}, which this gateway was not started with: restart it with this backend in its backends.yaml (TLS material is rendered into workerd's config at start)`;
  }
  if (started !== (await tlsFingerprint(baseUrl, tls))) {
    return `backend "${name}": TLS binding ${tls.binding} was started for another address, CA, server name or client certificate: restart the gateway with this backends.yaml (TLS material is rendered into workerd's config at start)`;
  }
  return undefined;
}
