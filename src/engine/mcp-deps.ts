import type { SessionSealer } from "../mcp/sealed-session.ts";
import type { ToolPolicy } from "../mcp/tool-policy.ts";
import type { UpstreamAnswer } from "../mcp/upstream-client.ts";
import type { ProbeTarget } from "../traffic/health.ts";

/** One upstream MCP server as the engine uses it. */
export interface McpServerHandle {
  readonly name: string;
  readonly listFailure: "open" | "closed";
  /** Its active probe (gateway.yaml `healthCheck`); undefined: not probed, always listed. */
  readonly healthProbe?: ProbeTarget | undefined;
  request(method: string, params: Readonly<Record<string, unknown>>, opts: { readonly signal?: AbortSignal; readonly keepAlive?: (p: Promise<unknown>) => void }): Promise<UpstreamAnswer>;
}

/** The MCP servers and the policy an isolate serves with. */
export interface McpDeps {
  readonly servers: ReadonlyMap<string, McpServerHandle>;
  readonly policy: ToolPolicy;
  /** `serverInfo` in `server/discover` and `initialize`. */
  readonly serverInfo: { readonly name: string; readonly version: string };
  /** Seals stateful-era session ids; undefined: stateful-era clients are not served. */
  readonly sessions?: { readonly sealer: SessionSealer; readonly ttlMs: number } | undefined;
}
