import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { SnapshotSource } from "../src/config/backends-schema.ts";
import { tlsFingerprint } from "../src/snapshot/tls-bindings.ts";

/** A certificate chain and its private key, as PEM files workerd embeds. */
export interface TlsKeypairFiles {
  readonly certFile: string;
  readonly keyFile: string;
}

/** One workerd external service a backend with `tls` is reached through, bound to the Worker by name. */
export interface TlsBackendService {
  readonly binding: string;
  /** host:port of the backend's base URL: an external service connects there, whatever URL is fetched. */
  readonly address: string;
  /** The name the server's certificate is verified against. */
  readonly certificateHost: string;
  /** Trusted instead of the system store, when given. */
  readonly caFile?: string | undefined;
  /** The client certificate presented (mTLS). */
  readonly client?: TlsKeypairFiles | undefined;
  /** What the binding was rendered for (see src/snapshot/tls-bindings.ts). */
  readonly fingerprint: string;
}

/** A secret a backend's `tls` names, and the backend that names it. */
export interface TlsSecret {
  readonly name: string;
  readonly namedBy: string;
}

/** The secrets backends' `tls.clientCertificate` name: read at start, never bound to the Worker. */
export function tlsSecretsNamed(backends: SnapshotSource["backends"], file: string): TlsSecret[] {
  const out: TlsSecret[] = [];
  backends.forEach((b, i) => {
    const c = b.tls?.clientCertificate;
    if (c === undefined) return;
    out.push({ name: c.certificateSecret, namedBy: `${file}: backends[${i}].tls.clientCertificate.certificateSecret (${b.name})` });
    out.push({ name: c.keySecret, namedBy: `${file}: backends[${i}].tls.clientCertificate.keySecret (${b.name})` });
  });
  return out;
}

/**
 * The external services of the backends with `tls`, their PEM material written under `dir` (the
 * client key readable by this user only) for workerd to embed when it reads its config. Throws
 * when two backends name one binding for different material: one binding carries one connection.
 */
export async function tlsBackendServices(backends: SnapshotSource["backends"], env: NodeJS.ProcessEnv, dir: string): Promise<TlsBackendService[]> {
  const byBinding = new Map<string, TlsBackendService>();
  for (const b of backends) {
    const tls = b.tls;
    if (tls === undefined || b.baseUrl === undefined) continue;
    const fingerprint = await tlsFingerprint(b.baseUrl, tls);
    const seen = byBinding.get(tls.binding);
    if (seen !== undefined) {
      if (seen.fingerprint !== fingerprint) throw new Error(`backends name TLS binding ${tls.binding} for different addresses or TLS material: give each its own binding`);
      continue;
    }
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const write = (name: string, text: string) => {
      const file = join(dir, `${tls.binding}.${name}.pem`);
      writeFileSync(file, text.endsWith("\n") ? text : `${text}\n`, { mode: 0o600 });
      chmodSync(file, 0o600);
      return file;
    };
    const url = new URL(b.baseUrl);
    const port = url.port !== "" ? url.port : "443";
    const c = tls.clientCertificate;
    byBinding.set(tls.binding, {
      binding: tls.binding,
      address: `${url.hostname}:${port}`,
      certificateHost: tls.serverName ?? url.hostname.replace(/^\[|\]$/g, ""),
      caFile: tls.ca === undefined ? undefined : write("ca", tls.ca.trim()),
      client: c === undefined ? undefined : { certFile: write("client-cert", env[c.certificateSecret] ?? ""), keyFile: write("client-key", env[c.keySecret] ?? "") },
      fingerprint,
    });
  }
  return [...byBinding.values()];
}

/** Reads a PEM file given on the command line, naming the flag when it is unreadable or not PEM. */
export function checkPemFile(file: string, flag: string, kind: "certificate" | "key"): void {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new Error(`${flag} ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const marker = kind === "certificate" ? /-----BEGIN CERTIFICATE-----/ : /-----BEGIN [A-Z ]*PRIVATE KEY-----/;
  if (!marker.test(text)) throw new Error(`${flag} ${file}: not a PEM ${kind}`);
}
