import type { DrainReport } from "../../src/admit/drain.ts";
import type { ScopeBalance } from "../../src/ledger/ledger-types.ts";
import type { ActiveSnapshot } from "../../src/snapshot/pinned-snapshot.ts";
import { adminCall, adminTarget, ADMIN_TOKEN_ENV, type AdminTarget } from "../admin-client.ts";
import { parseDuration, parseFlags, stringFlag, type ParsedArgs } from "../args.ts";
import { usageError } from "../cli-error.ts";
import { pairs, table } from "../table.ts";

const COMMON = `Common options:
  --admin URL     the admin API (default: $SLUICE_ADMIN_URL, else listeners.admin of
                  gateway.yaml in --config DIR)
  --config DIR    config directory to read the admin listener from (default ./config)
  --json          print the API's JSON instead of a table
The bearer token is read from $${ADMIN_TOKEN_ENV}.`;

export const ADMIN_HELP: Readonly<Record<string, string>> = {
  status: `Usage: sluice status [options]\n\nThe gateway's state: config digest, publication and snapshot revisions, drain state,\nrequests in flight and the resources they hold, budget leases, each backend's credential\n(credential_rejected when its provider refused the key), MCP servers' probed health.\n\n${COMMON}\n`,
  backends: `Usage: sluice backends list [options]\n\nThe backends of the active snapshot: protocol, base URL, the secret their credential names,\ncapabilities and the pools they serve.\n\n${COMMON}\n`,
  routes: `Usage: sluice routes list [options]\n\nEntrypoints, their routes and default, each tier's logical models, and the pools and backends\nthey resolve to in the active snapshot.\n\n${COMMON}\n`,
  drain: `Usage: sluice drain [--timeout DUR] [options]\n\nStops admitting requests (/ready answers 503), gives those in flight up to DUR to finish\n(default 30s; e.g. 90s, 2m), cancels the rest, returns budget slices and writes settlements.\n\n${COMMON}\n`,
  resume: `Usage: sluice resume [options]\n\nAdmits requests again after a drain.\n\n${COMMON}\n`,
  budgets: `Usage: sluice budgets balance TENANT [--scope NAME ...] [options]\n\nWhere each budget scope of TENANT stands: limit, spent, held, pending reconciliation,\noverrun and remaining per metric of the current window.\n\n${COMMON}\n`,
};

const COMMON_FLAGS = { admin: { type: "string" }, config: { type: "string" }, json: { type: "boolean" } } as const;

function targetOf(args: ParsedArgs): Promise<AdminTarget> {
  return adminTarget({ admin: stringFlag(args, "admin"), config: stringFlag(args, "config") });
}

function print(args: ParsedArgs, json: unknown, human: () => string): void {
  process.stdout.write(`${args.values.json === true ? JSON.stringify(json, null, 2) : human()}\n`);
}

interface StatusAnswer {
  readonly configDigest: string;
  readonly publicationRevision: string;
  readonly snapshot: { revision: number; digest: string } | null;
  readonly unmetRequirements: readonly unknown[] | null;
  readonly startedAt: string;
  readonly uptimeSeconds: number;
  readonly draining: boolean;
  readonly inFlight: number;
  readonly resources: Readonly<Record<string, number>>;
  readonly budgetLeases: number;
  /** Absent from gateways older than MCP health. */
  readonly mcpServers?: readonly { name: string; kind: string; probed: boolean; status: string; lastReason: string | null; consecutiveFailures: number }[];
  /** Absent from gateways older than the credential watch. */
  readonly backends?: readonly { name: string; credential: "credential_rejected" | "accepted" | "not_used"; status?: number; since?: string }[];
}

interface RoutesAnswer {
  readonly snapshotRevision: number;
  readonly publicationRevision: string;
  readonly entrypoints: readonly {
    name: string;
    routes: readonly { name: string; tiers: readonly (readonly RouteModel[])[] }[];
    default: readonly (readonly RouteModel[])[];
  }[];
}
interface RouteModel {
  readonly model: string;
  readonly revision: string | null;
  readonly pool: string | null;
  readonly backends: readonly { name: string; protocol: string; model: string }[];
  readonly resolvable: boolean;
}

