// Secrets and optional overrides that `wrangler types` cannot see in wrangler.toml.
interface Env {
  /** Bearer token of the admin API (the name is configurable in gateway.yaml). */
  SLUICE_ADMIN_TOKEN?: string;
  /** Full YAML text replacing the bundled config/gateway.yaml. */
  SLUICE_GATEWAY_YAML?: string;
  /** Full YAML text replacing the bundled config/publication.yaml. */
  SLUICE_PUBLICATION_YAML?: string;
  /** Full YAML text replacing the bundled config/backends.yaml (the snapshot seed). */
  SLUICE_BACKENDS_YAML?: string;
  /** The config `sluice serve` validated, as JSON (src/config/validated-config.ts); the YAML bindings are then not parsed. */
  SLUICE_VALIDATED_CONFIG?: string;
  /** The TLS bindings `sluice serve` rendered (JSON: binding → fingerprint); absent on the edge. */
  SLUICE_TLS_BINDINGS?: string;
}
