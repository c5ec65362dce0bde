import type { AuthenticatorDeps } from "../../auth/authenticator-chain.ts";
import type { McpAuthorization } from "../../auth/mcp-authorize.ts";
import type { RequestContext } from "../../context/request-context.ts";
import type { Clock } from "../../deps/clock.ts";
import type { Scheduler } from "../../deps/scheduler.ts";
import { GatewayError } from "../../errors/gateway-error.ts";
import type { McpExchange } from "../../invoker/mcp-exchange.ts";
import type { ClientView } from "../../mcp/client-view.ts";
import type { CompiledPublication } from "../../publication/compile-publication.ts";
import type { Principal } from "../../publication/principal.ts";
import type { ReserveDeps } from "../../reserve/reserve-phase.ts";
import type { HealthCache } from "../../traffic/health-cache.ts";
import type { McpIngress } from "./mcp-api.ts";
import type { McpDeps } from "./mcp-deps.ts";

/** What the MCP kind's hooks use besides the servers and the policy, built once per isolate. */
export interface McpKindDeps extends AuthenticatorDeps {
  readonly publication: CompiledPublication;
  readonly clock: Clock;
  readonly scheduler: Scheduler;
  readonly requestDeadlineMs: number;
  readonly reserve: ReserveDeps;
  readonly health: HealthCache | undefined;
  readonly log: (event: Readonly<Record<string, unknown>>) => void;
}

/**
 * One MCP request once the caller and its client are known: what every operation's hooks take,
 * one object instead of a list of parameters. `exchange` and `authorization` are the views of it
 * that the invoke and authorize phases read.
 */
export interface McpCall {
  readonly deps: McpKindDeps;
  readonly mcp: McpDeps;
  readonly ingress: McpIngress;
  readonly ctx: RequestContext;
  readonly principal: Principal;
  readonly client: ClientView;
  readonly exchange: McpExchange;
  readonly authorization: McpAuthorization;
}

/** The caller as the MCP policy reads it. */
export function policySubject(principal: Principal): { readonly tenant: string; readonly key: string } {
  return { tenant: principal.tenantId, key: principal.keyId };
}

/** The servers a request at this endpoint reaches: its one server, or every configured one at `/mcp`. */
export function endpointServers(call: McpCall): string[] {
  const server = call.ingress.server;
  return server === undefined ? [...call.mcp.servers.keys()] : [server];
}

/** `/mcp/<server>` names a configured server, or the request is for nothing here. */
export function knownServer(mcp: McpDeps, server: string | undefined): void {
  if (server !== undefined && !mcp.servers.has(server)) throw new GatewayError("not_found", `No MCP server is named ${JSON.stringify(server.slice(0, 64))}.`);
}

/** Builds the per-request call once the client is known. */
export function mcpCall(deps: McpKindDeps, mcp: McpDeps, ingress: McpIngress, ctx: RequestContext, principal: Principal, client: ClientView): McpCall {
  return {
    deps,
    mcp,
    ingress,
    ctx,
    principal,
    client,
    exchange: { ctx, client, servers: mcp.servers, relays: mcp.relays, send: ingress.send, health: deps.health },
    authorization: { policy: mcp.policy, servers: mcp.servers, caller: policySubject(principal), endpoint: ingress.server, record: ctx.record.mcp },
  };
}