/** Micro-units of a currency as a decimal amount; tokens and counts as they are. */
function amount(metric: string, n: number): string {
  const currency = /^(?:money|balance):(.+)$/.exec(metric)?.[1];
  return currency === undefined ? String(n) : `${(n / 1_000_000).toFixed(6)} ${currency}`;
}

/** `sluice status|backends|routes|drain|resume|budgets` against a running gateway's admin API. */
export async function adminCommand(command: string, argv: readonly string[]): Promise<number> {
  // Two commands take a verb first (`backends list`, `budgets balance`), as the rest of the CLI.
  const verb = { backends: "list", routes: "list", budgets: "balance" }[command];
  let rest = argv;
  if (verb !== undefined && !(argv[0] === "--help" || argv[0] === "-h")) {
    if (argv[0] !== verb) throw usageError(argv[0] === undefined ? `missing command: sluice ${command} ${verb}` : `unknown command 'sluice ${command} ${argv[0]}' (${verb})`);
    rest = argv.slice(1);
  }
  const extra: Parameters<typeof parseFlags>[1] = command === "drain" ? { timeout: { type: "string" } } : command === "budgets" ? { scope: { type: "string", multiple: true } } : {};
  const positional = command === "budgets" ? { min: 1, max: 1, names: "TENANT" } : { min: 0, max: 0, names: "" };
  const args = parseFlags(rest, { ...COMMON_FLAGS, ...extra }, positional);
  if (args.help) {
    process.stdout.write(ADMIN_HELP[command]!);
    return 0;
  }
  const timeoutFlag = stringFlag(args, "timeout");
  const drainMs = timeoutFlag === undefined ? 30_000 : parseDuration(timeoutFlag, "--timeout");
  if (drainMs > 3_600_000) throw usageError("--timeout must be at most 1h");
  const target = await targetOf(args);
  switch (command) {
    case "status": {
      const s = await adminCall<StatusAnswer>(target, "GET", "/status");
      print(args, s, () =>
        pairs([
          ["state", s.draining ? "draining" : "serving"],
          ["in flight", s.inFlight],
          ["publication", s.publicationRevision],
          ["snapshot", s.snapshot ? `revision ${s.snapshot.revision} (${s.snapshot.digest})` : "none"],
          ["unmet requirements", s.unmetRequirements && s.unmetRequirements.length > 0 ? s.unmetRequirements : "none"],
          ["config digest", s.configDigest],
          ["started", `${s.startedAt} (up ${s.uptimeSeconds} s)`],
          ["budget leases", s.budgetLeases],
          ...Object.entries(s.resources).map(([k, v]) => [`held: ${k}`, v] as const),
          ...(s.backends ?? []).map((b) => [`backend ${b.name}`, backendState(b)] as const),
          ...(s.mcpServers ?? []).map((m) => [`mcp ${m.name}`, `${m.kind}, ${m.probed ? `${m.status}${m.lastReason ? ` (${m.lastReason}${m.consecutiveFailures > 0 ? `, ${m.consecutiveFailures} failed in a row` : ""})` : ""}` : "not probed"}`] as const),
        ]),
      );
      return 0;
    }
    case "backends": {
      const a = await adminCall<ActiveSnapshot>(target, "GET", "/snapshot");
      const poolsOf = (id: string) => a.snapshot.pools.filter((p) => p.members.some((m) => m.backendId === id)).map((p) => p.name);
      print(args, a, () =>
        [
          `snapshot revision ${a.revision} (${a.digest})`,
          table(
            ["NAME", "PROTOCOL", "BASE URL", "CREDENTIAL", "CAPABILITIES", "POOLS"],
            a.snapshot.backends.map((b) => [b.name, b.protocol, b.baseUrl, credentialColumn(b), b.capabilities, poolsOf(b.id)]),
          ),
        ].join("\n"),
      );
      return 0;
    }
    case "routes": {
      const r = await adminCall<RoutesAnswer>(target, "GET", "/routes");
      const rows: unknown[][] = [];
      for (const ep of r.entrypoints) {
        const add = (route: string, tiers: readonly (readonly RouteModel[])[]) =>
          tiers.forEach((tier, i) => {
            for (const m of tier) rows.push([ep.name, route, i + 1, m.model, m.pool, m.backends.map((b) => `${b.name}:${b.model}`), m.resolvable ? "yes" : "NO"]);
          });
        for (const route of ep.routes) add(route.name, route.tiers);
        add("(default)", ep.default);
      }
      print(args, r, () => [`publication ${r.publicationRevision}, snapshot revision ${r.snapshotRevision}`, table(["ENTRYPOINT", "ROUTE", "TIER", "MODEL", "POOL", "BACKENDS", "RESOLVABLE"], rows)].join("\n"));
      return 0;
    }
    case "drain": {
      if (args.values.json !== true) process.stderr.write(`draining (up to ${timeoutFlag ?? "30s"}) …\n`);
      const d = await adminCall<DrainReport & { status: string }>(target, "POST", "/drain", { budgetMs: drainMs }, drainMs + 30_000);
      print(args, d, () => `drained in ${d.durationMs} ms: ${d.inFlightAtStart} in flight at the start, ${d.finished} finished, ${d.cancelled} cancelled`);
      return 0;
    }
    case "resume": {
      const r = await adminCall<{ status: string }>(target, "POST", "/resume");
      print(args, r, () => `resumed: ${r.status}`);
      return 0;
    }
    case "budgets": {
      const tenant = args.positionals[0]!;
      const scopes = (args.values.scope as string[] | undefined) ?? [];
      const query = scopes.map((s) => `scope=${encodeURIComponent(s)}`).join("&");
      const b = await adminCall<{ balances: readonly ScopeBalance[] }>(target, "GET", `/budgets/${encodeURIComponent(tenant)}/balance${query ? `?${query}` : ""}`);
      const rows: unknown[][] = [];
      for (const s of b.balances) {
        for (const l of [s.money, s.tokens, s.balance]) {
          if (l === undefined) continue;
          const until = l.windowEnd > 0 ? new Date(l.windowEnd).toISOString() : "-";
          rows.push([s.scope, l.metric, amount(l.metric, l.limit), amount(l.metric, l.spent), amount(l.metric, l.held), amount(l.metric, l.pending), amount(l.metric, l.overrun), amount(l.metric, l.remaining), until]);
        }
        if (s.requests) rows.push([s.scope, "requests", `${s.requests.perMinute}/min burst ${s.requests.burst}`, "-", "-", "-", "-", `${s.requests.available} now`, "-"]);
        if (!s.money && !s.tokens && !s.balance && !s.requests) rows.push([s.scope, "(none recorded yet)", "-", "-", "-", "-", "-", "-", "-"]);
      }
      print(args, b, () => table(["SCOPE", "METRIC", "LIMIT", "SPENT", "HELD", "PENDING", "OVERRUN", "REMAINING", "WINDOW ENDS"], rows));
      return 0;
    }
    default:
      throw usageError(`unknown command '${command}'`);
  }
}

/** A backend's line in `status`: a refused key says so, with when and how the provider said it. */
function backendState(b: NonNullable<StatusAnswer["backends"]>[number]): string {
  switch (b.credential) {
    case "credential_rejected":
      return `credential_rejected (the provider answered ${b.status ?? "a refusal"} at ${b.since ?? "?"}: check the key its credential names)`;
    case "accepted":
      return "ok (credential accepted)";
    case "not_used":
      return "not used yet";
  }
}

/** The secret names a backend's credential reads (never a value), and how they are used. */
function credentialColumn(b: ActiveSnapshot["snapshot"]["backends"][number]): string | null {
  if (b.credential) return `${b.credential.secret} (${"kind" in b.credential ? b.credential.kind : b.credential.scheme})`;
  if ("awsCredential" in b && b.awsCredential) return `${b.awsCredential.accessKeyId}, ${b.awsCredential.secretAccessKey} (sigv4 ${b.region ?? ""})`;
  return null;
}
