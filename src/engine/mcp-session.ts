/**
 * The entry of one MCP request and its dispatch by protocol era: the request context it runs on,
 * authentication, then a GET stream (mcp-streams.ts), a stateful-era (2025) message — a sealed
 * session's `initialize`, a client's answer to a relayed request, a cancellation, or a method
 * answered in the 2025 shape — or a 2026-07-28 stateless request; and the one place a failure
 * becomes the reply, in-band or not. What each method answers is mcp-answers.ts's; tool calls and
 * tasks are mcp-tools.ts's; upstream calls and relays are mcp-upstream.ts's.
 */

import { readAttribution } from "../attribution/attribution.ts";
import { authenticateMcp } from "../auth/mcp-credentials.ts";
import { RequestContext } from "../context/request-context.ts";
import { requestTrace } from "../context/trace-context.ts";
import { GatewayError, toGatewayError } from "../errors/gateway-error.ts";
import { clientResponseOf } from "../mcp/client-relays.ts";
import { checkLegacyParams, isStatelessMessage, legacyVersionOf, negotiateVersion, validateLegacyMessage } from "../mcp/legacy-request.ts";
import { STATELESS_VERSION, validateStatelessRequest } from "../mcp/stateless-request.ts";
import { TASKS_CAPABILITY } from "../mcp/task-support.ts";
import { UpstreamRefusal } from "../mcp/upstream-errors.ts";
import { isRecord } from "../protocol/fast-guard.ts";
import type { EngineDeps } from "./engine-deps.ts";
import { answerMethod } from "./mcp-answers.ts";
import { knownServer, sessionClient, type ClientView, type McpCaller, type McpIngress, type McpReply, type McpSessions } from "./mcp-call.ts";
import type { McpDeps } from "./mcp-deps.ts";
import { serveGetStream } from "./mcp-streams.ts";
import { tasksServed } from "./mcp-tools.ts";

// The request's types live beside the context the other mcp-* modules share; the session is where callers import them.
export type { McpIngress } from "./mcp-call.ts";

/**
 * One MCP request through the same runtime as a model request: its own request context (ids,
 * deadline, holdings, the one terminal that logs it), `authenticate` (an API key, or an OAuth access token),
 * `decode` (the revision's per-request validation), `authorize` and `decide` (the tool policy and
 * the server a name reaches), `admit` (the drain's ticket and an admission lease keyed by the
 * server), `invoke` (the gateway's own upstream client) and `respond`.
 */
export class McpSession {
  readonly #deps: EngineDeps;
  readonly #mcp: McpDeps;
  readonly #ingress: McpIngress;
  readonly #ctx: RequestContext;
  /** Set once a stateful-era request presented a valid session: its protocol errors are then answered in-band. */
  #inSession = false;

