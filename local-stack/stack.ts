import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { buildBundle, ROOT } from "./build.ts";
import { spawnOwned } from "./owned-child.ts";
import { freePort, waitForHttp } from "./ports.ts";
import { compatibilitySettings, renderWorkerdConfig } from "../cli/workerd-config.ts";

const NODE = process.execPath;
const WORKERD = join(ROOT, "node_modules", ".bin", "workerd");

/** The simulator's credential in the default config (a local test key, not a secret). */
export const SIMULATOR_API_KEY = "sim-local-key";

/** A child process with its output kept in a bounded tail for error reports. */
export interface Child {
  readonly process: ChildProcess;
  readonly output: () => string;
  readonly alive: () => boolean;
  stop(): Promise<void>;
}

function track(proc: ChildProcess, echo: boolean): Child {
  let tail = "";
  let exited = proc.exitCode !== null;
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString()).slice(-64_000);
    if (echo) process.stdout.write(chunk);
  };
  proc.stdout?.on("data", keep);
  proc.stderr?.on("data", keep);
  const exit = new Promise<void>((resolve) => proc.once("exit", () => {
    exited = true;
    resolve();
  }));
  return {
    process: proc,
    output: () => tail,
    alive: () => !exited,
    async stop() {
      if (exited) return;
      proc.kill("SIGTERM");
      const timer = setTimeout(() => proc.kill("SIGKILL"), 5000);
      await exit;
      clearTimeout(timer);
    },
  };
}

/** Starts the provider simulator and resolves once it printed its listening line. */
export async function startSimulatorProcess(options: { port?: number; apiKey?: string; args?: readonly string[]; echo?: boolean } = {}): Promise<Child & { url: string }> {
  const args = [join(ROOT, "simulator", "main.ts"), "--port", String(options.port ?? 0)];
  if (options.apiKey !== undefined) args.push("--api-key", options.apiKey);
  args.push(...(options.args ?? []));
  // Owned: its own process group (a Ctrl-C drains the gateway before the simulator under it
  // stops) and it never outlives the process that started it.
  const proc = spawnOwned(NODE, args).process;
  // Kept until it is listening: a failed start (a busy port, a bad flag) says why on stderr.
  let stderr = "";
  const keepStderr = (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4_000));
  proc.stderr!.on("data", keepStderr);
  const lines = createInterface({ input: proc.stdout! });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("simulator did not start within 15 s")), 15_000);
    lines.on("line", (line) => {
      try {
        const msg = JSON.parse(line) as { event?: string; url?: string };
        if (msg.event === "listening" && msg.url) {
          clearTimeout(timer);
          resolve(msg.url);
        }
      } catch {
        // not the listening line
      }
    });
    proc.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`simulator exited with code ${code}${stderr.trim() ? `: ${stderr.trim()}` : ""}`));
    });
  });
  lines.close();
  proc.stderr!.off("data", keepStderr);
  return { ...track(proc, options.echo ?? false), url };
}

export interface GatewayOptions {
  readonly publicPort?: number | undefined;
  readonly adminPort?: number | undefined;
  readonly host?: string | undefined;
  /** Persistent Durable Object state; a fresh temporary directory when unset. */
  readonly stateDir?: string | undefined;
  readonly adminToken: string;
  /** Secret values for workerd's environment (provider credentials). */
  readonly secrets?: Readonly<Record<string, string>> | undefined;
  /** Replacement config texts (otherwise the bundled config/ files are used). */
  readonly config?: { gateway?: string; publication?: string; backends?: string } | undefined;
  readonly echo?: boolean | undefined;
  /** Extra secret names to bind from the environment. */
  readonly secretNames?: readonly string[] | undefined;
  /** A bundle built elsewhere (another revision, for side-by-side benchmarks); the current code's by default. */
  readonly bundleDir?: string | undefined;
  /** Compatibility settings for that bundle (its revision's wrangler.toml); this checkout's by default. */
  readonly compatibility?: { readonly date: string; readonly flags: readonly string[] } | undefined;
  /** workerd's outbound allow list, instead of the one gateway.yaml's egress allowlist gives. */
  readonly networkAllow?: readonly string[] | undefined;
  /** Also binds the unauthenticated metrics listener on this loopback port. */
  readonly metricsPort?: number | undefined;
  /** Opens workerd's V8 inspector on this loopback port (profiling; never in production). */
  readonly inspectorPort?: number | undefined;
  /** Workers AI bindings by name, backed by a stand-in service at each address (host:port); see cli/workerd-config.ts. */
  readonly workersAiBindings?: Readonly<Record<string, string>> | undefined;
}

