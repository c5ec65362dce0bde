/**
 * Subscriptions and the streams that carry what servers send outside a client's requests: a
 * stateful-era client's GET stream, a 2026-07-28 client's `subscriptions/listen`, and a
 * stateful-era client's `resources/subscribe` / `resources/unsubscribe`. Each watched resource is
 * one the caller may see; each stream fans in the subscriptions of the servers the client reaches
 * here and ends in order before the request's deadline (the client then listens again). The
 * filtering and renaming of what is relayed is src/mcp/subscriptions.ts's.
 */

import { GatewayError, toGatewayError } from "../errors/gateway-error.ts";
import type { StatelessRequest } from "../mcp/stateless-request.ts";
import { EVERYTHING, filterFor, parseFilter, relayedNotification, type SubscriptionFilter } from "../mcp/subscriptions.ts";
import { upstreamRefusal } from "../mcp/upstream-errors.ts";
import { admitToInvoke, endpointServers, knownServer, mayReach, sessionClient, type McpCall, type McpCaller, type McpReply } from "./mcp-call.ts";
import { clientSide, invokeUpstream } from "./mcp-upstream.ts";

/** How long before its request's deadline a subscription stream ends in order (the client then listens again). */
const LISTEN_MARGIN_MS = 1_000;
/** `_meta` key naming the `subscriptions/listen` request a notification belongs to (2026-07-28). */
const SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId";

/**
 * A stateful-era client's GET stream: what its servers send outside its requests (list changes,
 * updates of the resources it subscribed to in its session, their own requests to it), from
 * each stateful server it reaches here. The 2026-07-28 revision has no GET (it has
 * `subscriptions/listen`): without a session id the answer is 405.
 */
export async function serveGetStream(caller: McpCaller): Promise<McpReply> {
  const { ctx, mcp, ingress } = caller;
  ctx.record.route = "GET";
  ctx.record.mcp = { method: "GET", jsonrpcId: undefined, protocolVersion: undefined };
  const sessions = mcp.sessions;
  if (!sessions || ingress.headers.get("mcp-session-id") === null) throw new GatewayError("method_not_allowed", "This MCP endpoint takes GET only in a stateful-era session; revision 2026-07-28 subscribes with subscriptions/listen.");
  const client = await sessionClient(caller, sessions);
  const server = ingress.server;
  knownServer(mcp, server);
  await admitToInvoke(caller, server ?? "*");
  ingress.open();
  const names = endpointServers(caller).filter((n) => mcp.servers.get(n)?.era === "stateful");
  await fanIn({ ...caller, client }, names, EVERYTHING, server === undefined, undefined);
  ctx.enter("respond");
  ctx.finish({ kind: "completed" });
  return { kind: "result", status: 200, body: undefined };
}

/** `subscriptions/listen` (2026-07-28): held until the client goes or the deadline comes near. */
export async function listen(call: McpCall, req: StatelessRequest): Promise<Record<string, unknown>> {
  const { ctx, ingress, client } = call;
  const server = ingress.server;
  if (client.era !== "stateless") throw new GatewayError("mcp_method_not_found", "subscriptions/listen belongs to revision 2026-07-28; a stateful-era session listens on its GET stream.");
  ctx.enter("authorize");
  const filter = parseFilter(req.params.notifications);
  for (const uri of filter.resourceSubscriptions ?? []) mayReach(call, "resource", uri);
  await admitToInvoke(call, server ?? "*");
  // The gateway's own acknowledgement, of what it honours: what the client asked for.
  ingress.send({ jsonrpc: "2.0", method: "notifications/subscriptions/acknowledged", params: { notifications: filter, _meta: { [SUBSCRIPTION_ID]: req.id } } });
  await fanIn(call, endpointServers(call), filter, server === undefined, req.id);
  return { resultType: "complete", _meta: { [SUBSCRIPTION_ID]: req.id } };
}

/** `resources/subscribe` and `resources/unsubscribe` (2025 era): passed to the resource's stateful server, in the client's session there. */
export async function subscribe(call: McpCall, req: StatelessRequest): Promise<Record<string, unknown>> {
  const { ctx, mcp } = call;
  ctx.enter("authorize");
  // Only a stateful-era session sends it (the 2026 validator knows no such method), with its uri checked (checkLegacyParams).
  const uri = req.params.uri as string;
  const target = mayReach(call, "resource", uri);
  if (mcp.servers.get(target.server)?.era !== "stateful") throw new GatewayError("mcp_method_not_found", `MCP server ${target.server} speaks revision 2026-07-28, whose resources are subscribed with subscriptions/listen, which a stateful-era client cannot send.`);
  await admitToInvoke(call, target.server);
  const answer = await invokeUpstream(call, target.server, req.method, { uri: target.name });
  if (!answer.ok) throw upstreamRefusal(target.server, answer.error);
  return { resultType: "complete" };
}

/**
 * Holds each server's subscription for the client and relays what the client asked for, until
 * the client goes, the request's deadline comes near (the stream then ends in order and the
 * client listens again), or every server ended its side.
 */
async function fanIn(call: McpCall, names: readonly string[], filter: SubscriptionFilter, virtual: boolean, subscriptionId: string | number | undefined): Promise<void> {
  const { ctx, deps, mcp, ingress } = call;
  const end = new AbortController();
  const stop = () => end.abort();
  ctx.signal.addEventListener("abort", stop, { once: true });
  const cancelTimer = deps.scheduler.schedule(Math.max(0, ctx.deadlineAt - deps.clock.now() - LISTEN_MARGIN_MS), stop);
  try {
    await Promise.all(
      names.map(async (name) => {
        const upstream = mcp.servers.get(name)!;
        if (!upstream.listen) return;
        try {
          await upstream.listen(filterFor(name, filter, virtual), {
            signal: end.signal,
            keepAlive: ctx.waitUntil,
            ...clientSide(call, upstream),
            onNotification: (n) => {
              const out = relayedNotification(name, n, filter, virtual);
              if (out) ingress.send({ jsonrpc: "2.0", method: out.method, params: subscriptionId === undefined ? out.params : { ...out.params, _meta: { [SUBSCRIPTION_ID]: subscriptionId } } });
            },
          });
        } catch (err) {
          // One server's subscription failing leaves the others': it is logged, not fatal.
          if (!end.signal.aborted) deps.log({ kind: "mcp_subscription_failed", requestId: ctx.requestId, server: name, code: toGatewayError(err).code });
        }
      }),
    );
  } finally {
    cancelTimer();
    ctx.signal.removeEventListener("abort", stop);
    end.abort();
  }
  ctx.checkpoint();
}
