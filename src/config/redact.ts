import type { LoadedConfig } from "./load-config.ts";

/**
 * Effective config for printing: API key hashes shortened to a recognisable prefix; credentials
 * are references by name already, so no secret value exists here to leak.
 */
export function redactedConfig(config: LoadedConfig): LoadedConfig {
  return {
    gateway: config.gateway,
    publication: {
      ...config.publication,
      tenants: config.publication.tenants.map((t) => ({
        ...t,
        apiKeys: t.apiKeys.map((k) => ({ ...k, sha256: `${k.sha256.slice(0, 8)}…(redacted)` })),
      })),
    },
    backendsSeed: config.backendsSeed,
  };
}
