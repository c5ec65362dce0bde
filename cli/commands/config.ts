import { stringify } from "yaml";
import { redactedConfig } from "../../src/config/redact.ts";
import { parseFlags, stringFlag } from "../args.ts";
import { usageError } from "../cli-error.ts";
import { readConfigDir } from "../config-dir.ts";

export const CONFIG_HELP = `Usage: sluice config <validate|print-effective> [--config DIR] [options]

  validate          checks gateway.yaml, publication.yaml and backends.yaml offline: schemas,
                    references between the files, and the seed snapshot against the publication.
                    Every issue is printed as "file: path: reason"; exit 1 when there is any.
  print-effective   validates, then prints the effective config (defaults filled in) as YAML,
                    or JSON with --json, always redacted: API key hashes are cut to a prefix,
                    and credentials are only ever secret names in config.

Options:
  --config DIR   config directory (default ./config)
  --json         print JSON
  --redact       (print-effective) accepted for explicitness; the output is always redacted
`;

/** `sluice config validate|print-effective`. */
export async function configCommand(argv: readonly string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub === "--help" || sub === "-h") {
    process.stdout.write(CONFIG_HELP);
    return sub === undefined ? 2 : 0;
  }
  if (sub !== "validate" && sub !== "print-effective") throw usageError(`unknown config command '${sub}' (validate, print-effective)`);
  const args = parseFlags(rest, { config: { type: "string" }, json: { type: "boolean" }, redact: { type: "boolean" } }, { min: 0, max: 0, names: "" });
  if (args.help) {
    process.stdout.write(CONFIG_HELP);
    return 0;
  }
  const dir = stringFlag(args, "config") ?? "config";
  const valid = await readConfigDir(dir);
  if (sub === "validate") {
    if (args.values.json === true) process.stdout.write(`${JSON.stringify({ ok: true, dir: valid.dir, seedDigest: valid.seedDigest })}\n`);
    else process.stdout.write(`config OK: ${valid.dir} (seed snapshot ${valid.seedDigest})\n`);
    return 0;
  }
  const effective = redactedConfig(valid.config);
  process.stdout.write(args.values.json === true ? `${JSON.stringify(effective, null, 2)}\n` : `# Effective config of ${valid.dir} (secrets redacted); seed snapshot ${valid.seedDigest}\n${stringify(effective)}`);
  return 0;
}
