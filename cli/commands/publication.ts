import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseDocument } from "yaml";
import type { ConfigIssue } from "../../src/config/parse-file.ts";
import type { CanaryResult, PublicationHistory, PublicationRollbackResult, PublishResult } from "../../src/publication-lifecycle/controller.ts";
import { adminCall, adminError, adminRequest, adminTarget, ADMIN_TOKEN_ENV } from "../admin-client.ts";
import { parseFlags, stringFlag, type ParsedArgs } from "../args.ts";
import { failure, usageError } from "../cli-error.ts";
import { table } from "../table.ts";

const COMMON = `Common options:
  --admin URL     the admin API (default: $SLUICE_ADMIN_URL, else listeners.admin of
                  gateway.yaml in --config DIR)
  --config DIR    config directory (default ./config)
  --json          print the API's JSON instead of text
The bearer token is read from $${ADMIN_TOKEN_ENV}.`;

export const PUBLISH_HELP = `Usage: sluice publish [--config DIR] [options]

Publishes DIR/publication.yaml to the running gateway: the gateway checks it as
'sluice config validate' does (schemas, references, budgets, MCP policy) and against its
active backend snapshot, then activates it atomically; every instance serves it within
traffic.publicationCacheTtlMs. A rejected publication changes nothing: every issue is printed
as "file: path: reason" and the exit code is 1.

  --canary P      check it the same way, but serve it to P% of callers only (1..99, chosen
                  by their key, so a caller stays on one revision); publishing the same file
                  again with another P changes the share. Then 'sluice publication canary
                  promote' or 'abort'.

${COMMON}
`;

export const PUBLICATION_HELP = `Usage: sluice publication <history|rollback|canary> [options]

  history [--limit N]       activations, rejections, canaries and rollbacks, newest first,
                            with the active and last-known-good revisions and the canary
  rollback [--revision N]   re-activates revision N, or the last-known-good (ends a canary)
  canary status             the running canary: its revision and share of callers
  canary promote            the canary becomes the active revision
  canary abort              the canary ends; every caller gets the active revision

${COMMON}
`;

const COMMON_FLAGS = { admin: { type: "string" }, config: { type: "string" }, json: { type: "boolean" } } as const;

const print = (args: ParsedArgs, json: unknown, human: () => string) => process.stdout.write(`${args.values.json === true ? JSON.stringify(json, null, 2) : human()}\n`);
const target = (args: ParsedArgs) => adminTarget({ admin: stringFlag(args, "admin"), config: stringFlag(args, "config") });

/** A positive integer flag, if given. */
function intFlag(args: ParsedArgs, name: string): number | undefined {
  const v = stringFlag(args, name);
  if (v === undefined) return undefined;
  if (!/^[1-9]\d*$/.test(v)) throw usageError(`--${name} must be a positive integer, got '${v}'`);
  return Number(v);
}

