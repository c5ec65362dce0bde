/**
 * Runs `null-gateway/worker.js` on plain `workerd serve` with a generated Cap'n Proto config: the
 * same compatibility date and flags as the gateway, one HTTP socket, outbound network to loopback.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { ROOT } from "../local-stack/build.ts";
import { freePort, waitForHttp } from "../local-stack/ports.ts";
import { compatibilitySettings } from "../local-stack/stack.ts";
import { captureOutput, register, stopOne, type Stoppable } from "./children.ts";

const WORKER = join(import.meta.dirname, "null-gateway", "worker.js");
const WORKERD = join(ROOT, "node_modules", ".bin", "workerd");

export interface NullGatewayOptions {
  /** Provider base URL including `/v1`. */
  readonly upstreamUrl: string;
  readonly upstreamKey: string;
  readonly upstreamModel: string;
}

export interface RunningNullGateway extends Stoppable {
  readonly url: string;
  readonly pid: number;
  readonly alive: () => boolean;
  readonly output: () => string;
}

const str = (s: string) => JSON.stringify(s);

/** The workerd config; `embed` paths are relative to `configDir`, where the file is written. */
export function renderNullGatewayConfig(configDir: string, address: string, o: NullGatewayOptions): string {
  const compat = compatibilitySettings();
  return `using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "null-gateway", worker = .nullGateway),
    (name = "internet", network = (allow = ["public", "local"])),
  ],
  sockets = [
    (name = "http", address = ${str(address)}, http = (), service = "null-gateway"),
  ],
);

const nullGateway :Workerd.Worker = (
  modules = [
    (name = "worker.js", esModule = embed ${str(relative(configDir, WORKER))}),
  ],
  compatibilityDate = ${str(compat.date)},
  compatibilityFlags = [${compat.flags.map(str).join(", ")}],
  bindings = [
    (name = "UPSTREAM_URL", text = ${str(o.upstreamUrl)}),
    (name = "UPSTREAM_KEY", text = ${str(o.upstreamKey)}),
    (name = "UPSTREAM_MODEL", text = ${str(o.upstreamModel)}),
  ],
  globalOutbound = "internet",
);
`;
}

/** Starts the null gateway and resolves once it answers. */
export async function startNullGateway(o: NullGatewayOptions): Promise<RunningNullGateway> {
  const dir = mkdtempSync(join(tmpdir(), "sluice-bench-null-"));
  const port = await freePort();
  const configPath = join(dir, "null-gateway.capnp");
  writeFileSync(configPath, renderNullGatewayConfig(dir, `127.0.0.1:${port}`, o));
  // Same flags as the gateway's launcher, so both workerd processes run alike.
  const proc = spawn(WORKERD, ["serve", configPath, "--experimental", "--verbose"], { stdio: ["ignore", "pipe", "pipe"] });
  const output = captureOutput(proc);
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    proc.once("exit", () => {
      exited = true;
      resolve();
    }),
  );
  const stop = async () => {
    if (!exited) {
      proc.kill("SIGTERM");
      const timer = setTimeout(() => proc.kill("SIGKILL"), 5000);
      await exit;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const url = `http://127.0.0.1:${port}`;
  const gateway = register({ name: "null gateway (workerd)", process: proc, url, pid: proc.pid ?? 0, alive: () => !exited, output, stop });
  try {
    await waitForHttp(`${url}/ready`, 30_000, () => !exited);
  } catch (err) {
    await stopOne(gateway);
    throw new Error(`null gateway did not start: ${String(err)}\n${output()}`);
  }
  return gateway;
}
