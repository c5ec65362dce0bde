import { authenticateCaller, type PresentedCredentials } from "../auth/authenticator-chain.ts";
import { grantedEntrypoints } from "../auth/authorize.ts";
import type { AbortReason } from "../context/request-context.ts";
import type { RequestTiming } from "../context/request-timing.ts";
import { requestTrace } from "../context/trace-context.ts";
import type { A2aIngress, A2aReply } from "../kinds/a2a/a2a-api.ts";
import { A2aTurn } from "../kinds/a2a/a2a-turn.ts";
import { A2aPushRelayTurn, type A2aPushIngress, type A2aPushReply } from "../kinds/a2a/push-relay-turn.ts";
import type { McpIngress, McpReply } from "../kinds/mcp/mcp-api.ts";
import { McpTurn } from "../kinds/mcp/mcp-turn.ts";
import type { Ingress } from "../kinds/model/model-api.ts";
import type { EngineDeps } from "./engine-deps.ts";
import { Runner } from "./runner.ts";
import type { ExplainAnswer } from "../kinds/model/explain-answer.ts";
import { RequestSession, type ExplainMode } from "./session.ts";
import type { ListedModel, Session } from "./session-api.ts";

/** An MCP request on the runner: the adapter runs it whole, or aborts it when the client goes. */
export interface McpSession {
  run(): Promise<McpReply>;
  abort(reason: AbortReason): void;
  /** Where the request's time went so far (see `Runner.timing`). */
  timing(): RequestTiming;
}

/** An A2A call on the runner: the adapter runs it whole, or aborts it when the client goes. */
export interface A2aSession {
  run(): Promise<A2aReply>;
  abort(reason: AbortReason): void;
  /** Where the request's time went so far (see `Runner.timing`). */
  timing(): RequestTiming;
}

/** A relayed push notification on the runner (an operation of the A2A kind). */
export interface A2aPushSession {
  run(): Promise<A2aPushReply>;
  abort(reason: AbortReason): void;
  /** Where the request's time went so far (see `Runner.timing`). */
  timing(): RequestTiming;
}

/** The transport-neutral gateway engine: one per isolate and publication. */
export interface Engine {
  readonly publicationRevision: string;
  /** A model request (the model kind). */
  begin(ingress: Ingress): Session;
  /** An MCP request (the MCP kind) on the same runner; undefined when no MCP server is configured. */
  beginMcp(ingress: McpIngress): McpSession | undefined;
  /** An A2A call (the A2A kind) on the same runner; undefined when no agent is configured. */
  beginA2a(ingress: A2aIngress): A2aSession | undefined;
  /** An agent's push notification for a caller's webhook, relayed on the same runner; undefined when no agent is configured. */
  beginA2aPush(ingress: A2aPushIngress): A2aPushSession | undefined;
  /**
   * Explains a chat request without dispatching it: the model kind on the one runner in explain
   * mode, for the caller the operator names (`explain.as`). Its `apiKey` is ignored.
   */
  explain(ingress: Ingress, explain: ExplainMode): Promise<ExplainAnswer>;
  /** Authenticates a caller (the authenticator chain) and lists what it may call. @throws GatewayError on a bad credential. */
  listModels(credentials: PresentedCredentials): Promise<ListedModel[]>;
}

/** Builds the engine over the isolate's runtime: every request it begins runs on the one runner. */
export function createEngine(deps: EngineDeps): Engine {
  const mcp = deps.mcp;
  const a2a = deps.a2a;
  const traceOf = (traceParent: A2aIngress["traceParent"]) => requestTrace(traceParent, deps.tracing?.trustClient ?? false, undefined, deps.tracing?.sample ?? (() => false));
  return {
    publicationRevision: deps.publication.revision,
    begin: (ingress) => new RequestSession(deps, { ingress }),
    explain: (ingress, explain) => new RequestSession(deps, { ingress: { ...ingress, apiKey: undefined, operation: "chat" }, explain }).explain(),
    beginMcp: (ingress) =>
      mcp && mcp.servers.size > 0
        ? new Runner(
            deps,
            {
              requestId: ingress.requestId,
              receivedAt: ingress.receivedAt,
              waitUntil: ingress.waitUntil,
              trace: requestTrace(ingress.traceParent, deps.tracing?.trustClient ?? false, undefined, deps.tracing?.sample ?? (() => false)),
            },
            (ctx) => new McpTurn(deps, mcp, ctx, ingress),
          )
        : undefined,
    beginA2a: (ingress) =>
      a2a
        ? new Runner(deps, { requestId: ingress.requestId, receivedAt: ingress.receivedAt, waitUntil: ingress.waitUntil, trace: traceOf(ingress.traceParent) }, (ctx) => new A2aTurn(deps, a2a, ctx, ingress))
        : undefined,
    beginA2aPush: (ingress) =>
      a2a
        ? new Runner(deps, { requestId: ingress.requestId, receivedAt: ingress.receivedAt, waitUntil: ingress.waitUntil, trace: traceOf(ingress.traceParent) }, (ctx) => new A2aPushRelayTurn(deps, a2a, ctx, ingress))
        : undefined,
    async listModels(credentials) {
      const principal = await authenticateCaller(deps, credentials, "model");
      return grantedEntrypoints(deps.publication, principal).map((ep) => ({ id: ep.name, description: ep.description }));
    },
  };
}
