import type { ApprovalDeps } from "../../approvals/approval-desk-rpc.ts";
import type { ClientRelays, InFlightRequests } from "../../mcp/client-relays.ts";
import type { SessionSealer } from "../../mcp/sealed-session.ts";
import type { McpServerHandle } from "../../mcp/server-handle.ts";
import type { ToolPolicy } from "../../mcp/tool-policy.ts";
import type { ToolPrices } from "../../publication/tool-prices.ts";

/** The MCP servers and the policy an isolate serves with. */
export interface McpDeps {
  readonly servers: ReadonlyMap<string, McpServerHandle>;
  readonly policy: ToolPolicy;
  /** Prices and call-rate limits of tools (`mcp.prices`); absent: every tool is free and unlimited. */
  readonly prices?: ToolPrices | undefined;
  /** `serverInfo` in `server/discover` and `initialize`. */
  readonly serverInfo: { readonly name: string; readonly version: string };
  /** Seals stateful-era session ids; undefined: stateful-era clients are not served. */
  readonly sessions?: { readonly sealer: SessionSealer; readonly ttlMs: number } | undefined;
  /** Requests relayed to stateful-era clients, waiting for their answers (one per isolate). */
  readonly relays: ClientRelays;
  /** Stateful-era requests running in this isolate, for their clients' cancellations. */
  readonly inFlight: InFlightRequests;
  /** Approvals of tool calls a rule marks `approval: required`; undefined: such calls are refused. */
  readonly approvals?: ApprovalDeps | undefined;
}
