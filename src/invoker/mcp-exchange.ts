/**
 * The invoke phase of an MCP request towards one upstream server: the request sent in the
 * client's own upstream session with the capabilities the bridging can carry, what the server
 * streams before its answer relayed to the client (its progress and log messages), what it asks
 * the client relayed to a stateful-era client that can take it, and a stateless server's
 * `input_required` bridged round by round for a client that has no such result. Also what every
 * caller of it shares: a server's probed health, and a server's whole list read page by page.
 */

import type { RequestContext } from "../context/request-context.ts";
import { GatewayError, toGatewayError } from "../errors/gateway-error.ts";
import { carriedCapabilities, clientTakes, inputRequiredOf } from "../mcp/bridging.ts";
import type { ClientRelays } from "../mcp/client-relays.ts";
import type { ClientView } from "../mcp/client-view.ts";
import { mcpHealthId } from "../mcp/health-probe.ts";
import type { McpServerHandle } from "../mcp/server-handle.ts";
import type { ServerRequestAnswer, UpstreamAnswer, UpstreamNotification, UpstreamRequestOptions, UpstreamServerRequest } from "../mcp/upstream-client.ts";
import type { CatalogListing } from "../mcp/virtual-catalog.ts";
import type { ListedTool, ServerListing } from "../mcp/virtual-server.ts";
import { isRecord } from "../protocol/fast-guard.ts";
import type { HealthCache } from "../traffic/health-cache.ts";
import type { HealthStatus } from "../traffic/health.ts";

/** One MCP request's side of its upstream exchanges: its context, its client, and where to reach servers and the client. */
export interface McpExchange {
  readonly ctx: RequestContext;
  readonly client: ClientView;
  readonly servers: ReadonlyMap<string, McpServerHandle>;
  /** Requests relayed to stateful-era clients, waiting for their answers (one per isolate). */
  readonly relays: ClientRelays;
  /** Sends a message to the client before the answer (the first one turns the answer into a stream). */
  readonly send: (message: Readonly<Record<string, unknown>>) => void;
  /** The servers' probed health (an isolate cache); undefined when health checks are off. */
  readonly health: HealthCache | undefined;
}

/** How many pages of one server's list the virtual server reads before it reports the list as failed. */
const MAX_LIST_PAGES = 20;

/** How many `input_required` rounds the gateway relays for one request before giving up. */
const MAX_INPUT_ROUNDS = 8;


/**
 * Sends one request upstream in the client's own upstream session, declaring there the
 * capabilities the gateway can carry (src/mcp/bridging.ts). What the server streams before its
 * answer reaches the client; what it asks the client is relayed when the client can take it.
 * A stateless server's `input_required` is passed through to a stateless client, and relayed
 * round by round to a stateful one, which has no such result.
 */
export async function invokeUpstream(call: McpExchange, name: string, method: string, params: Readonly<Record<string, unknown>>, evidence?: Pick<UpstreamRequestOptions, "onSent" | "onEvidence">): Promise<UpstreamAnswer> {
  const { ctx, client } = call;
  const upstream = call.servers.get(name)!;
  const progressToken = isRecord(params._meta) ? params._meta.progressToken : undefined;
  const opts = {
    signal: ctx.signal,
    keepAlive: ctx.waitUntil,
    ...clientSide(call, upstream),
    onNotification: (n: UpstreamNotification) => relayNotification(call, n, progressToken),
    ...evidence,
  };
  let answer = await waited(ctx, () => upstream.request(method, params, opts));
  if (client.era === "stateless" || upstream.era !== "stateless") return answer;
  for (let round = 1; answer.ok; round++) {
    const needed = inputRequiredOf(answer.result);
    if (!needed) break;
    if (round > MAX_INPUT_ROUNDS) throw new GatewayError("upstream_protocol_error", `MCP server ${name} asked for input more than ${MAX_INPUT_ROUNDS} times in one request.`);
    const responses: Record<string, unknown> = {};
    for (const [key, r] of Object.entries(needed.inputRequests)) {
      if (!clientTakes(r.method, client.capabilities)) throw new GatewayError("mcp_missing_capability", `MCP server ${name} needs ${r.method}, which this client did not declare.`);
      const reply = await askClient(call, r);
      if ("error" in reply) throw new GatewayError("invalid_request", `The client answered the relayed ${r.method} with error ${reply.error.code}.`);
      responses[key] = reply.result;
    }
    answer = await waited(ctx, () => upstream.request(method, { ...params, inputResponses: responses, ...(needed.requestState !== undefined ? { requestState: needed.requestState } : {}) }, opts));
  }
  return answer;
}

/** One upstream request, its whole exchange (the answer read) counted as the request's upstream wait. */
async function waited<T>(ctx: RequestContext, send: () => Promise<T>): Promise<T> {
  const end = ctx.upstream.begin();
  try {
    return await send();
  } finally {
    end();
  }
}

