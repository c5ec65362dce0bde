/**
 * The Sluice config every bench driver runs: the shipped config files, the backend pointed at the
 * simulator's actual port, and one extra tenant without budgets (its key never reaches the ledger),
 * so a budgeted and an open key can be compared on the same process.
 */
import { createHash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import { ROOT } from "../local-stack/build.ts";
import { SIMULATOR_API_KEY, startGateway, startSimulatorProcess, type GatewayOptions } from "../local-stack/stack.ts";
import { starting } from "./children.ts";
import { BenchError } from "./entry.ts";
import type { Workload } from "./workload.ts";

/** The shipped demo key: charged to the demo tenant's strict budgets. */
export const DEMO_KEY = "sk-sluice-demo";
/** A key of a tenant without budgets, added to the shipped publication. */
export const OPEN_KEY = "sk-bench-open";
/** The public model both keys call. */
export const PUBLIC_MODEL = "sluice-chat";
/** The simulator model behind it (what the null gateway asks for). */
export const BACKEND_MODEL = "sim-small";

/**
 * The gateway.yaml a bundle ships: its own bundled copy when `bundleDir` is another revision's
 * bundle (bench:compare), so that revision is given a file its own schema accepts; this
 * checkout's otherwise.
 */
function shippedGatewayYaml(bundleDir: string | undefined): string {
  // The copy the bundle imports: an out directory may hold older ones.
  const bundled = bundleDir === undefined ? undefined : /from "\.\/([^"]*gateway\.yaml)"/.exec(readFileSync(join(bundleDir, "index.js"), "utf8"))?.[1];
  return readFileSync(bundled === undefined ? join(ROOT, "config", "gateway.yaml") : join(bundleDir!, bundled), "utf8");
}

/**
 * A gateway.yaml text with the simulator's address (host and port) added to its egress allowlist,
 * so the guard lets plain http to that loopback port through. A text without an allowlist comes
 * from a revision before the egress guard, which needs none: it is returned unchanged.
 */
export function allowingSimulator(gatewayYaml: string, simUrl: string): string {
  const g = parseYaml(gatewayYaml) as { security?: { egress?: { allow?: string[] } } };
  const egress = g.security?.egress;
  if (!egress) return gatewayYaml;
  egress.allow = [...(egress.allow ?? []), new URL(simUrl).host];
  return stringifyYaml(g);
}

/**
 * Config texts for `startGateway`: backends at `simUrl`, the open tenant added, the access log as
 * asked, and the simulator's address added to the egress allowlist (a revision from before the
 * egress guard has no allowlist and needs none).
 */
export function benchGatewayConfig(simUrl: string, accessLog: boolean, bundleDir?: string): { backends: string; publication: string; gateway: string } {
  const backends = readFileSync(join(ROOT, "config", "backends.yaml"), "utf8");
  const backendsForSim = backends.replace(/^(\s*baseUrl:\s*)http:\/\/127\.0\.0\.1:\d+\/v1\s*$/m, `$1${simUrl}/v1`);
  if (backendsForSim === backends) throw new BenchError("config/backends.yaml has no `baseUrl: http://127.0.0.1:<port>/v1` line to point at the simulator");
  const shipped = shippedGatewayYaml(bundleDir);
  let gateway = shipped;
  if (!accessLog) {
    gateway = shipped.replace(/^(\s*accessLog:\s*)true\s*$/m, "$1false");
    if (gateway === shipped) throw new BenchError("the shipped gateway.yaml has no `accessLog: true` line to turn off");
  }
  gateway = allowingSimulator(gateway, simUrl);
  const pub = parseYaml(readFileSync(join(ROOT, "config", "publication.yaml"), "utf8")) as { tenants: unknown[] };
  pub.tenants.push({ id: "bench-open", apiKeys: [{ id: "bench-open", sha256: createHash("sha256").update(OPEN_KEY).digest("hex"), entrypoints: ["*"] }] });
  return { backends: backendsForSim, publication: stringifyYaml(pub), gateway };
}

/** `--key open|budgeted` (default open): the bearer key it names. */
export function keyFlag(value: string | undefined, usage: string): { readonly name: "open" | "budgeted"; readonly key: string } {
  const name = value ?? "open";
  if (name !== "open" && name !== "budgeted") throw new BenchError(`--key must be open or budgeted\n${usage}`);
  return { name, key: name === "open" ? OPEN_KEY : DEMO_KEY };
}

/** `--workload buffered|streaming` (default buffered), sized as `npm run bench` sizes them by default unless `tokens` says. */
export function workloadFlag(value: string | undefined, usage: string, tokens?: number): Workload {
  const name = value ?? "buffered";
  if (name !== "buffered" && name !== "streaming") throw new BenchError(`--workload must be buffered or streaming\n${usage}`);
  return name === "streaming" ? { name: "streaming", stream: true, tokens: tokens ?? 32 } : { name: "buffered", stream: false, tokens: tokens ?? 16 };
}

/** The provider simulator for a bench, registered for shutdown; no request history kept. */
export function startBenchSimulator(args: readonly string[] = ["--history", "0"]) {
  return starting(() => startSimulatorProcess({ apiKey: SIMULATOR_API_KEY, args }).then((c) => ({ ...c, name: "simulator" })));
}

/** Sluice on workerd with {@link benchGatewayConfig}, a random admin token, registered for shutdown as `name`. */
export function startBenchGateway(simUrl: string, o: { readonly name: string; readonly accessLog: boolean } & Omit<GatewayOptions, "adminToken" | "config">) {
  const { name, accessLog, ...options } = o;
  return starting(() => startGateway({ ...options, adminToken: `bench-${randomBytes(12).toString("hex")}`, config: benchGatewayConfig(simUrl, accessLog, options.bundleDir) }).then((g) => ({ ...g, name })));
}
