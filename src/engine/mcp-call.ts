/**
 * The per-request context every part of an MCP request takes, and the facts they all read: what
 * the adapter handed in ({@link McpIngress}), what the engine answers ({@link McpReply}), the
 * authenticated caller ({@link McpCaller}) and, once known, the client behind it ({@link McpCall},
 * {@link ClientView}); with the three checks several parts share (the server named, the
 * stateful-era session presented, admission). It sits below the other `mcp-*` modules of the
 * engine so that they share one context object instead of a list of parameters, without cycles.
 */

import { admitRequest } from "../admit/admit-phase.ts";
import type { Workload } from "../attribution/workload.ts";
import type { RequestContext } from "../context/request-context.ts";
import type { TraceParent } from "../context/trace-context.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { McpEra } from "../mcp/bridging.ts";
import type { HeaderReader } from "../mcp/stateless-request.ts";
import type { PolicyDecision } from "../mcp/tool-policy.ts";
import { routeCatalogRead } from "../mcp/virtual-catalog.ts";
import type { Principal } from "../publication/principal.ts";
import type { EngineDeps } from "./engine-deps.ts";
import type { McpDeps } from "./mcp-deps.ts";

/** What the HTTP adapter hands the engine for one MCP request: nothing transport-specific. */
export interface McpIngress {
  readonly requestId: string;
  readonly receivedAt: number;
  readonly apiKey: string | undefined;
  /** The `Authorization: Bearer` credential alone: an OAuth access token is only read from there. */
  readonly bearer?: string | undefined;
  /** The request's headers, read only to cross-check the body (never to decide). */
  readonly headers: HeaderReader;
  readonly readBody: () => Promise<unknown>;
  /** `/mcp/<server>`: that server alone, names unchanged; undefined: the virtual server. */
  readonly server: string | undefined;
  readonly traceParent?: TraceParent | undefined;
  readonly waitUntil: (p: Promise<unknown>) => void;
  /**
   * Sends a message to the client before the answer (progress, logging, a relayed request). The
   * first one turns the answer into a stream; the reply then ends that stream.
   */
  readonly send: (message: Readonly<Record<string, unknown>>) => void;
  /** Turns the answer into a stream before any message (a stream that carries only what comes later). */
  readonly open: () => void;
  /** The workload behind the call, from the trusted headers configured for it. */
  readonly workload?: Workload | undefined;
  /** `GET`: a stateful-era client's stream of what its servers send outside its requests. */
  readonly httpMethod: "POST" | "GET";
  /**
   * The origin the request came in on (an approval's status page is named under it unless
   * configured); read only when an approval is opened, so the URL is not parsed for every request.
   */
  readonly origin?: (() => string) | undefined;
}

/**
 * The answer: a JSON-RPC result (200), an accepted notification (202, no body), or a refusal the
 * adapter renders in JSON-RPC's envelope, answering the request's id when it was read.
 */
export type McpReply =
  | { readonly kind: "result"; readonly status: 200 | 202; readonly body: unknown; readonly headers?: Readonly<Record<string, string>> | undefined }
  | {
      readonly kind: "error";
      readonly error: GatewayError;
      readonly id: string | number | null;
      /** The HTTP status when the error is in-band (a server's own refusal, answered as the server would); else the code's. */
      readonly status?: number | undefined;
    };

/** The client a request came from, as the bridging needs it. */
export interface ClientView {
  readonly era: McpEra;
  readonly capabilities: Readonly<Record<string, unknown>>;
  /** The client's own upstream sessions are keyed by this (its gateway session, or its key). */
  readonly sessionKey: string;
  /** A stateful-era client's gateway session id: where relayed requests' answers arrive. */
  readonly relaySession: string | undefined;
}

/** One MCP request once its caller is authenticated: the runtime, the request and who sent it. */
export interface McpCaller {
  readonly deps: EngineDeps;
  readonly mcp: McpDeps;
  readonly ingress: McpIngress;
  readonly ctx: RequestContext;
  readonly principal: Principal;
}