/**
 * The client's side of an upstream exchange, by the bridging matrix (src/mcp/bridging.ts): its
 * own upstream session, declaring the capabilities the direction can carry, and — towards a
 * stateful server, for a stateful-era client that declared any — the relay of what the server
 * asks it (a 2026-07-28 server asks by `input_required`, never in a stream).
 */
export function clientSide(call: McpExchange, upstream: McpServerHandle): Pick<UpstreamRequestOptions, "session" | "onRequest"> {
  const { client } = call;
  const capabilities = carriedCapabilities(client.era, upstream.era, client.capabilities);
  return {
    session: { key: `${client.sessionKey} ${JSON.stringify(capabilities)}`, capabilities },
    ...(client.era === "stateful" && upstream.era === "stateful" && Object.keys(capabilities).length > 0 ? { onRequest: (r: UpstreamServerRequest) => askClient(call, r) } : {}),
  };
}

/** Progress of this request (by the caller's own token) and log messages reach the client; nothing else does. */
function relayNotification(call: McpExchange, n: UpstreamNotification, progressToken: unknown): void {
  if (n.method === "notifications/progress") {
    if (progressToken === undefined || !isRecord(n.params) || n.params.progressToken !== progressToken) return;
  } else if (n.method !== "notifications/message") return;
  call.send({ jsonrpc: "2.0", method: n.method, ...(n.params !== undefined ? { params: n.params } : {}) });
}

/** Asks a stateful-era client what a server asks it, when it declared it can be asked. */
async function askClient(call: McpExchange, r: UpstreamServerRequest): Promise<ServerRequestAnswer> {
  const { client } = call;
  if (client.relaySession === undefined || !clientTakes(r.method, client.capabilities)) return { error: { code: -32601, message: `The client did not declare the capability for ${r.method}.` } };
  return await call.relays.ask(client.relaySession, r, call.send, call.ctx.signal);
}

/**
 * The server's probed health, and its probes started (once per isolate) when it has
 * `healthCheck`: `unknown` without probes, before the first verdict, or when the monitor
 * cannot be read — health is advisory and fails open, as for backends.
 */
export function serverHealth(caller: McpExchange, name: string): HealthStatus {
  const probe = caller.servers.get(name)?.healthProbe;
  const gate = probe ? caller.health?.forRequest(caller.ctx.waitUntil) : undefined;
  if (!probe || !gate) return "unknown";
  gate.ensureWatched(mcpHealthId(name), probe);
  return gate.status(mcpHealthId(name));
}

/** One server's whole tool list (`merging`: for the virtual server, see {@link listAll}). */
export async function listTools(call: McpExchange, name: string, merging: boolean): Promise<ServerListing> {
  const all = await listAll(call, name, "tools/list", "tools", merging);
  if (!all.ok) return all;
  return { server: name, ok: true, tools: all.items.filter((t): t is ListedTool => typeof t.name === "string") };
}

/**
 * Every page of one server's list, for the virtual server (which merges whole lists and so has
 * no cursor of its own to give); bounded, so a server that pages forever cannot hold the request.
 */
export async function listAll(call: McpExchange, name: string, method: string, field: string, merging: boolean): Promise<CatalogListing> {
  // On the virtual server a server the probes found down is reported in `partial` at once
  // instead of being waited on; one that fails closed is still asked (the probes can be wrong).
  if (merging && call.servers.get(name)!.listFailure === "open" && serverHealth(call, name) === "unhealthy") return { server: name, ok: false, reason: "unhealthy" };
  const items: Record<string, unknown>[] = [];
  let cursor: string | undefined;
  try {
    for (let page = 0; page < MAX_LIST_PAGES; page++) {
      const answer = await invokeUpstream(call, name, method, cursor === undefined ? {} : { cursor });
      if (!answer.ok) return { server: name, ok: false, reason: `error ${answer.error.code}` };
      const result = isRecord(answer.result) ? answer.result : {};
      if (Array.isArray(result[field])) items.push(...(result[field] as unknown[]).filter(isRecord));
      cursor = typeof result.nextCursor === "string" && result.nextCursor !== "" ? result.nextCursor : undefined;
      if (cursor === undefined) return { server: name, ok: true, items };
    }
    return { server: name, ok: false, reason: `more than ${MAX_LIST_PAGES} pages` };
  } catch (err) {
    return { server: name, ok: false, reason: toGatewayError(err).code };
  }
}

/**
 * What of a caller's params goes upstream besides the request's own fields: its progress token
 * (the rest of its `_meta` is not the server's business) and, in the 2026-07-28 revision, the
 * answers to an `input_required` result with the state the server asked to have echoed.
 */
export function forwardedParams(params: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (isRecord(params._meta) && params._meta.progressToken !== undefined) out._meta = { progressToken: params._meta.progressToken };
  if (isRecord(params.inputResponses)) out.inputResponses = params.inputResponses;
  if (typeof params.requestState === "string") out.requestState = params.requestState;
  return out;
}
