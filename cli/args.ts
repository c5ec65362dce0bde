import { parseArgs, type ParseArgsConfig } from "node:util";
import { usageError } from "./cli-error.ts";

type Options = NonNullable<ParseArgsConfig["options"]>;

/** What a command was given: its flags by name and its positional arguments. */
export interface ParsedArgs {
  readonly values: Readonly<Record<string, string | boolean | string[] | undefined>>;
  readonly positionals: readonly string[];
}

/**
 * Strict flags: an unknown flag, a missing value or a surplus positional is a usage error naming
 * it, never ignored. `--help` is accepted by every command.
 */
export function parseFlags(argv: readonly string[], options: Options, positionals: { min: number; max: number; names: string }): ParsedArgs & { help: boolean } {
  let parsed;
  try {
    parsed = parseArgs({ args: [...argv], options: { ...options, help: { type: "boolean", short: "h" } }, strict: true, allowPositionals: true });
  } catch (err) {
    // node's messages name the flag ("Unknown option '--x'"); they are the clearest thing to show.
    throw usageError((err as Error).message.replace(/\. To specify a positional argument.*$/s, ""));
  }
  const help = parsed.values.help === true;
  if (!help) {
    const n = parsed.positionals.length;
    if (n < positionals.min) throw usageError(`missing ${positionals.names}`);
    if (n > positionals.max) throw usageError(`unexpected argument '${parsed.positionals[positionals.max]}'`);
  }
  return { values: parsed.values, positionals: parsed.positionals, help };
}

/** A string flag's value, if given. */
export function stringFlag(args: ParsedArgs, name: string): string | undefined {
  const v = args.values[name];
  return typeof v === "string" ? v : undefined;
}

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** A duration such as `90s`, `2m`, `1500ms` or `1h`, in milliseconds. */
export function parseDuration(text: string, flag: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(text.trim());
  if (!m) throw usageError(`${flag} must be a duration such as 30s, 2m or 1500ms, got '${text}'`);
  return Math.round(Number(m[1]) * UNITS[m[2]!]!);
}
