import type { ProbeTarget } from "../traffic/health.ts";
import type { McpEra } from "./bridging.ts";
import type { SubscriptionFilter } from "./subscriptions.ts";
import type { UpstreamAnswer, UpstreamRequestOptions } from "./upstream-client.ts";

/** One upstream MCP server as the runtime uses it: the gateway's client of it, or its own REST server. */
export interface McpServerHandle {
  readonly name: string;
  readonly listFailure: "open" | "closed";
  /** The server's protocol era; undefined for a server the gateway itself answers (it asks the client nothing). */
  readonly era?: McpEra | undefined;
  /** Its active probe (gateway.yaml `healthCheck`); undefined: not probed, always listed. */
  readonly healthProbe?: ProbeTarget | undefined;
  request(method: string, params: Readonly<Record<string, unknown>>, opts: UpstreamRequestOptions): Promise<UpstreamAnswer>;
  /** Holds a client's subscription until `opts.signal` ends it; undefined for a server with nothing to subscribe to. */
  listen?(filter: SubscriptionFilter, opts: UpstreamRequestOptions & { readonly signal: AbortSignal }): Promise<void>;
}
