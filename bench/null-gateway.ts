/**
 * Runs `null-gateway/worker.js` on plain `workerd serve` with a generated Cap'n Proto config: the
 * same compatibility date and flags as the gateway, one HTTP socket, outbound network to loopback.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { freePort } from "../local-stack/ports.ts";
import { compatibilitySettings } from "../cli/workerd-config.ts";
import { startWorkerd, type RunningWorkerd } from "./workerd-process.ts";

const WORKER = join(import.meta.dirname, "null-gateway", "worker.js");

export interface NullGatewayOptions {
  /** Provider base URL including `/v1`. */
  readonly upstreamUrl: string;
  readonly upstreamKey: string;
  readonly upstreamModel: string;
  /** The model `/v1/embeddings` requests ask for (default: `upstreamModel`). */
  readonly upstreamEmbedModel?: string;
  /** The MCP server's endpoint, where `/mcp/…` requests go. */
  readonly upstreamMcpUrl: string;
}

/** The null gateway running on workerd. */
export type RunningNullGateway = RunningWorkerd;

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
    (name = "UPSTREAM_MODEL", text = ${str(o.upstreamModel)}),${o.upstreamEmbedModel === undefined ? "" : `\n    (name = "UPSTREAM_EMBED_MODEL", text = ${str(o.upstreamEmbedModel)}),`}
    (name = "UPSTREAM_MCP_URL", text = ${str(o.upstreamMcpUrl)}),
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
  return startWorkerd({ label: "null gateway", configPath, port, workDir: dir });
}
