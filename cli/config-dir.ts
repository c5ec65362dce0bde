import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { loadConfigWithSeed, type ConfigTexts, type LoadedConfig } from "../src/config/load-config.ts";
import { CONFIG_FILES } from "../src/config/parse-file.ts";
import { ConfigValidationError, formatIssues } from "../src/config/parse-file.ts";
import { builtinCodecs } from "../src/protocol/registry.ts";
import { compilePublication } from "../src/publication/compile-publication.ts";
import { normalizeSnapshot, type NormalizedBackend } from "../src/snapshot/normalize.ts";
import { failure } from "./cli-error.ts";
import { tlsSecretsNamed } from "./tls-material.ts";

/** A config directory that passed every check `serve` and `config validate` make. */
export interface ValidConfigDir {
  /** Absolute path of the directory. */
  readonly dir: string;
  /** Absolute paths of the three files. */
  readonly files: { readonly gateway: string; readonly publication: string; readonly backends: string };
  readonly texts: ConfigTexts;
  readonly config: LoadedConfig;
  /** publication.yaml as written, before defaults (what the publication controller adopts as its seed). */
  readonly publicationDocument: unknown;
  /** Digest of the seed BackendSnapshot, as the controller would compute it. */
  readonly seedDigest: string;
  /** The seed BackendSnapshot's backends, normalized as the controller would store them. */
  readonly seedBackends: readonly NormalizedBackend[];
}

/**
 * Reads gateway.yaml, publication.yaml and backends.yaml from `dir` and validates them as the
 * gateway will at start: schemas, references between the files, and the seed snapshot against the
 * publication's pool requirements. Every problem is reported, one `file: path: reason` per line.
 */
export async function readConfigDir(dirArg: string): Promise<ValidConfigDir> {
  const dir = resolve(dirArg);
  const files = {
    gateway: join(dir, CONFIG_FILES.gateway),
    publication: join(dir, CONFIG_FILES.publication),
    backends: join(dir, CONFIG_FILES.backends),
  };
  const unreadable: string[] = [];
  const read = (name: string, path: string) => {
    try {
      return readFileSync(path, "utf8");
    } catch (err) {
      unreadable.push(`${name}: (file): cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
      return "";
    }
  };
  const texts = { gateway: read(CONFIG_FILES.gateway, files.gateway), publication: read(CONFIG_FILES.publication, files.publication), backends: read(CONFIG_FILES.backends, files.backends) };
  if (unreadable.length > 0) throw failure(`invalid config in ${dir}:\n${unreadable.join("\n")}`);
  let config: LoadedConfig;
  let publicationDocument: unknown;
  try {
    ({ config, publicationDocument } = loadConfigWithSeed(texts));
  } catch (err) {
    if (err instanceof ConfigValidationError) throw failure(`invalid config in ${dir}:\n${formatIssues(err.issues)}`);
    throw err;
  }
  const seed = await normalizeSnapshot(config.backendsSeed, {
    supportedProtocols: builtinCodecs.ids(), logprobsProtocols: builtinCodecs.logprobsIds(),
    requirements: compilePublication(config.publication).poolRequirements,
    egress: config.gateway.security.egress,
  });
  if (!seed.ok) throw failure(`invalid config in ${dir}:\n` + seed.reasons.map((r) => `${CONFIG_FILES.backends}: ${r.path}: ${r.message}`).join("\n"));
  return { dir, files, texts, config, publicationDocument, seedDigest: seed.digest, seedBackends: seed.snapshot.backends };
}

/** A secret the config names, and where it names it (for the message when it is missing). */
export interface NamedSecret {
  readonly name: string;
  readonly namedBy: string;
}

/**
 * Every secret the config refers to by name: the admin token's, the approvers' token and the
 * approval state secret, the OTLP collector headers', and
 * each seed backend's credential (a SigV4 backend's access key parts). A snapshot pushed later may name others; `serve --secret NAME` binds those too.
 */
export function secretsNamed(config: LoadedConfig): NamedSecret[] {
  const out = new Map<string, NamedSecret>();
  const add = (name: string, namedBy: string) => {
    if (!out.has(name)) out.set(name, { name, namedBy });
  };
  add(config.gateway.security.adminTokenSecret, `${CONFIG_FILES.gateway}: security.adminTokenSecret`);
  const gov = config.gateway.governance;
  if (gov.approverTokenSecret) add(gov.approverTokenSecret, `${CONFIG_FILES.gateway}: governance.approverTokenSecret`);
  if (gov.approvals) add(gov.approvals.stateSecret, `${CONFIG_FILES.gateway}: governance.approvals.stateSecret`);
  const verifier = config.gateway.governance.verifierTokenSecret;
  if (verifier) add(verifier, `${CONFIG_FILES.gateway}: governance.verifierTokenSecret`);
  const otlp = config.gateway.observability.otlp;
  if (otlp?.headersSecret) add(otlp.headersSecret, `${CONFIG_FILES.gateway}: observability.otlp.headersSecret`);
  (config.gateway.mcp.sessions?.secrets ?? []).forEach((name, i) => add(name, `${CONFIG_FILES.gateway}: mcp.sessions.secrets[${i}]`));
  config.gateway.mcp.servers.forEach((m, i) => {
    if (m.credential) add(m.credential.secret, `${CONFIG_FILES.gateway}: mcp.servers[${i}].credential.secret (${m.name})`);
  });
  config.backendsSeed.backends.forEach((b, i) => {
    if (b.credential) add(b.credential.secret, `${CONFIG_FILES.backends}: backends[${i}].credential.secret (${b.name})`);
    // A SigV4 backend's access key is its credential: without these bound it could never sign.
    const aws = b.awsCredential;
    if (aws) {
      add(aws.accessKeyId, `${CONFIG_FILES.backends}: backends[${i}].awsCredential.accessKeyId (${b.name})`);
      add(aws.secretAccessKey, `${CONFIG_FILES.backends}: backends[${i}].awsCredential.secretAccessKey (${b.name})`);
      if (aws.sessionToken) add(aws.sessionToken, `${CONFIG_FILES.backends}: backends[${i}].awsCredential.sessionToken (${b.name})`);
    }
  });
  return [...out.values()];
}

/**
 * Every secret a start needs set: those {@link secretsNamed} lists (bound to the Worker) and the
 * client certificates backends' `tls` names (read by `serve` at start, never bound). What
 * `config validate` checks, and `serve` refuses to start without.
 */
export function secretsRequired(config: LoadedConfig): NamedSecret[] {
  const named = secretsNamed(config);
  const tls = tlsSecretsNamed(config.backendsSeed.backends, CONFIG_FILES.backends).filter((t) => !named.some((s) => s.name === t.name));
  return [...named, ...tls];
}
