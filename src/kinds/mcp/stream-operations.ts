/**
 * The MCP kind's subscriptions and the streams that carry what servers send outside a client's
 * requests: a 2026-07-28 client's `subscriptions/listen`, a stateful-era client's
 * `resources/subscribe` / `resources/unsubscribe`, and its GET stream. Each watched resource is
 * one the caller may see (authorize); each stream fans in the servers' subscriptions (invoke).
 */

import { authorizeReach } from "../../auth/mcp-authorize.ts";
import { GatewayError } from "../../errors/gateway-error.ts";
import { invokeUpstream } from "../../invoker/mcp-exchange.ts";
import { fanIn, SUBSCRIPTION_ID } from "../../invoker/mcp-fan-in.ts";
import { EVERYTHING, parseFilter, type SubscriptionFilter } from "../../mcp/subscriptions.ts";
import { upstreamRefusal } from "../../mcp/upstream-errors.ts";
import type { StatelessRequest } from "../../protocol/mcp/stateless-request.ts";
import { endpointServers, type McpCall } from "./mcp-call.ts";
import type { McpOperation } from "./mcp-operation.ts";

/** `subscriptions/listen` (2026-07-28): held until the client goes or the deadline comes near. */
export function listen(call: McpCall, req: StatelessRequest): McpOperation {
  if (call.client.era !== "stateless") throw new GatewayError("mcp_method_not_found", "subscriptions/listen belongs to revision 2026-07-28; a stateful-era session listens on its GET stream.");
  let filter: SubscriptionFilter | undefined;
  return {
    authorize: () => {
      filter = parseFilter(req.params.notifications);
      for (const uri of filter.resourceSubscriptions ?? []) authorizeReach(call.authorization, "resource", uri);
    },
    admissionServer: () => call.ingress.server ?? "*",
    invoke: async () => {
      // The gateway's own acknowledgement, of what it honours: what the client asked for.
      call.ingress.send({ jsonrpc: "2.0", method: "notifications/subscriptions/acknowledged", params: { notifications: filter, _meta: { [SUBSCRIPTION_ID]: req.id } } });
      await fanIn(call.exchange, call.deps, endpointServers(call), filter!, call.ingress.server === undefined, req.id);
    },
    result: () => ({ resultType: "complete", _meta: { [SUBSCRIPTION_ID]: req.id } }),
  };
}

/** `resources/subscribe` and `resources/unsubscribe` (2025 era): passed to the resource's stateful server, in the client's session there. */
export function subscribe(call: McpCall, req: StatelessRequest): McpOperation {
  let target: { readonly server: string; readonly name: string } | undefined;
  return {
    authorize: () => {
      // Only a stateful-era session sends it (the 2026 validator knows no such method), with its uri checked at decode.
      target = authorizeReach(call.authorization, "resource", req.params.uri as string);
      if (call.mcp.servers.get(target.server)?.era !== "stateful") throw new GatewayError("mcp_method_not_found", `MCP server ${target.server} speaks revision 2026-07-28, whose resources are subscribed with subscriptions/listen, which a stateful-era client cannot send.`);
    },
    admissionServer: () => target!.server,
    invoke: async () => {
      const answer = await invokeUpstream(call.exchange, target!.server, req.method, { uri: target!.name });
      if (!answer.ok) throw upstreamRefusal(target!.server, answer.error);
    },
    result: () => ({ resultType: "complete" }),
  };
}

/**
 * A stateful-era client's GET stream: what its servers send outside its requests (list changes,
 * updates of the resources it subscribed to in its session, their own requests to it), from each
 * stateful server it reaches here. It carries no JSON-RPC answer of its own.
 */
export function getStream(call: McpCall): McpOperation {
  return {
    authorize: () => {},
    admissionServer: () => call.ingress.server ?? "*",
    invoke: async () => {
      call.ingress.open();
      const names = endpointServers(call).filter((n) => call.mcp.servers.get(n)?.era === "stateful");
      await fanIn(call.exchange, call.deps, names, EVERYTHING, call.ingress.server === undefined, undefined);
    },
    result: () => undefined,
  };
}
