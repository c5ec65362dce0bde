import { stringify } from "yaml";
import { redactedConfig } from "../../src/config/redact.ts";
import { parseFlags, stringFlag } from "../args.ts";
import { failure, usageError } from "../cli-error.ts";
import { readConfigDir, secretsRequired } from "../config-dir.ts";

export const CONFIG_HELP = `Usage: sluice config <validate|print-effective> [--config DIR] [options]

  validate          checks gateway.yaml, publication.yaml and backends.yaml offline: schemas,
                    references between the files, the seed snapshot against the publication, and
                    that every secret the config names is set in the environment (as serve
                    requires). Every issue is printed as "file: path: reason"; exit 1 when there
                    is any.
  print-effective   validates, then prints the effective config (defaults filled in) as YAML,
                    or JSON with --json, always redacted: API key hashes are cut to a prefix,
                    and credentials are only ever secret names in config.

Options:
  --config DIR   config directory (default ./config)
  --json         print JSON
  --no-secrets   (validate) skip the environment check, for CI where the secrets are not set
  --redact       (print-effective) no effect, kept so older scripts still run: the output is
                 always redacted
`;

/** `sluice config validate|print-effective`. */
export async function configCommand(argv: readonly string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub === "--help" || sub === "-h") {
    process.stdout.write(CONFIG_HELP);
    return sub === undefined ? 2 : 0;
  }
  if (sub !== "validate" && sub !== "print-effective") throw usageError(`unknown config command '${sub}' (validate, print-effective)`);
  const args = parseFlags(rest, { config: { type: "string" }, json: { type: "boolean" }, redact: { type: "boolean" }, "no-secrets": { type: "boolean" } }, { min: 0, max: 0, names: "" });
  if (args.help) {
    process.stdout.write(CONFIG_HELP);
    return 0;
  }
  const dir = stringFlag(args, "config") ?? "config";
  const valid = await readConfigDir(dir);
  if (sub === "validate") {
    // The values are never read or printed: only whether each name is set.
    const missing = args.values["no-secrets"] === true ? [] : secretsRequired(valid.config).filter((s) => !process.env[s.name]);
    if (missing.length > 0) {
      const issues = missing.map((s) => `${s.namedBy}: secret ${s.name} is not set in the environment`);
      if (args.values.json === true) process.stdout.write(`${JSON.stringify({ ok: false, dir: valid.dir, missingSecrets: missing.map((s) => s.name), issues })}\n`);
      throw failure(`invalid config in ${valid.dir}:\n${issues.join("\n")}\n(--no-secrets skips this check)`);
    }
    if (args.values.json === true) process.stdout.write(`${JSON.stringify({ ok: true, dir: valid.dir, seedDigest: valid.seedDigest })}\n`);
    else process.stdout.write(`config OK: ${valid.dir} (seed snapshot ${valid.seedDigest})\n`);
    return 0;
  }
  const effective = redactedConfig(valid.config);
  process.stdout.write(args.values.json === true ? `${JSON.stringify(effective, null, 2)}\n` : `# Effective config of ${valid.dir} (secrets redacted); seed snapshot ${valid.seedDigest}\n${stringify(effective)}`);
  return 0;
}
