/**
 * What `bench/ledger.ts` runs: the bench-only ledger Worker (the real BudgetLedger Durable Object
 * behind a tiny fetch handler, see `ledger-worker/`) on plain `workerd serve`, and the real gateway
 * with a two-tenant publication next to the provider simulator. Every process is registered with
 * `children.ts`, so the bench stops it on success, error and interrupt.
 */
import { spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { parse, stringify } from "yaml";
import { OFFLINE_ENV, ROOT } from "../local-stack/build.ts";
import { freePort } from "../local-stack/ports.ts";
import { compatibilitySettings } from "../cli/workerd-config.ts";
import { startGateway, type RunningGateway } from "../local-stack/stack.ts";
import { starting, stopOne } from "./children.ts";
import { allowingSimulator, startBenchSimulator } from "./sluice-config.ts";
import { startWorkerd, type RunningWorkerd } from "./workerd-process.ts";

const WORKER_ENTRY = join(import.meta.dirname, "ledger-worker", "index.js");
const WRANGLER = join(ROOT, "node_modules", ".bin", "wrangler");

const str = (s: string) => JSON.stringify(s);

/**
 * Bundles the ledger Worker the way the gateway is bundled (`wrangler deploy --dry-run`), from a
 * wrangler config generated in `workDir`, so wrangler's scratch files land there and not in the
 * repository. Returns the directory holding `index.js`.
 */
export function buildLedgerWorker(workDir: string): string {
  const compat = compatibilitySettings();
  const config = join(workDir, "wrangler.toml");
  writeFileSync(
    config,
    [
      `name = "sluice-ledger-bench"`,
      `main = ${str(WORKER_ENTRY)}`,
      `compatibility_date = ${str(compat.date)}`,
      `compatibility_flags = [${compat.flags.map(str).join(", ")}]`,
      `[[durable_objects.bindings]]`,
      `name = "BUDGET_LEDGER"`,
      `class_name = "BudgetLedger"`,
      `[[migrations]]`,
      `tag = "v1"`,
      `new_sqlite_classes = ["BudgetLedger"]`,
      "",
    ].join("\n"),
  );
  const outDir = join(workDir, "bundle");
  const res = spawnSync(WRANGLER, ["deploy", "--dry-run", "--config", config, "--outdir", outDir], {
    cwd: ROOT,
    env: { ...process.env, ...OFFLINE_ENV },
    encoding: "utf8",
  });
  if (res.status !== 0) throw new Error(`bundling the ledger Worker failed:\n${res.stdout}\n${res.stderr}`);
  return outDir;
}

/**
 * The workerd config of the ledger Worker: one HTTP socket, the BudgetLedger namespace with SQLite
 * on local disk exactly as the gateway's config declares it, and an outbound network limited to
 * loopback (the Worker makes no outbound calls; a mistake could not leave the machine).
 */
export function renderLedgerWorkerConfig(o: { configDir: string; bundleDir: string; address: string; stateDir: string }): string {
  const compat = compatibilitySettings();
  return `using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "ledger-bench", worker = .ledgerBench),
    (name = "loopback", network = (allow = ["local"])),
    (name = "state", disk = (path = ${str(o.stateDir)}, writable = true)),
  ],
  sockets = [
    (name = "http", address = ${str(o.address)}, http = (), service = "ledger-bench"),
  ],
);

const ledgerBench :Workerd.Worker = (
  modules = [
    (name = "index.js", esModule = embed ${str(relative(o.configDir, join(o.bundleDir, "index.js")))}),
  ],
  compatibilityDate = ${str(compat.date)},
  compatibilityFlags = [${compat.flags.map(str).join(", ")}],
  bindings = [
    (name = "BUDGET_LEDGER", durableObjectNamespace = "BudgetLedger"),
  ],
  durableObjectNamespaces = [
    (className = "BudgetLedger", uniqueKey = "sluice-ledger-bench", enableSql = true),
  ],
  durableObjectStorage = (localDisk = "state"),
  globalOutbound = "loopback",
);
`;
}

/** The ledger Worker running on workerd. */
export type RunningLedgerWorker = RunningWorkerd;

/** Builds the ledger Worker, starts it on `workerd serve` and resolves once it answers. */
export async function startLedgerWorker(): Promise<RunningLedgerWorker> {
  const dir = mkdtempSync(join(tmpdir(), "sluice-bench-ledger-"));
  let bundleDir: string;
  try {
    bundleDir = buildLedgerWorker(dir);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const stateDir = join(dir, "state");
  const port = await freePort();
  const configPath = join(dir, "ledger-bench.capnp");
  writeFileSync(configPath, renderLedgerWorkerConfig({ configDir: dir, bundleDir, address: `127.0.0.1:${port}`, stateDir }));
  mkdirSync(stateDir);
  return startWorkerd({ label: "ledger Worker", configPath, port, workDir: dir });
}

// ---------------------------------------------------------------------------------------------
// The gateway with and without budgets

/** The two API keys of the gateway stage, by role. */
export const GATEWAY_KEYS = { budgeted: "sk-bench-ledger-budgeted", open: "sk-bench-ledger-open" } as const;
/** Tenant ids of the two keys; only the budgeted one has a ledger. */
export const GATEWAY_TENANTS = { budgeted: "bench-budgeted", open: "bench-open" } as const;

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");
const bundled = (file: string): Record<string, unknown> => parse(readFileSync(join(ROOT, "config", `${file}.yaml`), "utf8")) as Record<string, unknown>;

/**
 * The shipped publication (entrypoints, models and their prices) with two tenants whose keys differ
 * only in budgets: `bench-budgeted` has a limit on every scope of its key's path (tenant, team,
 * project, key), all far above what a bench spends, so each attempt is reserved and settled but
 * never refused; `bench-open` declares none, so its requests never reach the ledger.
 */
export function ledgerBenchPublication(): Record<string, unknown> {
  const pub = bundled("publication");
  const huge = { limit: 1_000_000, currency: "USD" };
  pub["tenants"] = [
    {
      id: GATEWAY_TENANTS.budgeted,
      limits: { money: { ...huge, period: "30d" } },
      teams: [{ id: "platform", limits: { tokens: { limit: 2 ** 50, window: "1h" } }, projects: [{ id: "playground", limits: { money: { ...huge, period: "1d" } } }] }],
      apiKeys: [
        {
          id: "budgeted",
          sha256: sha256(GATEWAY_KEYS.budgeted),
          entrypoints: ["*"],
          chargeTo: "platform/playground",
          limits: { requests: { perMinute: 1_000_000_000, burst: 1_000_000_000 } },
        },
      ],
    },
    {
      id: GATEWAY_TENANTS.open,
      teams: [{ id: "platform", projects: [{ id: "playground" }] }],
      apiKeys: [{ id: "open", sha256: sha256(GATEWAY_KEYS.open), entrypoints: ["*"], chargeTo: "platform/playground" }],
    },
  ];
  return pub;
}

/** The provider simulator and the gateway in front of it. */
export interface LedgerGatewayStack {
  readonly simUrl: string;
  readonly simPid: number;
  readonly gateway: RunningGateway;
  readonly adminToken: string;
  readonly alive: () => boolean;
  readonly output: () => string;
  /** Stops the gateway and the simulator. */
  stop(): Promise<void>;
}

/**
 * Starts the simulator (zero latency, `tokens` output tokens, no request history) and the gateway
 * bundle on `workerd serve` with {@link ledgerBenchPublication}, the shipped gateway config and the
 * shipped backends pointed at the simulator.
 */
export async function startLedgerGateway(tokens: number): Promise<LedgerGatewayStack> {
  const knobs = ["--history", "0", "--latency-ms", "0", "--ttft-ms", "0", "--token-interval-ms", "0", "--tokens", String(tokens)];
  const sim = await startBenchSimulator(knobs);
  const backends = bundled("backends") as { backends: { baseUrl: string }[] };
  for (const b of backends.backends) b.baseUrl = `${sim.url}/v1`;
  const adminToken = `bench-${randomBytes(12).toString("hex")}`;
  const gateway = await starting(() =>
    startGateway({ adminToken, config: { backends: stringify(backends), publication: stringify(ledgerBenchPublication()), gateway: allowingSimulator(readFileSync(join(ROOT, "config", "gateway.yaml"), "utf8"), sim.url) } }).then((g) => ({ ...g, name: "Sluice (workerd)" })),
  );
  return {
    simUrl: sim.url,
    simPid: sim.process.pid ?? 0,
    gateway,
    adminToken,
    alive: () => sim.alive() && gateway.alive(),
    output: () => `${gateway.output()}\n--- simulator ---\n${sim.output()}`,
    stop: async () => {
      await stopOne(gateway);
      await stopOne(sim);
    },
  };
}
