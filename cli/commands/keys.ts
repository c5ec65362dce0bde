import type { ConfigIssue } from "../../src/config/parse-file.ts";
import type { KeyView } from "../../src/publication-lifecycle/key-operations.ts";
import { adminError, adminRequest, adminTarget, ADMIN_TOKEN_ENV, type AdminTarget } from "../admin-client.ts";
import { parseDuration, parseFlags, stringFlag, type ParsedArgs } from "../args.ts";
import { failure, usageError } from "../cli-error.ts";
import { table } from "../table.ts";

export const KEYS_HELP = `Usage: sluice keys <list|create|revoke|disable|enable|rotate> [options]

  list [--tenant T]               the keys of the active publication and where each stands
  create --tenant T [--id ID] [--charge-to TEAM[/PROJECT]] [--entrypoints A,B]
         [--expires 30d|2027-01-01T00:00:00Z]
                                  a new key: printed once, only its digest is published
  revoke KEY [--tenant T] [--reason TEXT]
                                  refused for good; its pending and approved approvals are revoked
  disable KEY [--tenant T]        refused until enabled again
  enable KEY [--tenant T]
  rotate KEY [--tenant T] --grace 24h
                                  a successor with the same id, budgets and tasks, printed once;
                                  the replaced value keeps working until the grace ends

Every change publishes a revision: this gateway instance serves it at once, every other within
traffic.publicationCacheTtlMs. KEY is a key id; --tenant is needed only when two tenants have a
key of that id. Durations: 90s, 30m, 24h, 7d.

Common options:
  --admin URL     the admin API (default: $SLUICE_ADMIN_URL, else listeners.admin of
                  gateway.yaml in --config DIR)
  --config DIR    config directory (default ./config)
  --json          print the API's JSON instead of text
The bearer token is read from $${ADMIN_TOKEN_ENV}.
`;

const COMMON_FLAGS = { admin: { type: "string" }, config: { type: "string" }, json: { type: "boolean" }, tenant: { type: "string" } } as const;
const FLAGS = {
  list: COMMON_FLAGS,
  create: { ...COMMON_FLAGS, id: { type: "string" }, "charge-to": { type: "string" }, entrypoints: { type: "string" }, expires: { type: "string" } },
  revoke: { ...COMMON_FLAGS, reason: { type: "string" } },
  disable: COMMON_FLAGS,
  enable: COMMON_FLAGS,
  rotate: { ...COMMON_FLAGS, grace: { type: "string" } },
} as const;
type Sub = keyof typeof FLAGS;

interface Changed {
  readonly status: "activated" | "unchanged";
  readonly revision: number;
  readonly key: KeyView;
  readonly apiKey?: string;
  readonly approvalsRevoked?: readonly string[];
}

const DAY_MS = 86_400_000;

/** `--expires`: an ISO 8601 instant, or a duration from now (`30d`, `12h`). */
function expiresFlag(text: string, now: number): string {
  const days = /^(\d+)d$/.exec(text.trim());
  if (days) return new Date(now + Number(days[1]) * DAY_MS).toISOString();
  if (/^\d{4}-\d\d-\d\dT/.test(text)) {
    const t = Date.parse(text);
    if (Number.isNaN(t) || !/(Z|[+-]\d\d:\d\d)$/.test(text)) throw usageError(`--expires must be an ISO 8601 date-time with its offset (2027-01-01T00:00:00Z), got '${text}'`);
    return new Date(t).toISOString();
  }
  return new Date(now + parseDuration(text, "--expires")).toISOString();
}

/** `--grace`: a duration (`24h`, `7d`, `0s`), in whole seconds. */
function graceFlag(text: string | undefined): number {
  if (text === undefined) throw usageError("rotate needs --grace (such as 24h; 0s ends the replaced key at once)");
  const days = /^(\d+)d$/.exec(text.trim());
  return Math.floor((days ? Number(days[1]) * DAY_MS : parseDuration(text, "--grace")) / 1000);
}

