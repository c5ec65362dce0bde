/**
 * `npm run config:check [-- --dir DIR] [--quiet]`: validates gateway.yaml, publication.yaml and
 * backends.yaml offline — schemas, cross-references, and the seed snapshot against the
 * publication — then prints the effective config with secrets redacted. Exit 1 on any issue.
 */
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { stringify } from "yaml";
import { CONFIG_FILES, loadConfig } from "../src/config/load-config.ts";
import { ConfigValidationError, formatIssues } from "../src/config/parse-file.ts";
import { redactedConfig } from "../src/config/redact.ts";
import { builtinCodecs } from "../src/protocol/registry.ts";
import { compilePublication } from "../src/publication/compile-publication.ts";
import { normalizeSnapshot } from "../src/snapshot/normalize.ts";

const { values } = parseArgs({ options: { dir: { type: "string" }, quiet: { type: "boolean" } } });
const dir = resolve(values.dir ?? join(import.meta.dirname, "..", "config"));
const read = (name: string) => {
  try {
    return readFileSync(join(dir, name), "utf8");
  } catch {
    console.error(`${name}: cannot read ${join(dir, name)}`);
    process.exit(1);
  }
};

try {
  const config = loadConfig({
    gateway: read(CONFIG_FILES.gateway),
    publication: read(CONFIG_FILES.publication),
    backends: read(CONFIG_FILES.backends),
  });
  const seed = await normalizeSnapshot(config.backendsSeed, {
    supportedProtocols: builtinCodecs.ids(),
    requirements: compilePublication(config.publication).poolRequirements,
  });
  if (!seed.ok) {
    console.error(seed.reasons.map((r) => `${CONFIG_FILES.backends}: ${r.path}: ${r.message}`).join("\n"));
    process.exit(1);
  }
  if (!values.quiet) {
    console.log(`# Effective config (secrets redacted); seed snapshot digest ${seed.digest}`);
    console.log(stringify(redactedConfig(config)));
  }
  console.error(`config OK: ${dir}`);
} catch (err) {
  if (err instanceof ConfigValidationError) {
    console.error(formatIssues(err.issues));
    process.exit(1);
  }
  throw err;
}