/** `sluice publish`: DIR/publication.yaml to the admin API. */
export async function publishCommand(argv: readonly string[]): Promise<number> {
  const args = parseFlags(argv, { ...COMMON_FLAGS, canary: { type: "string" } }, { min: 0, max: 0, names: "" });
  if (args.help) {
    process.stdout.write(PUBLISH_HELP);
    return 0;
  }
  const canary = intFlag(args, "canary");
  if (canary !== undefined && canary > 99) throw usageError(`--canary must be 1..99, got '${canary}'`);
  const file = join(resolve(stringFlag(args, "config") ?? "config"), "publication.yaml");
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw failure(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
  if (doc.errors.length > 0) throw failure(doc.errors.map((e) => `publication.yaml: ${e.linePos ? `line ${e.linePos[0].line}, column ${e.linePos[0].col}` : "(root)"}: ${e.message.split("\n")[0]}`).join("\n"));
  const path = canary === undefined ? "/publication" : `/publication?canary=${canary}`;
  const answer = await adminRequest(await target(args), "PUT", path, doc.toJS());
  if (answer.status === 422) {
    const e = adminError(answer.json) as { code?: string; message?: string; details?: readonly ConfigIssue[] } | undefined;
    if (args.values.json === true) process.stdout.write(`${JSON.stringify(answer.json, null, 2)}\n`);
    else process.stderr.write(`${e?.message ?? "rejected"}\n${(e?.details ?? []).map((i) => `${i.file}: ${i.path || "(root)"}: ${i.message}`).join("\n")}\n`);
    return 1;
  }
  if (answer.status < 200 || answer.status > 299) {
    const e = adminError(answer.json);
    throw failure(`PUT ${path} failed: ${answer.status} ${e?.code ?? ""}: ${e?.message ?? answer.text.slice(0, 200)}`);
  }
  const r = answer.json as Exclude<PublishResult, { status: "rejected" }>;
  print(args, r, () =>
    r.status === "canary"
      ? `canary: revision ${r.revision} (${r.digest}) serves ${r.percent}% of callers; active revision ${r.active ?? "none"} serves the rest`
      : r.status === "unchanged"
        ? `unchanged: revision ${r.revision} is already active (${r.digest})`
        : `activated revision ${r.revision} (${r.digest}); previous ${r.previous ?? "none"}`,
  );
  return 0;
}

/** `sluice publication history|rollback|canary`. */
export async function publicationCommand(argv: readonly string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub === "--help" || sub === "-h") {
    process.stdout.write(PUBLICATION_HELP);
    return sub === undefined ? 2 : 0;
  }
  if (sub !== "history" && sub !== "rollback" && sub !== "canary") throw usageError(`unknown publication command '${sub}' (history, rollback, canary)`);
  if (sub === "canary") return canaryCommand(rest);
  const args = parseFlags(rest, { ...COMMON_FLAGS, ...(sub === "history" ? { limit: { type: "string" } } : { revision: { type: "string" } }) }, { min: 0, max: 0, names: "" });
  if (args.help) {
    process.stdout.write(PUBLICATION_HELP);
    return 0;
  }
  if (sub === "history") {
    const limit = intFlag(args, "limit") ?? 20;
    const h = await adminCall<PublicationHistory>(await target(args), "GET", `/publication/history?limit=${limit}`);
    print(args, h, () =>
      [
        `active revision ${h.active ?? "none"}, last-known-good ${h.lastKnownGood ?? "none"}, ${canaryLine(h.canary)}`,
        table(
          ["AT", "EVENT", "REVISION", "PREVIOUS", "SOURCE", "ISSUES"],
          h.events.map((e) => [e.at, e.kind, e.revision ?? "-", e.previous ?? "-", e.source, e.issues?.length ?? "-"]),
        ),
      ].join("\n"),
    );
    return 0;
  }
  const revision = intFlag(args, "revision");
  const r = await adminCall<PublicationRollbackResult>(await target(args), "POST", "/publication/rollback", revision === undefined ? undefined : { revision });
  if (r.status !== "activated") throw failure(r.message);
  print(args, r, () => `activated revision ${r.revision} (${r.digest}); previous ${r.previous ?? "none"}`);
  return 0;
}

const canaryLine = (c: PublicationHistory["canary"]) => (c ? `canary revision ${c.revision} at ${c.percent}% since ${c.startedAt}` : "no canary");

/** `sluice publication canary status|promote|abort`. */
async function canaryCommand(argv: readonly string[]): Promise<number> {
  const [action, ...rest] = argv;
  if (action !== "status" && action !== "promote" && action !== "abort") throw usageError(`unknown publication canary command '${action ?? ""}' (status, promote, abort)`);
  const args = parseFlags(rest, COMMON_FLAGS, { min: 0, max: 0, names: "" });
  if (args.help) {
    process.stdout.write(PUBLICATION_HELP);
    return 0;
  }
  if (action === "status") {
    const h = await adminCall<PublicationHistory>(await target(args), "GET", "/publication/history?limit=1");
    print(args, { active: h.active, canary: h.canary ?? null }, () => `active revision ${h.active ?? "none"}, ${canaryLine(h.canary)}`);
    return 0;
  }
  const r = await adminCall<CanaryResult>(await target(args), "POST", `/publication/canary/${action}`);
  if (r.status === "not_found") throw failure(r.message);
  print(args, r, () => (r.status === "promoted" ? `promoted canary revision ${r.revision} (${r.digest}) to active; previous ${r.previous ?? "none"}` : `aborted canary revision ${r.revision}; every caller gets the active revision`));
  return 0;
}
