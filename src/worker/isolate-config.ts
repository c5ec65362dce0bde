import backendsYaml from "../../config/backends.yaml";
import gatewayYaml from "../../config/gateway.yaml";
import publicationYaml from "../../config/publication.yaml";
import { loadConfig, type ConfigTexts, type LoadedConfig } from "../config/load-config.ts";
import { compilePublication, type CompiledPublication } from "../publication/compile-publication.ts";
import { builtinCodecs } from "../protocol/registry.ts";
import type { SnapshotSeed } from "../snapshot/controller.ts";
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

/** The validated config with its publication compiled, once per isolate. */
export interface IsolateConfig extends LoadedConfig {
  readonly compiled: CompiledPublication;
}

let cached: { texts: ConfigTexts; config: IsolateConfig } | undefined;

/**
 * Validated once per isolate (and again only if the bound texts change). Throws
 * ConfigValidationError listing every issue; the entry module calls this at startup so an invalid
 * config fails the start, not the Nth request.
 */
export function isolateConfig(env: Env): IsolateConfig {
  const texts = configTexts(env);
  if (cached && cached.texts.gateway === texts.gateway && cached.texts.publication === texts.publication && cached.texts.backends === texts.backends) {
    return cached.config;
  }
  const loaded = loadConfig(texts);
  const config = { ...loaded, compiled: compilePublication(loaded.publication) };
  cached = { texts, config };
  return config;
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

/** The bundled backends.yaml and its context: what the snapshot controller activates on first use. */
export function snapshotSeed(config: IsolateConfig, env: Env): SnapshotSeed {
  return { candidate: config.backendsSeed, context: snapshotContext(config, env) };
}
