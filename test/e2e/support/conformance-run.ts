import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { stringify } from "yaml";
import { freePort } from "../../../local-stack/ports.ts";
import { startGateway, type RunningGateway } from "../../../local-stack/stack.ts";
import { startKeyProxy } from "./key-proxy.ts";
import { startMcpConformanceServer } from "./mcp-conformance-server.ts";
import { ADMIN_TOKEN, bundledConfig, DEMO_KEY } from "./stack.ts";

/** One check of one scenario, as the runner's `checks.json` records it. */
export interface ConformanceCheck {
  readonly scenario: string;
  readonly id: string;
  readonly status: "SUCCESS" | "FAILURE" | "WARNING" | "INFO" | "SKIPPED";
  readonly errorMessage?: string | undefined;
}

/** One run of the runner's server scenarios against one URL. */
export interface ConformanceRun {
  readonly checks: readonly ConformanceCheck[];
  /** The runner's output, for a failure report. */
  readonly output: string;
}

const require = createRequire(import.meta.url);
const PACKAGE_JSON = require.resolve("@modelcontextprotocol/conformance/package.json");

/** The runner's version, read from its package. */
export const RUNNER_VERSION = (JSON.parse(readFileSync(PACKAGE_JSON, "utf8")) as { version: string }).version;

/** Runs the runner's CLI to its end; its output (stdout and stderr) is returned, whatever its exit code. */
function runner(args: readonly string[], timeoutMs: number): Promise<string> {
  const bin = join(dirname(PACKAGE_JSON), "dist", "index.js");
  const child = spawn(process.execPath, [bin, ...args], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, NO_COLOR: "1" } });
  let output = "";
  // Kept whole (a full run prints some tens of kilobytes): the scenario markers are read from it.
  const keep = (chunk: Buffer) => (output += chunk.toString());
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  // The runner exits 1 when a check fails: that is a result, not an error. Only a hang is.
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`the conformance runner (${args.join(" ")}) did not finish within ${timeoutMs} ms:\n${output.slice(-4000)}`));
    }, timeoutMs);
    // "close", not "exit": the output is complete only once its pipes are.
    child.once("close", () => {
      clearTimeout(timer);
      resolve(output);
    });
  });
}

/**
 * Runs every server scenario of the runner (`server --suite all`: the active ones and the
 * pending) in one child process against `url`, and reads the `checks.json` each scenario writes
 * to its output directory. A scenario the runner could not run at all writes none; it is recorded
 * as one failed check named after the scenario, with the runner's reason.
 */