  constructor(deps: EngineDeps, mcp: McpDeps, ingress: McpIngress) {
    this.#deps = deps;
    this.#mcp = mcp;
    this.#ingress = ingress;
    this.#ctx = new RequestContext({
      requestId: ingress.requestId,
      receivedAt: ingress.receivedAt,
      clock: deps.clock,
      scheduler: deps.scheduler,
      sink: deps.sink,
      waitUntil: ingress.waitUntil,
      onUndoError: deps.onUndoError,
      trace: requestTrace(ingress.traceParent, deps.tracing?.trustClient ?? false, undefined, deps.tracing?.sample ?? (() => false)),
    });
    this.#ctx.record.publicationRevision = deps.publication.revision;
    this.#ctx.record.entrypoint = ingress.server === undefined ? "mcp" : `mcp/${ingress.server}`;
    this.#ctx.record.workload = ingress.workload;
  }

  /** A client disconnect, the deadline or a drain: releases everything there and then. */
  abort(): void {
    this.#ctx.abort("client_disconnected");
  }

  async run(): Promise<McpReply> {
    const ctx = this.#ctx;
    let id: string | number | null = null;
    try {
      ctx.setDeadline(ctx.receivedAt + this.#deps.requestDeadlineMs);
      ctx.enter("authenticate");
      const principal = await authenticateMcp(this.#deps.publication, this.#mcp.oauth, { apiKey: this.#ingress.apiKey, bearer: this.#ingress.bearer });
      ctx.record.tenant = principal.tenantId;
      ctx.record.key = principal.keyId;
      ctx.record.chargeTo = principal.chargeTo;
      const caller: McpCaller = { deps: this.#deps, mcp: this.#mcp, ingress: this.#ingress, ctx, principal };
      if (this.#ingress.httpMethod === "GET") return await serveGetStream(caller);
      ctx.enter("decode");
      const body = await this.#ingress.readBody();
      ctx.checkpoint();
      // An error answers the request's own id whenever the body has a readable one.
      const raw = isRecord(body) ? body.id : undefined;
      if (typeof raw === "string" || (typeof raw === "number" && Number.isFinite(raw))) id = raw;
      if (this.#mcp.sessions && !isStatelessMessage(body)) return await this.#legacy(body, caller, this.#mcp.sessions);
      const req = validateStatelessRequest(this.#ingress.headers, body, [STATELESS_VERSION]);
      id = req.id ?? null;
      ctx.record.route = req.method;
      ctx.record.mcp = { method: req.method, jsonrpcId: req.id, protocolVersion: req.protocolVersion };
      ctx.record.attribution = readAttribution(this.#ingress.headers, req.params._meta);
      if (req.id === undefined) {
        // A notification (cancellation over HTTP is the closed stream): accepted, nothing to relay.
        ctx.finish({ kind: "completed" });
        return { kind: "result", status: 202, body: undefined };
      }
      const server = this.#ingress.server;
      knownServer(this.#mcp, server);
      const client: ClientView = { era: "stateless", capabilities: req.clientCapabilities, sessionKey: `key:${principal.tenantId}/${principal.keyId}`, relaySession: undefined };
      const result = await answerMethod({ ...caller, client }, req);
      ctx.enter("respond");
      ctx.finish({ kind: "completed" });
      return { kind: "result", status: 200, body: { jsonrpc: "2.0", id: req.id, result } };
    } catch (err) {
      const error = toGatewayError(err);
      if (!(err instanceof GatewayError)) this.#deps.log({ kind: "request_failed", requestId: ctx.requestId, code: error.code, cause: String(err) });
      ctx.finish({ kind: "failed", error });
      // In-band, except what the 2026-07-28 revision answers with 400 even in-band.
      // Inside a valid 2025-era session every refusal of a request the gateway took (policy,
      // validation, approval and its -32042, task, not found) is in-band too, as a server answers a request it
      // accepted: a 404 there would tell the client its session ended, and any other 4xx reaches
      // an SDK client as a transport failure rather than the JSON-RPC error it can read. Rate
      // and budget refusals (429, with Retry-After) and the gateway's own unavailability (5xx)
      // keep their HTTP status, as does a protocol-version header the session cannot speak.
      const inBand =
        err instanceof UpstreamRefusal
          ? error.code === "mcp_missing_capability" && ctx.record.mcp?.protocolVersion === STATELESS_VERSION
            ? 400
            : 200
          : this.#inSession && error.status < 500 && error.status !== 429 && error.code !== "mcp_unsupported_version"
            ? 200
            : undefined;
      return { kind: "error", error, id, status: inBand };
    }
  }

  /**
   * A stateful-era (2025) client: `initialize` opens a session whose id is its sealed state;
   * every later message must present an id this gateway sealed for the same principal (else 404,
   * and the client initializes again, as the specification prescribes). The methods served are
   * those of the stateless path, answered in the 2025 shape.
   */
  async #legacy(body: unknown, caller: McpCaller, sessions: McpSessions): Promise<McpReply> {
    const { ctx, principal } = caller;
    const response = clientResponseOf(body);
    if (response) return await this.#clientAnswered(response, caller, sessions);
    const req = validateLegacyMessage(body);
    ctx.record.route = req.method;
    ctx.record.mcp = { method: req.method, jsonrpcId: req.id, protocolVersion: undefined };
    ctx.record.attribution = readAttribution(this.#ingress.headers, req.params._meta);
    const who = `${principal.tenantId}/${principal.keyId}`;
    const now = this.#deps.clock.now();
    const server = this.#ingress.server;
    knownServer(this.#mcp, server);
    if (req.method === "initialize") {
      if (req.id === undefined) throw new GatewayError("mcp_invalid_message", "initialize is a request: it needs an id.");
      const protocolVersion = negotiateVersion(req.params.protocolVersion);
      const capabilities = isRecord(req.params.capabilities) ? req.params.capabilities : {};
      const sessionId = await sessions.sealer.seal({ principal: who, protocolVersion, clientCapabilities: capabilities, upstream: {}, expiresAt: now + sessions.ttlMs });
      ctx.finish({ kind: "completed" });
      return {
        kind: "result",
        status: 200,
        headers: { "mcp-session-id": sessionId },
        body: {
          jsonrpc: "2.0",
          id: req.id,
          result: {
            protocolVersion,
            capabilities: { tools: { listChanged: true }, prompts: { listChanged: true }, resources: { subscribe: true, listChanged: true }, completions: {}, logging: {}, ...(tasksServed(this.#mcp, "stateful", protocolVersion) ? { tasks: TASKS_CAPABILITY } : {}) },
            serverInfo: this.#mcp.serverInfo,
          },
        },
      };
    }
    const client = await sessionClient(caller, sessions);
    this.#inSession = true;
    const presented = client.relaySession;
    const version = legacyVersionOf(this.#ingress.headers);
    ctx.record.mcp = { ...ctx.record.mcp!, protocolVersion: version };
    if (req.id === undefined) {
      // The era's cancellation: the request it names ends, here if it runs here.
      if (req.method === "notifications/cancelled") this.#mcp.inFlight.cancel(presented, req.params.requestId);
      ctx.finish({ kind: "completed" });
      return { kind: "result", status: 202, body: undefined };
    }
    if (req.method === "server/discover") throw new GatewayError("mcp_method_not_found", "server/discover belongs to protocol revision 2026-07-28; this session speaks the 2025 era.");
    checkLegacyParams(req);
    const unregister = this.#mcp.inFlight.register(presented, req.id, () => ctx.abort("client_disconnected"));
    let result: Record<string, unknown>;
    try {
      result = await answerMethod({ ...caller, client }, { id: req.id, method: req.method, params: req.params, protocolVersion: version, clientCapabilities: client.capabilities });
    } finally {
      unregister();
    }
    // The 2025 shape: no result type and no caching fields.
    const { resultType: _type, ttlMs: _ttl, cacheScope: _scope, ...legacyResult } = result;
    ctx.enter("respond");
    ctx.finish({ kind: "completed" });
    return { kind: "result", status: 200, body: { jsonrpc: "2.0", id: req.id, result: legacyResult } };
  }

  /**
   * A stateful-era client's answer to a request the gateway relayed to it (elicitation, sampling,
   * roots): delivered to the request waiting for it, in the same session, or refused.
   */
  async #clientAnswered(response: NonNullable<ReturnType<typeof clientResponseOf>>, caller: McpCaller, sessions: McpSessions): Promise<McpReply> {
    const { ctx } = caller;
    ctx.record.route = "response";
    ctx.record.mcp = { method: "response", jsonrpcId: response.id, protocolVersion: undefined };
    const { relaySession } = await sessionClient(caller, sessions);
    if (!this.#mcp.relays.answer(relaySession, response)) {
      throw new GatewayError("invalid_request", "No request of this session waits for that response: it ended, or it runs on another gateway instance.");
    }
    ctx.finish({ kind: "completed" });
    return { kind: "result", status: 202, body: undefined };
  }
}
