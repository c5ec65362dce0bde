import type { LoadedConfig } from "./load-config.ts";
import { CONFIG_FILES, ConfigValidationError } from "./parse-file.ts";

/**
 * The validated config as `sluice serve` hands it to workerd: the three files already parsed,
 * checked and defaulted by the CLI, so the Worker reads them with one `JSON.parse` instead of
 * parsing the YAML and validating it a second time at module load (YAML parsing is most of a
 * large config's validation). The edge has no CLI in front of it: there the Worker validates the
 * YAML itself, once.
 */

/**
 * Names the artifact's shape. A bundle reads only an artifact of its own format; `serve` writes one
 * only for a bundle whose code names this format, so a bundle of another revision validates the
 * YAML itself. Change it whenever the validated config's shape changes.
 */
export const VALIDATED_CONFIG_FORMAT = "sluice-validated-config/1";

/** The binding that carries the artifact's JSON text. */
export const VALIDATED_CONFIG_BINDING = "SLUICE_VALIDATED_CONFIG";

/** What the artifact holds. */
export interface ValidatedConfig {
  readonly config: LoadedConfig;
  /** publication.yaml as written (before defaults): the publication controller's seed document. */
  readonly publicationDocument: unknown;
}

/** The artifact's text, for a config that passed every check of {@link loadConfig}. */
export function renderValidatedConfig(v: ValidatedConfig): string {
  return JSON.stringify({ format: VALIDATED_CONFIG_FORMAT, config: v.config, publicationDocument: v.publicationDocument });
}

/**
 * Reads an artifact {@link renderValidatedConfig} wrote. Its contents are trusted as the YAML
 * bindings are (both come from the process that started workerd); only its format is checked, and
 * one of another format fails the start naming both.
 */
export function readValidatedConfig(text: string): ValidatedConfig {
  let parsed: { format?: unknown; config?: LoadedConfig; publicationDocument?: unknown };
  try {
    parsed = JSON.parse(text) as typeof parsed;
  } catch (err) {
    throw new ConfigValidationError([{ file: CONFIG_FILES.gateway, path: "", message: `the validated config handed to the Worker is not JSON: ${String(err)}` }]);
  }
  if (parsed.format !== VALIDATED_CONFIG_FORMAT || parsed.config === undefined) {
    throw new ConfigValidationError([{ file: CONFIG_FILES.gateway, path: "", message: `the validated config handed to the Worker is of format ${JSON.stringify(parsed.format)}; this build reads ${VALIDATED_CONFIG_FORMAT}` }]);
  }
  return { config: parsed.config, publicationDocument: parsed.publicationDocument };
}
