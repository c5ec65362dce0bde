import backendsYaml from "../../config/backends.yaml";
import gatewayYaml from "../../config/gateway.yaml";
import publicationYaml from "../../config/publication.yaml";
import { loadConfigWithSeed, type ConfigTexts, type LoadedConfig } from "../config/load-config.ts";
import { readValidatedConfig, type ValidatedConfig } from "../config/validated-config.ts";
import { demoKeyIssues } from "../config/demo-keys.ts";
import { CONFIG_FILES, ConfigValidationError } from "../config/parse-file.ts";
import { compilePublication, type CompiledPublication } from "../publication/compile-publication.ts";
import { publicationSchema } from "../config/publication-schema.ts";
import { builtinCodecs } from "../protocol/registry.ts";
import type { SnapshotSeed } from "../snapshot/controller.ts";
import { pinSnapshot } from "../snapshot/pinned-snapshot.ts";
import type { ActivePublication, CandidateCheck } from "../publication-lifecycle/controller.ts";
import { validateCandidate } from "../publication-lifecycle/validate-candidate.ts";
import type { SnapshotContext } from "../snapshot/normalize.ts";
import { parseTlsBindings } from "../snapshot/tls-bindings.ts";

/** Config for this isolate: the bundled YAML, each file replaceable by an env/secret binding. */
export function configTexts(env: Env): ConfigTexts {
  return {
    gateway: env.SLUICE_GATEWAY_YAML ?? gatewayYaml,
    publication: env.SLUICE_PUBLICATION_YAML ?? publicationYaml,
    backends: env.SLUICE_BACKENDS_YAML ?? backendsYaml,
  };
}

/** Whether this environment refuses the demo keys (`SLUICE_DEMO_KEYS = "refuse"`: the edge environments in wrangler.toml). */
export function refusesDemoKeys(env: Env): boolean {
  return env.SLUICE_DEMO_KEYS === "refuse";
}

/** The validated config with its publication compiled, once per isolate. */
export interface IsolateConfig extends LoadedConfig {
  readonly compiled: CompiledPublication;
}

let cached: { texts: ConfigTexts; artifact: string | undefined; refuseDemoKeys: boolean; config: IsolateConfig; publicationDocument: unknown } | undefined;

/**
 * The config as validated: read from the artifact `sluice serve` binds (`SLUICE_VALIDATED_CONFIG`,
 * the CLI having run every check already) with one JSON parse, else parsed and checked here.
 */
function validated(env: Env, texts: ConfigTexts): ValidatedConfig {
  return env.SLUICE_VALIDATED_CONFIG !== undefined ? readValidatedConfig(env.SLUICE_VALIDATED_CONFIG) : loadConfigWithSeed(texts);
}

/**
 * Validated once per isolate (and again only if the bound texts change). Throws
 * ConfigValidationError listing every issue; the entry module calls this at startup so an invalid
 * config fails the start, not the Nth request.
 */
export function isolateConfig(env: Env): IsolateConfig {
  return isolateState(env).config;
}

function isolateState(env: Env): NonNullable<typeof cached> {
  const texts = configTexts(env);
  const artifact = env.SLUICE_VALIDATED_CONFIG;
  const refuseDemoKeys = refusesDemoKeys(env);
  if (cached && cached.refuseDemoKeys === refuseDemoKeys && cached.artifact === artifact && cached.texts.gateway === texts.gateway && cached.texts.publication === texts.publication && cached.texts.backends === texts.backends) {
    return cached;
  }
  const { config: loaded, publicationDocument } = validated(env, texts);
  // An edge environment never serves the demo keys: its start fails, naming them (docs/deploy.md).
  if (refuseDemoKeys) {
    const issues = demoKeyIssues(loaded.publication, CONFIG_FILES.publication);
    if (issues.length > 0) throw new ConfigValidationError(issues);
  }
  const config = { ...loaded, compiled: compilePublication(loaded.publication) };
  cached = { texts, artifact, refuseDemoKeys, config, publicationDocument };
  return cached;
}

/** What every snapshot candidate is checked against in this build, publication and process (its TLS bindings). */
export function snapshotContext(config: IsolateConfig, env: Env): SnapshotContext {
  return {
    supportedProtocols: builtinCodecs.ids(),
    logprobsProtocols: builtinCodecs.logprobsIds(),
    requirements: config.compiled.poolRequirements,
    egress: config.gateway.security.egress,
    tlsBindings: parseTlsBindings(env.SLUICE_TLS_BINDINGS),
  };
}

/**
 * What a snapshot candidate proposed at runtime is checked against: the active publication's
 * requirements (a revision published since the start may need pools the bundled one did not).
 */
export async function publishedSnapshotContext(env: Env): Promise<SnapshotContext> {
  // The stub's type cannot carry an `unknown` document across RPC; it is the controller's ActivePublication.
  const active = (await env.PUBLICATION_CONTROLLER.getByName("global").getActive()) as unknown as ActivePublication;
  const compiled = compilePublication(publicationSchema.parse(active.document), active.revision);
  return { ...snapshotContext(isolateConfig(env), env), requirements: compiled.poolRequirements };
}

/** The bundled backends.yaml and its context: what the snapshot controller activates on first use. */
export function snapshotSeed(config: IsolateConfig, env: Env): SnapshotSeed {
  return { candidate: config.backendsSeed, context: snapshotContext(config, env) };
}

/** Reads the seed publication document; called only before the controller's first activation. */
export type PublicationSeed = () => unknown;

/** The bundled (or bound) publication.yaml as a document: what the publication controller activates on first use. */
export function publicationSeedOf(env: Env): PublicationSeed {
  // The document the isolate's validation already parsed: the YAML is not parsed again.
  return () => isolateState(env).publicationDocument;
}

/**
 * How the publication controller checks a candidate: against this build's bootstrap and the
 * active BackendSnapshot (a snapshot that cannot be read rejects the candidate: its pools are unknown).
 */
export function publicationCheckOf(env: Env): CandidateCheck {
  return async (candidate, ledgerRoots) => {
    let snapshot;
    try {
      snapshot = pinSnapshot(await env.SNAPSHOT_CONTROLLER.getByName("global").getActive());
    } catch (err) {
      return { ok: false, issues: [{ file: "backends", path: "", message: `the active backend snapshot could not be read, so the candidate's pools cannot be checked: ${String(err)}` }] };
    }
    return validateCandidate(candidate, { gateway: isolateConfig(env).gateway, snapshot, ledgerRoots, refuseDemoKeys: refusesDemoKeys(env) });
  };
}