export async function runConformance(url: string, options: { timeoutMs: number }): Promise<ConformanceRun> {
  const out = mkdtempSync(join(tmpdir(), "sluice-conformance-"));
  try {
    const output = await runner(["server", "--url", url, "--suite", "all", "-o", out], options.timeoutMs);
    const ran = [...output.matchAll(/=== Running scenario: (\S+) ===/g)].map((m) => m[1]!);
    if (ran.length === 0) throw new Error(`the conformance runner ran no scenario:\n${output.slice(-4000)}`);
    const dirs = readdirSync(out);
    const checks: ConformanceCheck[] = [];
    for (const scenario of ran) {
      // server-<scenario>-<ISO time with : and . as ->: the time part tells a scenario from one whose name extends it.
      const dir = dirs.find((d) => d.startsWith(`server-${scenario}-`) && /^\d{4}-\d\d-\d\dT[\d-]+Z$/.test(d.slice(`server-${scenario}-`.length)));
      if (dir === undefined) {
        const reason = new RegExp(`Failed to run scenario ${scenario}:([^\\n]*)`).exec(output)?.[1]?.trim();
        checks.push({ scenario, id: scenario, status: "FAILURE", errorMessage: `the scenario did not run: ${reason ?? "no checks.json written"}` });
        continue;
      }
      const recorded = JSON.parse(readFileSync(join(out, dir, "checks.json"), "utf8")) as { id: string; status: ConformanceCheck["status"]; errorMessage?: string }[];
      for (const c of recorded) checks.push({ scenario, id: c.id, status: c.status, errorMessage: c.errorMessage });
    }
    return { checks, output };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

/** The key a check is compared under: its scenario and id (an id may repeat within a scenario). */
export function keyed(run: ConformanceRun): Map<string, ConformanceCheck[]> {
  const map = new Map<string, ConformanceCheck[]>();
  for (const c of run.checks) {
    const k = `${c.scenario} ${c.id}`;
    map.set(k, [...(map.get(k) ?? []), c]);
  }
  return map;
}

/** Checks that pass direct and do not pass through the gateway (`scenario check`, with the gateway's error). */
export function regressions(direct: ConformanceRun, gateway: ConformanceRun): { readonly key: string; readonly status: string; readonly errorMessage?: string | undefined }[] {
  const through = keyed(gateway);
  const lost: { key: string; status: string; errorMessage?: string | undefined }[] = [];
  for (const [k, checks] of keyed(direct)) {
    if (!checks.every((c) => c.status === "SUCCESS")) continue;
    const other = through.get(k) ?? [];
    const bad = other.find((c) => c.status !== "SUCCESS");
    if (other.length === 0 || bad) lost.push({ key: k, status: bad?.status ?? "MISSING", errorMessage: bad?.errorMessage });
  }
  return lost;
}

/** Both runs: the target direct, and the same target through a gateway at `/mcp/<server>`. */
export interface ConformanceComparison {
  readonly direct: ConformanceRun;
  readonly gateway: ConformanceRun;
  /** The gateway's log tail, for a failure report. */
  readonly gatewayOutput: string;
}

/** The path the target is published under on the gateway. */
export const TARGET_SERVER = "conformance";

/**
 * Starts the conformance target (SDK 1.x, stateful), a gateway fronting it as a stateful server
 * with an allow-all policy for the demo tenant and session secrets for 2025-era clients, and a
 * proxy that adds the demo key (the runner sends none); runs every server scenario against the
 * target and, at the same time, against the proxy's `/mcp/<server>`; stops everything.
 */
export async function compareThroughGateway(options: { timeoutMs: number }): Promise<ConformanceComparison> {
  const target = await startMcpConformanceServer();
  const publicPort = await freePort();
  const proxy = await startKeyProxy(`http://127.0.0.1:${publicPort}`, DEMO_KEY);
  let gateway: RunningGateway | undefined;
  try {
    const g = bundledConfig("gateway");
    // The bundled backends (never called here) point at a loopback simulator address, which the egress guard must list to load.
    const backends = (bundledConfig("backends").backends as { baseUrl: string }[]).map((b) => new URL(b.baseUrl).host);
    g.security.egress = { allow: [new URL(target.url).host, ...backends] };
    g.mcp = {
      servers: [{ name: TARGET_SERVER, url: target.url, era: "stateful" }],
      sessions: { secrets: ["MCP_SESSION_SECRET"] },
      // The runner's DNS-rebinding scenario sends the Origin of the URL it was given (the proxy's) and expects it served.
      allowedOrigins: [proxy.origin],
    };
    const p = bundledConfig("publication");
    p.mcp = {
      policy: {
        revision: "conformance",
        rules: (["tool", "prompt", "resource"] as const).map((kind) => ({ id: `all-${kind}s`, effect: "allow", principals: { tenants: ["demo"] }, servers: [TARGET_SERVER], kind, names: ["*"] })),
      },
    };
    gateway = await startGateway({
      adminToken: ADMIN_TOKEN,
      publicPort,
      secretNames: ["MCP_SESSION_SECRET"],
      secrets: { MCP_SESSION_SECRET: "conformance-session-secret-0123456789abcdef" },
      config: { gateway: stringify(g), publication: stringify(p) },
    });
    const [direct, through] = await Promise.all([runConformance(target.url, options), runConformance(`${proxy.origin}/mcp/${TARGET_SERVER}`, options)]);
    return { direct, gateway: through, gatewayOutput: gateway.output() };
  } finally {
    await gateway?.stop();
    await proxy.close();
    await target.stop();
  }
}