/** `sluice keys …`: the admin API's key lifecycle. */
export async function keysCommand(argv: readonly string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub === "--help" || sub === "-h") {
    process.stdout.write(KEYS_HELP);
    return sub === undefined ? 2 : 0;
  }
  if (!(sub in FLAGS)) throw usageError(`unknown keys command '${sub}' (${Object.keys(FLAGS).join(", ")})`);
  const s = sub as Sub;
  const takesKey = s !== "list" && s !== "create";
  const args = parseFlags(rest, FLAGS[s], takesKey ? { min: 1, max: 1, names: "KEY" } : { min: 0, max: 0, names: "" });
  if (args.help) {
    process.stdout.write(KEYS_HELP);
    return 0;
  }
  const target = await adminTarget({ admin: stringFlag(args, "admin"), config: stringFlag(args, "config") });
  const tenant = stringFlag(args, "tenant");
  if (s === "list") {
    const { keys } = await call<{ keys: KeyView[] }>(target, "GET", `/keys${tenant === undefined ? "" : `?tenant=${encodeURIComponent(tenant)}`}`);
    print(args, { keys }, () =>
      table(
        ["TENANT", "KEY", "STATE", "DIGEST", "CHARGE TO", "ENTRYPOINTS", "EXPIRES", "IN GRACE UNTIL"],
        keys.map((k) => [k.tenant, k.id, k.state, `${k.digestPrefix}…`, k.chargeTo ?? "-", k.entrypoints.join(","), k.expiresAt ?? "-", k.previous.map((p) => p.until).join(", ") || "-"]),
      ),
    );
    return 0;
  }
  if (s === "create") {
    if (tenant === undefined) throw usageError("create needs --tenant T");
    const entrypoints = stringFlag(args, "entrypoints")?.split(",").map((e) => e.trim()).filter((e) => e !== "");
    const expires = stringFlag(args, "expires");
    const body = {
      tenant,
      ...(stringFlag(args, "id") !== undefined ? { id: stringFlag(args, "id") } : {}),
      ...(stringFlag(args, "charge-to") !== undefined ? { chargeTo: stringFlag(args, "charge-to") } : {}),
      ...(entrypoints !== undefined ? { entrypoints } : {}),
      ...(expires !== undefined ? { expiresAt: expiresFlag(expires, Date.now()) } : {}),
    };
    const r = await call<Changed>(target, "POST", "/keys", body);
    print(args, r, () => `${r.apiKey}\n\ncreated key ${r.key.tenant}/${r.key.id} in revision ${r.revision}. The key above is shown this once; only its digest is stored.`);
    return 0;
  }
  const key = args.positionals[0]!;
  const query = tenant === undefined ? "" : `?tenant=${encodeURIComponent(tenant)}`;
  if (s === "rotate") {
    const graceSeconds = graceFlag(stringFlag(args, "grace"));
    const r = await call<Changed>(target, "POST", `/keys/${encodeURIComponent(key)}/rotate${query}`, { graceSeconds });
    const until = r.key.previous.at(-1)?.until;
    print(args, r, () => `${r.apiKey}\n\nrotated key ${r.key.tenant}/${r.key.id} in revision ${r.revision}; ${until === undefined ? "the replaced value no longer works" : `the replaced value works until ${until}`}. The key above is shown this once.`);
    return 0;
  }
  const reason = stringFlag(args, "reason");
  const r = await call<Changed>(target, "POST", `/keys/${encodeURIComponent(key)}/${s}${query}`, reason === undefined ? undefined : { reason });
  const what = r.status === "unchanged" ? `key ${r.key.tenant}/${r.key.id} is already ${r.key.state}` : `key ${r.key.tenant}/${r.key.id} is ${r.key.state} from revision ${r.revision}`;
  print(args, r, () => (r.approvalsRevoked && r.approvalsRevoked.length > 0 ? `${what}; revoked its approvals ${r.approvalsRevoked.join(", ")}` : what));
  return 0;
}

const print = (args: ParsedArgs, json: unknown, human: () => string) => process.stdout.write(`${args.values.json === true ? JSON.stringify(json, null, 2) : human()}\n`);

/** An admin call whose refusal names every issue (a rejected change) or the URL and code. */
async function call<T>(target: AdminTarget, method: "GET" | "POST", path: string, body?: unknown): Promise<T> {
  const answer = await adminRequest(target, method, path, body);
  if (answer.status >= 200 && answer.status <= 299) return answer.json as T;
  const e = adminError(answer.json) as { code?: string; message?: string; details?: readonly ConfigIssue[] } | undefined;
  const issues = Array.isArray(e?.details) ? e.details.map((i) => `\n${i.file}: ${i.path || "(root)"}: ${i.message}`).join("") : "";
  throw failure(`${method} ${target.baseUrl}/admin${path} failed: ${answer.status} ${e?.code ?? ""}: ${e?.message ?? answer.text.slice(0, 200)}${issues}`);
}