/** One MCP request once the client behind it is known too: what answers, tool calls, streams and upstream calls take. */
export interface McpCall extends McpCaller {
  readonly client: ClientView;
}

/** A stateful-era session's store: present only when a session secret is configured. */
export type McpSessions = NonNullable<McpDeps["sessions"]>;

/** `/mcp/<server>` names a configured server, or the request is for nothing here. */
export function knownServer(mcp: McpDeps, server: string | undefined): void {
  if (server !== undefined && !mcp.servers.has(server)) throw new GatewayError("not_found", `No MCP server is named ${JSON.stringify(server.slice(0, 64))}.`);
}

/**
 * The stateful-era client behind the request's `Mcp-Session-Id`: a session this gateway sealed
 * for this principal. Unknown, expired, tampered or another caller's: to this caller the session
 * does not exist (404, and the client initializes again, as the specification prescribes).
 */
export async function sessionClient(caller: McpCaller, sessions: McpSessions): Promise<ClientView & { readonly relaySession: string }> {
  const { principal } = caller;
  const presented = caller.ingress.headers.get("mcp-session-id");
  if (presented === null) throw new GatewayError("invalid_request", "Send the Mcp-Session-Id this gateway answered initialize with.");
  const opened = await sessions.sealer.open(presented, `${principal.tenantId}/${principal.keyId}`, caller.deps.clock.now());
  if (!opened.ok) throw new GatewayError("not_found", "The MCP session is unknown or has expired: initialize again.");
  return { era: "stateful", capabilities: opened.state.clientCapabilities, sessionKey: `session:${presented}`, relaySession: presented };
}

/** The admit phase of an MCP request: the drain's ticket and an admission lease keyed by the server (`*`: several). */
export async function admitMcp(caller: McpCaller, server: string): Promise<void> {
  caller.ctx.enter("admit");
  await admitRequest(caller.ctx, caller.deps.admission, caller.deps.drain, { tenant: caller.principal.tenantId, model: `mcp:${server}` });
}

/** From an authorized request to its upstream calls: `decide`, `admit` (keyed by `server`), then `invoke`. */
export async function admitToInvoke(caller: McpCaller, server: string): Promise<void> {
  caller.ctx.enter("decide");
  await admitMcp(caller, server);
  caller.ctx.enter("invoke");
}

/** The servers a request at this endpoint reaches: its one server, or every configured one at `/mcp`. */
export function endpointServers(caller: McpCaller): string[] {
  const server = caller.ingress.server;
  return server === undefined ? [...caller.mcp.servers.keys()] : [server];
}

/** The caller as the MCP policy reads it. */
export function policySubject(caller: McpCaller): { readonly tenant: string; readonly key: string } {
  return { tenant: caller.principal.tenantId, key: caller.principal.keyId };
}

/** Records the policy's decision on the request and which server and item it is about. */
export function noteDecision(caller: McpCaller, decision: PolicyDecision, server: string, target: string): void {
  if (caller.ctx.record.mcp) Object.assign(caller.ctx.record.mcp, { decision, server, target });
}

/**
 * The server and own name of a prompt or resource named at this endpoint, when the caller may see
 * it (reaching it — completing its argument, watching it — reveals what a list would); the
 * decision is recorded either way, and an item the caller may not see is refused.
 */
export function mayReach(caller: McpCaller, kind: "prompt" | "resource", named: string): { readonly server: string; readonly name: string } {
  const { mcp } = caller;
  const server = caller.ingress.server;
  const target = server === undefined ? routeCatalogRead(kind === "prompt" ? "prompts/get" : "resources/read", named, mcp.servers) : { server, name: named };
  const decision = mcp.policy.visible({ ...policySubject(caller), server: target.server, kind, name: target.name });
  noteDecision(caller, decision, target.server, target.name);
  if (!decision.allowed) throw new GatewayError("tool_not_allowed", `${kind === "prompt" ? "Prompt" : "Resource"} ${JSON.stringify(named.slice(0, 128))} is not available to this caller (${decision.reason}).`);
  return target;
}
