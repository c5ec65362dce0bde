import { parseDocument } from "yaml";
import type { z } from "zod";
import { formatPath } from "../errors/issue-path.ts";

/** The three config files, by role. */
export const CONFIG_FILES = {
  gateway: "gateway.yaml",
  publication: "publication.yaml",
  backends: "backends.yaml",
} as const;

/** One problem found in a config file, precise enough to fix without guessing. */
export interface ConfigIssue {
  readonly file: string;
  /** Dotted path inside the file, e.g. `entrypoints[0].routes[1].when`. */
  readonly path: string;
  readonly message: string;
}

/** Thrown when a config file is unreadable or invalid; carries every issue found, not just the first. */
export class ConfigValidationError extends Error {
  readonly issues: readonly ConfigIssue[];
  constructor(issues: readonly ConfigIssue[]) {
    super(formatIssues(issues));
    this.name = "ConfigValidationError";
    this.issues = issues;
  }
}

/** Renders issues one per line: `file: path: message`. */
export function formatIssues(issues: readonly ConfigIssue[]): string {
  return issues.map((i) => `${i.file}: ${i.path || "(root)"}: ${i.message}`).join("\n");
}

/**
 * Keys that moved, by file and old path: found at the old place, the key is refused with where it
 * went, rather than as merely unknown, so a config written for an earlier release fails at load
 * with its fix.
 */
const MOVED_KEYS: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  [CONFIG_FILES.gateway]: {
    "mcp.oauth": "moved to auth.oauth, since access tokens authenticate every endpoint now, not only /mcp: move the block there unchanged",
  },
};

/** Maps zod issues to ConfigIssues; unknown keys are reported one per key with its full path. */
export function zodIssues(file: string, error: z.ZodError): ConfigIssue[] {
  const out: ConfigIssue[] = [];
  for (const issue of error.issues) {
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys) {
        const path = formatPath([...issue.path, key]);
        out.push({ file, path, message: MOVED_KEYS[file]?.[path] ?? "unknown key" });
      }
    } else if (issue.code === "invalid_key" && issue.issues.length > 0) {
      // A record's key: say what is wrong with it, not only that it is wrong.
      out.push({ file, path: formatPath(issue.path), message: `the key: ${issue.issues[0]!.message}` });
    } else {
      out.push({ file, path: formatPath(issue.path), message: issue.message });
    }
  }
  return out;
}

/** Validates an already-parsed value against a schema, or throws with every issue. */
export function validateValue<S extends z.ZodType>(file: string, value: unknown, schema: S): z.output<S> {
  const result = schema.safeParse(value);
  if (!result.success) throw new ConfigValidationError(zodIssues(file, result.error));
  return result.data;
}

/**
 * Parses YAML text and validates it. YAML syntax errors carry line and column; duplicate keys are
 * errors because a silently-overridden key in a routing file is a production incident.
 */
export function parseConfigText<S extends z.ZodType>(file: string, text: string, schema: S): z.output<S> {
  return validateValue(file, parseConfigDocument(file, text), schema);
}

/** The YAML text as a plain document, not yet validated; throws on syntax errors and duplicate keys as {@link parseConfigText} does. */
export function parseConfigDocument(file: string, text: string): unknown {
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
  if (doc.errors.length > 0) {
    throw new ConfigValidationError(
      doc.errors.map((e) => ({
        file,
        path: e.linePos ? `line ${e.linePos[0].line}, column ${e.linePos[0].col}` : "",
        message: e.message.split("\n")[0] ?? e.message,
      })),
    );
  }
  return doc.toJS();
}

/** Values listed more than once, each once (config cross-checks report duplicate ids with it). */
export function duplicates(values: readonly string[]): string[] {
  const seen = new Set<string>();
  const dup = new Set<string>();
  for (const v of values) (seen.has(v) ? dup : seen).add(v);
  return [...dup];
}