export interface RunningGateway extends Child {
  readonly publicUrl: string;
  readonly adminUrl: string;
  readonly workDir: string;
}

/** workerd could not bind a port that was free when it was picked. */
class PortTakenError extends Error {}

/**
 * Builds the bundle and runs it on plain `workerd serve` with a public and an admin socket. Ports
 * it picks itself are free when picked, but another process may bind one before workerd does: then
 * it starts again on new ones (twice at most).
 */
export async function startGateway(o: GatewayOptions): Promise<RunningGateway> {
  const picked = o.publicPort === undefined && o.adminPort === undefined && o.metricsPort === undefined && o.inspectorPort === undefined;
  for (let tries = 1; ; tries++) {
    try {
      return await startGatewayOnce(o);
    } catch (err) {
      if (picked && tries < 3 && err instanceof PortTakenError) continue;
      throw err;
    }
  }
}

async function startGatewayOnce(o: GatewayOptions): Promise<RunningGateway> {
  const bundleDir = o.bundleDir ?? buildBundle();
  const workDir = mkdtempSync(join(tmpdir(), "sluice-"));
  const stateDir = o.stateDir ?? join(workDir, "state");
  mkdirSync(stateDir, { recursive: true });
  const host = o.host ?? "127.0.0.1";
  const publicPort = o.publicPort ?? (await freePort());
  const adminPort = o.adminPort ?? (await freePort());
  const configFiles: Record<string, string> = {};
  for (const [name, text] of Object.entries(o.config ?? {})) {
    if (text === undefined) continue;
    const file = join(workDir, `${name}.yaml`);
    writeFileSync(file, text);
    configFiles[name] = file;
  }
  const compat = o.compatibility ?? compatibilitySettings();
  const secrets = { SIMULATOR_API_KEY, ...o.secrets, SLUICE_ADMIN_TOKEN: o.adminToken };
  const capnp = renderWorkerdConfig({
    configDir: workDir,
    bundleDir,
    publicAddress: `${host}:${publicPort}`,
    adminAddress: `127.0.0.1:${adminPort}`,
    metricsAddress: o.metricsPort === undefined ? undefined : `127.0.0.1:${o.metricsPort}`,
    networkAllow: o.networkAllow,
    stateDir,
    compatibilityDate: compat.date,
    compatibilityFlags: compat.flags,
    vars: {},
    secretsFromEnv: [...new Set([...Object.keys(secrets), ...(o.secretNames ?? [])])],
    configFiles,
    workersAiBindings: o.workersAiBindings,
  });
  const configPath = join(workDir, "sluice.capnp");
  writeFileSync(configPath, capnp);
  const inspector = o.inspectorPort === undefined ? [] : [`--inspector-addr=127.0.0.1:${o.inspectorPort}`];
  // Owned: it never outlives the test or tool that started it, however that ends.
  const proc = spawnOwned(WORKERD, ["serve", configPath, "--experimental", "--verbose", ...inspector], {
    env: { ...process.env, ...secrets },
  }).process;
  const child = track(proc, o.echo ?? false);
  const publicUrl = `http://${host}:${publicPort}`;
  try {
    await waitForHttp(`${publicUrl}/ready`, 30_000, child.alive);
  } catch (err) {
    await child.stop();
    const output = child.output();
    if (output.includes("Address already in use")) throw new PortTakenError(`gateway could not bind its ports: ${output}`);
    throw new Error(`gateway did not become ready: ${String(err)}\n${output}`);
  }
  return {
    ...child,
    publicUrl,
    adminUrl: `http://127.0.0.1:${adminPort}`,
    workDir,
    async stop() {
      await child.stop();
      rmSync(workDir, { recursive: true, force: true });
    },
  };
}
