import { readAttribution } from "../attribution/attribution.ts";
import type { Workload } from "../attribution/workload.ts";
import { admitRequest } from "../admit/admit-phase.ts";
import { authenticateMcp } from "../auth/mcp-credentials.ts";
import { RequestContext } from "../context/request-context.ts";
import { requestTrace, type TraceParent } from "../context/trace-context.ts";
import { GatewayError, toGatewayError } from "../errors/gateway-error.ts";
import { isStatelessMessage, legacyVersionOf, negotiateVersion, validateLegacyMessage } from "../mcp/legacy-request.ts";
import { STATELESS_VERSION, validateStatelessRequest, type HeaderReader, type StatelessRequest } from "../mcp/stateless-request.ts";
import { carriedCapabilities, clientTakes, inputRequiredOf, type McpEra } from "../mcp/bridging.ts";
import { clientResponseOf } from "../mcp/client-relays.ts";
import { authorizeCall } from "../mcp/tool-policy.ts";
import { auditEvent, gateToolCall } from "../approvals/approval-gate.ts";
import { CALLER_ACTOR } from "../approvals/approval-desk.ts";
import { approvalMeta, RELATED_TASK, TASK_KEPT_AFTER_MS, taskOf, taskStatusOf } from "../approvals/approval-task.ts";
import { fitsTaskHandle, type TaskHandle } from "../approvals/task-handle.ts";
import { TASKS_CAPABILITY, withTaskSupport } from "../mcp/task-support.ts";
import { upstreamRefusal, UpstreamRefusal } from "../mcp/upstream-errors.ts";
import { EVERYTHING, filterFor, parseFilter, relayedNotification, type SubscriptionFilter } from "../mcp/subscriptions.ts";
import type { ServerRequestAnswer, UpstreamAnswer, UpstreamNotification, UpstreamRequestOptions, UpstreamServerRequest } from "../mcp/upstream-client.ts";
import { CATALOG_LISTS, mergeCatalog, renameContents, routeCatalogRead, type CatalogList } from "../mcp/virtual-catalog.ts";
import { mergeToolLists, routeToolCall, type ListedTool, type ServerListing } from "../mcp/virtual-server.ts";
import type { Principal } from "../publication/principal.ts";
import { reserveToolCall, withTaskMeta } from "../reserve/tool-charge.ts";
import type { EngineDeps } from "./engine-deps.ts";
import type { McpDeps, McpServerHandle } from "./mcp-deps.ts";
import { isRecord } from "../protocol/fast-guard.ts";
import { mcpHealthId } from "../mcp/health-probe.ts";
import type { HealthStatus } from "../traffic/health.ts";

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
  /** The origin the request came in on (an approval's status page is named under it unless configured). */
  readonly origin?: string | undefined;
}

/** The client a request came from, as the bridging needs it. */
interface ClientView {
  readonly era: McpEra;
  readonly capabilities: Readonly<Record<string, unknown>>;
  /** The client's own upstream sessions are keyed by this (its gateway session, or its key). */
  readonly sessionKey: string;
  /** A stateful-era client's gateway session id: where relayed requests' answers arrive. */
  readonly relaySession: string | undefined;
}

/** How long before its request's deadline a subscription stream ends in order (the client then listens again). */
const LISTEN_MARGIN_MS = 1_000;
/** `_meta` key naming the `subscriptions/listen` request a notification belongs to (2026-07-28). */
const SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId";

/** How many pages of one server's list the virtual server reads before it reports the list as failed. */
const MAX_LIST_PAGES = 20;

/** The revision whose tasks the gateway serves (the 2026-07-28 revision has none). */
const TASKS_VERSION = "2025-11-25";

/** How many `input_required` rounds the gateway relays for one request before giving up. */
const MAX_INPUT_ROUNDS = 8;

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

/** Results proxied through a per-caller policy must not be shared by caches (2026-07-28 caching). */
const UNCACHEABLE = { ttlMs: 0, cacheScope: "private" } as const;


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
      if (this.#ingress.httpMethod === "GET") return await this.#getStream(principal);
      ctx.enter("decode");
      const body = await this.#ingress.readBody();
      ctx.checkpoint();
      // An error answers the request's own id whenever the body has a readable one.
      const raw = isRecord(body) ? body.id : undefined;
      if (typeof raw === "string" || (typeof raw === "number" && Number.isFinite(raw))) id = raw;
      if (this.#mcp.sessions && !isStatelessMessage(body)) return await this.#legacy(body, principal, this.#mcp.sessions);
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
      this.#knownServer(server);
      const client: ClientView = { era: "stateless", capabilities: req.clientCapabilities, sessionKey: `key:${principal.tenantId}/${principal.keyId}`, relaySession: undefined };
      const result = await this.#answer(req, principal, server, client);
      ctx.enter("respond");
      ctx.finish({ kind: "completed" });
      return { kind: "result", status: 200, body: { jsonrpc: "2.0", id: req.id, result } };
    } catch (err) {
      const error = toGatewayError(err);
      if (!(err instanceof GatewayError)) this.#deps.log({ kind: "request_failed", requestId: ctx.requestId, code: error.code, cause: String(err) });
      ctx.finish({ kind: "failed", error });
      // In-band, except what the 2026-07-28 revision answers with 400 even in-band.
      // -32042 is a protocol answer a 2025-era client reads in-band, as a server would send it.
      // So is -32601 inside a 2025-era session: a 404 there would tell the client its session ended.
      const inBand =
        err instanceof UpstreamRefusal
          ? error.code === "mcp_missing_capability" && ctx.record.mcp?.protocolVersion === STATELESS_VERSION
            ? 400
            : 200
          : error.code === "approval_required" || (error.code === "mcp_method_not_found" && this.#inSession)
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
  async #legacy(body: unknown, principal: Principal, sessions: NonNullable<McpDeps["sessions"]>): Promise<McpReply> {
    const ctx = this.#ctx;
    const response = clientResponseOf(body);
    if (response) return await this.#clientAnswered(response, principal, sessions);
    const req = validateLegacyMessage(body);
    ctx.record.route = req.method;
    ctx.record.mcp = { method: req.method, jsonrpcId: req.id, protocolVersion: undefined };
    ctx.record.attribution = readAttribution(this.#ingress.headers, req.params._meta);
    const who = `${principal.tenantId}/${principal.keyId}`;
    const now = this.#deps.clock.now();
    const server = this.#ingress.server;
    this.#knownServer(server);
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
            capabilities: { tools: { listChanged: true }, prompts: { listChanged: true }, resources: { subscribe: true, listChanged: true }, completions: {}, logging: {}, ...(this.#tasksServed("stateful", protocolVersion) ? { tasks: TASKS_CAPABILITY } : {}) },
            serverInfo: this.#mcp.serverInfo,
          },
        },
      };
    }
    const client = await this.#sessionClient(principal, sessions);
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
    const unregister = this.#mcp.inFlight.register(presented, req.id, () => ctx.abort("client_disconnected"));
    let result: Record<string, unknown>;
    try {
      result = await this.#answer({ id: req.id, method: req.method, params: req.params, protocolVersion: version, clientCapabilities: client.capabilities }, principal, server, client);
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
   * A stateful-era client's GET stream: what its servers send outside its requests (list changes,
   * updates of the resources it subscribed to in its session, their own requests to it), from
   * each stateful server it reaches here. The 2026-07-28 revision has no GET (it has
   * `subscriptions/listen`): without a session id the answer is 405.
   */
  async #getStream(principal: Principal): Promise<McpReply> {
    const ctx = this.#ctx;
    ctx.record.route = "GET";
    ctx.record.mcp = { method: "GET", jsonrpcId: undefined, protocolVersion: undefined };
    const sessions = this.#mcp.sessions;
    if (!sessions || this.#ingress.headers.get("mcp-session-id") === null) throw new GatewayError("method_not_allowed", "This MCP endpoint takes GET only in a stateful-era session; revision 2026-07-28 subscribes with subscriptions/listen.");
    const client = await this.#sessionClient(principal, sessions);
    const server = this.#ingress.server;
    this.#knownServer(server);
    ctx.enter("decide");
    await this.#admit(principal, server ?? "*");
    ctx.enter("invoke");
    this.#ingress.open();
    const names = (server === undefined ? [...this.#mcp.servers.keys()] : [server]).filter((n) => this.#mcp.servers.get(n)?.era === "stateful");
    await this.#fanIn(names, EVERYTHING, client, server === undefined, undefined);
    ctx.enter("respond");
    ctx.finish({ kind: "completed" });
    return { kind: "result", status: 200, body: undefined };
  }

  /**
   * Holds each server's subscription for the client and relays what the client asked for, until
   * the client goes, the request's deadline comes near (the stream then ends in order and the
   * client listens again), or every server ended its side.
   */
  async #fanIn(names: readonly string[], filter: SubscriptionFilter, client: ClientView, virtual: boolean, subscriptionId: string | number | undefined): Promise<void> {
    const ctx = this.#ctx;
    const end = new AbortController();
    const stop = () => end.abort();
    ctx.signal.addEventListener("abort", stop, { once: true });
    const cancelTimer = this.#deps.scheduler.schedule(Math.max(0, ctx.deadlineAt - this.#deps.clock.now() - LISTEN_MARGIN_MS), stop);
    try {
      await Promise.all(
        names.map(async (name) => {
          const upstream = this.#mcp.servers.get(name)!;
          if (!upstream.listen) return;
          try {
            await upstream.listen(filterFor(name, filter, virtual), {
              signal: end.signal,
              keepAlive: ctx.waitUntil,
              ...this.#clientSide(client, upstream),
              onNotification: (n) => {
                const out = relayedNotification(name, n, filter, virtual);
                if (out) this.#ingress.send({ jsonrpc: "2.0", method: out.method, params: subscriptionId === undefined ? out.params : { ...out.params, _meta: { [SUBSCRIPTION_ID]: subscriptionId } } });
              },
            });
          } catch (err) {
            // One server's subscription failing leaves the others': it is logged, not fatal.
            if (!end.signal.aborted) this.#deps.log({ kind: "mcp_subscription_failed", requestId: ctx.requestId, server: name, code: toGatewayError(err).code });
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

  /**
   * A stateful-era client's answer to a request the gateway relayed to it (elicitation, sampling,
   * roots): delivered to the request waiting for it, in the same session, or refused.
   */
  async #clientAnswered(response: NonNullable<ReturnType<typeof clientResponseOf>>, principal: Principal, sessions: NonNullable<McpDeps["sessions"]>): Promise<McpReply> {
    const ctx = this.#ctx;
    ctx.record.route = "response";
    ctx.record.mcp = { method: "response", jsonrpcId: response.id, protocolVersion: undefined };
    const { relaySession } = await this.#sessionClient(principal, sessions);
    if (!this.#mcp.relays.answer(relaySession, response)) {
      throw new GatewayError("invalid_request", "No request of this session waits for that response: it ended, or it runs on another gateway instance.");
    }
    ctx.finish({ kind: "completed" });
    return { kind: "result", status: 202, body: undefined };
  }

  /**
   * The stateful-era client behind the request's `Mcp-Session-Id`: a session this gateway sealed
   * for this principal. Unknown, expired, tampered or another caller's: to this caller the session
   * does not exist (404, and the client initializes again, as the specification prescribes).
   */
  async #sessionClient(principal: Principal, sessions: NonNullable<McpDeps["sessions"]>): Promise<ClientView & { readonly relaySession: string }> {
    const presented = this.#ingress.headers.get("mcp-session-id");
    if (presented === null) throw new GatewayError("invalid_request", "Send the Mcp-Session-Id this gateway answered initialize with.");
    const opened = await sessions.sealer.open(presented, `${principal.tenantId}/${principal.keyId}`, this.#deps.clock.now());
    if (!opened.ok) throw new GatewayError("not_found", "The MCP session is unknown or has expired: initialize again.");
    return { era: "stateful", capabilities: opened.state.clientCapabilities, sessionKey: `session:${presented}`, relaySession: presented };
  }

  /** `/mcp/<server>` names a configured server, or the request is for nothing here. */
  #knownServer(server: string | undefined): void {
    if (server !== undefined && !this.#mcp.servers.has(server)) throw new GatewayError("not_found", `No MCP server is named ${JSON.stringify(server.slice(0, 64))}.`);
  }

  async #answer(req: StatelessRequest, principal: Principal, server: string | undefined, client: ClientView): Promise<Record<string, unknown>> {
    const ctx = this.#ctx;
    const caller = { tenant: principal.tenantId, key: principal.keyId };
    switch (req.method) {
      case "server/discover":
        return {
          resultType: "complete",
          supportedVersions: [STATELESS_VERSION],
          capabilities: { tools: {}, prompts: {}, resources: {}, completions: {} },
          _meta: { "io.modelcontextprotocol/serverInfo": this.#mcp.serverInfo },
          ...UNCACHEABLE,
        };
      case "ping":
        return { resultType: "complete" };
      case "subscriptions/listen": {
        if (client.era !== "stateless") throw new GatewayError("mcp_method_not_found", "subscriptions/listen belongs to revision 2026-07-28; a stateful-era session listens on its GET stream.");
        ctx.enter("authorize");
        const filter = parseFilter(req.params.notifications);
        for (const uri of filter.resourceSubscriptions ?? []) this.#mayWatch(uri, server, caller);
        ctx.enter("decide");
        await this.#admit(principal, server ?? "*");
        ctx.enter("invoke");
        // The gateway's own acknowledgement, of what it honours: what the client asked for.
        this.#ingress.send({ jsonrpc: "2.0", method: "notifications/subscriptions/acknowledged", params: { notifications: filter, _meta: { [SUBSCRIPTION_ID]: req.id } } });
        await this.#fanIn(server === undefined ? [...this.#mcp.servers.keys()] : [server], filter, client, server === undefined, req.id);
        return { resultType: "complete", _meta: { [SUBSCRIPTION_ID]: req.id } };
      }
      case "resources/subscribe":
      case "resources/unsubscribe": {
        if (client.era !== "stateful") throw new GatewayError("mcp_method_not_found", `${req.method} belongs to the 2025 era; revision 2026-07-28 subscribes with subscriptions/listen.`);
        ctx.enter("authorize");
        const uri = req.params.uri;
        if (typeof uri !== "string") throw new GatewayError("invalid_request", `${req.method} needs a uri.`, { param: "params.uri" });
        const target = this.#mayWatch(uri, server, caller);
        if (this.#mcp.servers.get(target.server)?.era !== "stateful") throw new GatewayError("mcp_method_not_found", `MCP server ${target.server} speaks revision 2026-07-28, whose resources are subscribed with subscriptions/listen, which a stateful-era client cannot send.`);
        ctx.enter("decide");
        await this.#admit(principal, target.server);
        ctx.enter("invoke");
        const answer = await this.#invoke(target.server, req.method, { uri: target.name }, client);
        if (!answer.ok) throw upstreamRefusal(target.server, answer.error);
        return { resultType: "complete" };
      }
      case "logging/setLevel": {
        // The client's own upstream sessions take its level: each stateful server it may reach here
        // (a 2026-07-28 server has no session to keep one in, and a REST tool logs nothing).
        const level = req.params.level;
        if (typeof level !== "string") throw new GatewayError("invalid_request", "logging/setLevel needs a level.", { param: "params.level" });
        ctx.enter("decide");
        await this.#admit(principal, server ?? "*");
        ctx.enter("invoke");
        const stateful = (server === undefined ? [...this.#mcp.servers.keys()] : [server]).filter((n) => this.#mcp.servers.get(n)?.era === "stateful");
        const answers = await Promise.all(stateful.map(async (n) => ({ n, answer: await this.#invoke(n, "logging/setLevel", { level }, client).catch((err: unknown) => ({ ok: false as const, error: { code: -32603, message: toGatewayError(err).message } })) })));
        const refused = answers.find((a) => !a.answer.ok);
        // One server: its answer is the answer. Many: a server that refused is named, the rest keep the level.
        if (refused && !refused.answer.ok && (server !== undefined || refused.answer.error.code === -32602)) throw upstreamRefusal(refused.n, refused.answer.error);
        return { resultType: "complete" };
      }
      case "completion/complete": {
        ctx.enter("authorize");
        const ref = isRecord(req.params.ref) ? req.params.ref : {};
        const kind = ref.type === "ref/prompt" ? "prompt" : ref.type === "ref/resource" ? "resource" : undefined;
        const named = kind === "prompt" ? ref.name : ref.uri;
        if (kind === undefined || typeof named !== "string") throw new GatewayError("invalid_request", "completion/complete needs a ref: ref/prompt with a name, or ref/resource with a uri.", { param: "params.ref" });
        const target = server === undefined ? routeCatalogRead(kind === "prompt" ? "prompts/get" : "resources/read", named, this.#mcp.servers) : { server, name: named };
        // Completing an argument reveals what a list would: the item must be one the caller may see.
        const decision = this.#mcp.policy.visible({ ...caller, server: target.server, kind, name: target.name });
        if (ctx.record.mcp) Object.assign(ctx.record.mcp, { decision, server: target.server, target: target.name });
        if (!decision.allowed) throw new GatewayError("tool_not_allowed", `${kind === "prompt" ? "Prompt" : "Resource"} ${JSON.stringify(named.slice(0, 128))} is not available to this caller (${decision.reason}).`);
        ctx.enter("decide");
        await this.#admit(principal, target.server);
        ctx.enter("invoke");
        const forwarded = { ...req.params, ref: kind === "prompt" ? { ...ref, name: target.name } : { ...ref, uri: target.name } };
        delete (forwarded as Record<string, unknown>)._meta;
        const answer = await this.#invoke(target.server, "completion/complete", forwarded, client);
        if (!answer.ok) throw upstreamRefusal(target.server, answer.error);
        return { resultType: "complete", ...(isRecord(answer.result) ? answer.result : {}) };
      }
      case "tools/list": {
        ctx.enter("authorize");
        const names = server === undefined ? [...this.#mcp.servers.keys()] : [server];
        ctx.enter("decide");
        await this.#admit(principal, server ?? "*");
        ctx.enter("invoke");
        const tasks = this.#tasksServed(client.era, req.protocolVersion);
        // The gateway's own task support replaces the servers' (it does not relay their tasks).
        const listings = (await Promise.all(names.map((n) => this.#list(n, client, server === undefined)))).map((l) =>
          l.ok ? { ...l, tools: l.tools.map((t) => withTaskSupport(t, tasks && this.#mcp.policy.mayNeedApproval({ ...caller, server: l.server, kind: "tool", name: t.name }))) } : l,
        );
        if (server === undefined) {
          const merged = mergeToolLists(listings, (n) => this.#mcp.servers.get(n)?.listFailure ?? "open", caller, this.#mcp.policy);
          return { resultType: "complete", tools: merged.tools, ...UNCACHEABLE, ...(merged.partial.length > 0 || merged.unnamed.length > 0 ? { _meta: { "sluice/partial": merged.partial, "sluice/unlisted": merged.unnamed } } : {}) };
        }
        const only = listings[0]!;
        if (!only.ok) throw new GatewayError("upstream_error", `The tool list of MCP server ${server} could not be read.`, { cause: only.reason });
        const tools = only.tools.filter((t) => this.#mcp.policy.visible({ ...caller, server, kind: "tool", name: t.name }).allowed);
        return { resultType: "complete", tools, ...UNCACHEABLE };
      }
      case "tools/call": {
        const task = req.params.task;
        // A task-augmented call (`params.task`) exists only where tasks are served; elsewhere the field is not the revision's.
        if (task === undefined || !this.#tasksServed(client.era, req.protocolVersion)) return await this.#callTool(req.params, principal, server, client, undefined);
        if (!isRecord(task)) throw new GatewayError("invalid_request", "params.task must be an object ({ ttl? }).", { param: "params.task" });
        return await this.#callTool(req.params, principal, server, client, { kind: "create" });
      }
      case "tasks/get":
      case "tasks/result":
      case "tasks/cancel":
      case "tasks/list":
        return await this.#task(req, principal, server, client);
      case "prompts/list":
      case "resources/list":
      case "resources/templates/list": {
        ctx.enter("authorize");
        const names = server === undefined ? [...this.#mcp.servers.keys()] : [server];
        ctx.enter("decide");
        await this.#admit(principal, server ?? "*");
        ctx.enter("invoke");
        const { field } = CATALOG_LISTS[req.method];
        if (server !== undefined) {
          // One server's page, under its own names and cursor.
          const answer = await this.#invoke(server, req.method, typeof req.params.cursor === "string" ? { cursor: req.params.cursor } : {}, client);
          if (!answer.ok) throw upstreamRefusal(server, answer.error);
          const result = isRecord(answer.result) ? answer.result : {};
          const items = Array.isArray(result[field]) ? (result[field] as unknown[]).filter(isRecord) : [];
          const merged = mergeCatalog(req.method, [{ server, ok: true, items }], () => "closed", caller, this.#mcp.policy, false);
          return { resultType: "complete", [field]: merged.items, ...(typeof result.nextCursor === "string" ? { nextCursor: result.nextCursor } : {}), ...UNCACHEABLE };
        }
        const listings = await Promise.all(names.map((n) => this.#listAll(n, req.method as CatalogList, field, client, true)));
        const merged = mergeCatalog(req.method, listings.map((l) => (l.ok ? { server: l.server, ok: true as const, items: l.items } : l)), (n) => this.#mcp.servers.get(n)?.listFailure ?? "open", caller, this.#mcp.policy, true);
        return { resultType: "complete", [field]: merged.items, ...UNCACHEABLE, ...(merged.partial.length > 0 ? { _meta: { "sluice/partial": merged.partial } } : {}) };
      }
      case "prompts/get":
      case "resources/read": {
        ctx.enter("authorize");
        const kind = req.method === "prompts/get" ? "prompt" : "resource";
        const named = (req.method === "prompts/get" ? req.params.name : req.params.uri) as string;
        const target = server === undefined ? routeCatalogRead(req.method, named, this.#mcp.servers) : { server, name: named };
        const audit = ctx.record.mcp;
        authorizeCall(this.#mcp.policy, { ...caller, server: target.server, kind, name: target.name }, req.params.arguments, (decision) => audit && Object.assign(audit, { decision, server: target.server, target: target.name }));
        ctx.enter("decide");
        await this.#admit(principal, target.server);
        ctx.enter("invoke");
        const forwarded = req.method === "prompts/get" ? { name: target.name, ...(req.params.arguments !== undefined ? { arguments: req.params.arguments } : {}) } : { uri: target.name };
        const answer = await this.#invoke(target.server, req.method, { ...forwarded, ...forwardedParams(req.params) }, client);
        if (!answer.ok) throw upstreamRefusal(target.server, answer.error);
        const result = isRecord(answer.result) ? answer.result : {};
        if (req.method === "prompts/get") return { resultType: "complete", ...result };
        return { resultType: "complete", ...(server === undefined ? renameContents(target.server, result) : result), ...UNCACHEABLE };
      }
      default:
        throw new GatewayError("mcp_method_not_found", `Method ${JSON.stringify(req.method)} is not served by this gateway's MCP endpoint.`);
    }
  }

  /**
   * Whether tasks (MCP 2025-11-25) are served: to a client of that revision, when approvals are
   * configured — a task here is a tool call waiting for a human approval, and nothing else.
   */
  #tasksServed(era: McpEra, protocolVersion: string | undefined): boolean {
    return this.#mcp.approvals !== undefined && era === "stateful" && protocolVersion === TASKS_VERSION;
  }

  /**
   * One `tools/call`: `authorize` (the policy on the parsed body), `decide` (the approval gate),
   * `reserve`, `admit`, `invoke`. A task-augmented call (`create`) is answered with a task handle
   * when it waits for approval; a task's `tasks/result` (`resume`) comes back through here with
   * the call its handle carries, so it is re-admitted like any retry and runs at most once.
   */
  async #callTool(params: Readonly<Record<string, unknown>>, principal: Principal, server: string | undefined, client: ClientView, task: { readonly kind: "create" } | { readonly kind: "resume"; readonly taskId: string; readonly handle: TaskHandle } | undefined): Promise<Record<string, unknown>> {
    const ctx = this.#ctx;
    const caller = { tenant: principal.tenantId, key: principal.keyId };
    ctx.enter("authorize");
    const name = params.name as string;
    const args = params.arguments;
    // Decided on the parsed body: the policy never reads the Mcp-Name header.
    const audit = ctx.record.mcp;
    const routed =
      server === undefined
        ? routeToolCall(name, args, this.#mcp.servers, caller, this.#mcp.policy, (d, target) => {
            if (audit) Object.assign(audit, { decision: d, ...target });
          })
        : { server, name, decision: authorizeCall(this.#mcp.policy, { ...caller, server, kind: "tool", name }, args, (decision) => audit && Object.assign(audit, { decision, server, target: name })) };
    ctx.enter("decide");
    let asTask = task?.kind === "create";
    if (asTask && routed.decision.approval !== "required") {
      throw new GatewayError("mcp_method_not_found", `Tool ${JSON.stringify(name.slice(0, 128))} cannot be called as a task through this gateway: only a call that waits for a human approval is made a task here. Call it without params.task.`);
    }
    // A call too large to carry in a handle is answered as a 2025-era call is (-32042, then the same call again).
    if (asTask && !fitsTaskHandle(args)) asTask = false;
    // A call whose rule requires approval is answered here (pending) or re-admitted (src/approvals).
    const toolDefinition = async () => {
      const listed = await this.#list(routed.server, client, false);
      return listed.ok ? listed.tools.find((t) => t.name === routed.name) : undefined;
    };
    const gate = await gateToolCall(this.#mcp.approvals, ctx, {
      principal,
      era: client.era,
      decision: routed.decision,
      server: routed.server,
      tool: routed.name,
      args,
      params,
      toolDefinition,
      origin: this.#ingress.origin,
      clientCapabilities: client.capabilities,
      task: asTask ? { kind: "create" } : task?.kind === "resume" ? { kind: "resume", approvalId: task.handle.approvalId } : undefined,
    });
    if (gate.kind === "answer") return gate.result;
    if (gate.kind === "task") {
      // The handle is the task: the call itself, sealed; the desk keeps only the approval.
      const a = gate.approval;
      const handle: TaskHandle = { approvalId: a.id, tenant: principal.tenantId, key: principal.keyId, endpoint: server ?? "*", server: routed.server, tool: routed.name, arguments: args ?? {}, issuedAt: ctx.clock.now(), expiresAt: a.expiresAt + TASK_KEPT_AFTER_MS };
      const taskId = (await this.#mcp.approvals!.tasks.seal(handle))!;
      return { resultType: "complete", task: taskOf(taskId, handle, a), _meta: approvalMeta(a) };
    }
    ctx.enter("reserve");
    const charge = await reserveToolCall(this.#deps.reserve, this.#deps.publication, this.#mcp.prices, ctx, principal, routed);
    await this.#admit(principal, routed.server);
    ctx.enter("invoke");
    // A call asked for by name is sent whatever the probes say (they can be wrong); it starts them.
    this.#health(routed.server);
    const answer = await gate.execute(() => {
      if (audit) audit.toolSent = true;
      return this.#invoke(routed.server, "tools/call", { name: routed.name, arguments: args ?? {}, ...gate.upstreamParams(forwardedParams(params)) }, client, charge);
    });
    if (!answer.ok) throw upstreamRefusal(routed.server, answer.error);
    const result = isRecord(answer.result) ? answer.result : {};
    if (audit && result.isError === true) audit.toolError = true;
    if (audit && result.resultType === "input_required") audit.inputRequired = true;
    const out = withTaskMeta({ resultType: "complete", ...result }, charge);
    if (task?.kind !== "resume") return out;
    const meta = isRecord(out._meta) ? out._meta : {};
    return { ...out, _meta: { ...meta, [RELATED_TASK]: { taskId: task.taskId } } };
  }

  /**
   * `tasks/get`, `tasks/result`, `tasks/cancel` (and `tasks/list`, not served): the task is the
   * handle the client presents, opened for this principal on this endpoint; its state is its
   * approval's at the desk. `tasks/result` runs the handle's call through {@link #callTool}.
   */
  async #task(req: StatelessRequest, principal: Principal, server: string | undefined, client: ClientView): Promise<Record<string, unknown>> {
    const ctx = this.#ctx;
    const approvals = this.#mcp.approvals;
    if (!approvals || !this.#tasksServed(client.era, req.protocolVersion)) throw new GatewayError("mcp_method_not_found", `${req.method} belongs to the tasks of MCP 2025-11-25, which this gateway serves to 2025-11-25 sessions for tool calls that wait for a human approval.`);
    if (req.method === "tasks/list") throw new GatewayError("mcp_method_not_found", "tasks/list is not served: a task here is the handle its caller holds, and the gateway keeps no list of them.");
    ctx.enter("authorize");
    const taskId = req.params.taskId;
    if (typeof taskId !== "string" || taskId === "") throw new GatewayError("invalid_request", `${req.method} needs a taskId.`, { param: "params.taskId" });
    // Forged, tampered, expired, another caller's or another endpoint's: to this caller no such task exists.
    const unknown = () => new GatewayError("invalid_request", "Unknown task: no task of this caller on this endpoint has that taskId (it may have expired).", { param: "params.taskId" });
    const opened = await approvals.tasks.open(taskId, { tenant: principal.tenantId, key: principal.keyId }, ctx.clock.now());
    if (!opened.ok || opened.handle.endpoint !== (server ?? "*") || !this.#mcp.servers.has(opened.handle.server)) throw unknown();
    const handle = opened.handle;
    const audit = ctx.record.mcp;
    if (audit) Object.assign(audit, { server: handle.server, target: handle.tool });
    if (req.method === "tasks/result") {
      const name = server === undefined ? `${handle.server}.${handle.tool}` : handle.tool;
      return await this.#callTool({ name, arguments: handle.arguments, ...(isRecord(req.params._meta) ? { _meta: req.params._meta } : {}) }, principal, server, client, { kind: "resume", taskId, handle });
    }
    ctx.enter("decide");
    const desk = approvals.desk(principal.tenantId);
    if (req.method === "tasks/get") {
      const a = await desk.get(handle.approvalId);
      if (!a) throw unknown();
      return { resultType: "complete", ...taskOf(taskId, handle, a), _meta: approvalMeta(a) };
    }
    const reason = "cancelled by the caller (tasks/cancel)";
    const out = await desk.cancel(handle.approvalId, { tenant: principal.tenantId, key: principal.keyId }, reason);
    if (!out.approval) throw unknown();
    if (!out.ok) throw new GatewayError("invalid_request", `The task cannot be cancelled: it is ${taskStatusOf(out.approval).status} (its approval is ${out.approval.state}).`, { param: "params.taskId" });
    ctx.record.events.push(auditEvent("approval.revoked", out.approval, ctx, out.approval.decidedAt ?? ctx.clock.now(), { actor: CALLER_ACTOR, reason }));
    return { resultType: "complete", ...taskOf(taskId, handle, out.approval), _meta: approvalMeta(out.approval) };
  }

  /** The server and own URI of a resource a client subscribes to, when the caller may see it. */
  #mayWatch(uri: string, server: string | undefined, caller: { readonly tenant: string; readonly key: string }): { readonly server: string; readonly name: string } {
    const target = server === undefined ? routeCatalogRead("resources/read", uri, this.#mcp.servers) : { server, name: uri };
    const decision = this.#mcp.policy.visible({ ...caller, server: target.server, kind: "resource", name: target.name });
    if (this.#ctx.record.mcp) Object.assign(this.#ctx.record.mcp, { decision, server: target.server, target: target.name });
    if (!decision.allowed) throw new GatewayError("tool_not_allowed", `Resource ${JSON.stringify(uri.slice(0, 128))} is not available to this caller (${decision.reason}).`);
    return target;
  }

  async #admit(principal: Principal, server: string): Promise<void> {
    this.#ctx.enter("admit");
    await admitRequest(this.#ctx, this.#deps.admission, this.#deps.drain, { tenant: principal.tenantId, model: `mcp:${server}` });
  }

  /**
   * The server's probed health, and its probes started (once per isolate) when it has
   * `healthCheck`: `unknown` without probes, before the first verdict, or when the monitor
   * cannot be read — health is advisory and fails open, as for backends.
   */
  #health(name: string): HealthStatus {
    const probe = this.#mcp.servers.get(name)?.healthProbe;
    const gate = probe ? this.#deps.health?.forRequest(this.#ctx.waitUntil) : undefined;
    if (!probe || !gate) return "unknown";
    gate.ensureWatched(mcpHealthId(name), probe);
    return gate.status(mcpHealthId(name));
  }

  async #list(name: string, client: ClientView, merging: boolean): Promise<ServerListing> {
    const all = await this.#listAll(name, "tools/list", "tools", client, merging);
    if (!all.ok) return all;
    return { server: name, ok: true, tools: all.items.filter((t): t is ListedTool => typeof t.name === "string") };
  }

  /**
   * Every page of one server's list, for the virtual server (which merges whole lists and so has
   * no cursor of its own to give); bounded, so a server that pages forever cannot hold the request.
   */
  async #listAll(name: string, method: string, field: string, client: ClientView, merging: boolean): Promise<{ readonly server: string; readonly ok: true; readonly items: Record<string, unknown>[] } | { readonly server: string; readonly ok: false; readonly reason: string }> {
    // On the virtual server a server the probes found down is reported in `partial` at once
    // instead of being waited on; one that fails closed is still asked (the probes can be wrong).
    if (merging && this.#mcp.servers.get(name)!.listFailure === "open" && this.#health(name) === "unhealthy") return { server: name, ok: false, reason: "unhealthy" };
    const items: Record<string, unknown>[] = [];
    let cursor: string | undefined;
    try {
      for (let page = 0; page < MAX_LIST_PAGES; page++) {
        const answer = await this.#invoke(name, method, cursor === undefined ? {} : { cursor }, client);
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
   * Sends one request upstream in the client's own upstream session, declaring there the
   * capabilities the gateway can carry (src/mcp/bridging.ts). What the server streams before its
   * answer reaches the client; what it asks the client is relayed when the client can take it.
   * A stateless server's `input_required` is passed through to a stateless client, and relayed
   * round by round to a stateful one, which has no such result.
   */
  async #invoke(name: string, method: string, params: Readonly<Record<string, unknown>>, client: ClientView, evidence?: Pick<UpstreamRequestOptions, "onSent" | "onEvidence">): Promise<UpstreamAnswer> {
    const ctx = this.#ctx;
    const upstream = this.#mcp.servers.get(name)!;
    const progressToken = isRecord(params._meta) ? params._meta.progressToken : undefined;
    const opts = {
      signal: ctx.signal,
      keepAlive: ctx.waitUntil,
      ...this.#clientSide(client, upstream),
      onNotification: (n: UpstreamNotification) => this.#relayNotification(n, progressToken),
      ...evidence,
    };
    let answer = await upstream.request(method, params, opts);
    if (client.era === "stateless" || upstream.era !== "stateless") return answer;
    for (let round = 1; answer.ok; round++) {
      const needed = inputRequiredOf(answer.result);
      if (!needed) break;
      if (round > MAX_INPUT_ROUNDS) throw new GatewayError("upstream_protocol_error", `MCP server ${name} asked for input more than ${MAX_INPUT_ROUNDS} times in one request.`);
      const responses: Record<string, unknown> = {};
      for (const [key, r] of Object.entries(needed.inputRequests)) {
        if (!clientTakes(r.method, client.capabilities)) throw new GatewayError("mcp_missing_capability", `MCP server ${name} needs ${r.method}, which this client did not declare.`);
        const reply = await this.#askClient(r, client);
        if ("error" in reply) throw new GatewayError("invalid_request", `The client answered the relayed ${r.method} with error ${reply.error.code}.`);
        responses[key] = reply.result;
      }
      answer = await upstream.request(method, { ...params, inputResponses: responses, ...(needed.requestState !== undefined ? { requestState: needed.requestState } : {}) }, opts);
    }
    return answer;
  }

  /**
   * The client's side of an upstream exchange, by the bridging matrix (src/mcp/bridging.ts): its
   * own upstream session, declaring the capabilities the direction can carry, and — towards a
   * stateful server, for a stateful-era client that declared any — the relay of what the server
   * asks it (a 2026-07-28 server asks by `input_required`, never in a stream).
   */
  #clientSide(client: ClientView, upstream: McpServerHandle): Pick<UpstreamRequestOptions, "session" | "onRequest"> {
    const capabilities = carriedCapabilities(client.era, upstream.era, client.capabilities);
    return {
      session: { key: `${client.sessionKey} ${JSON.stringify(capabilities)}`, capabilities },
      ...(client.era === "stateful" && upstream.era === "stateful" && Object.keys(capabilities).length > 0 ? { onRequest: (r: UpstreamServerRequest) => this.#askClient(r, client) } : {}),
    };
  }

  /** Progress of this request (by the caller's own token) and log messages reach the client; nothing else does. */
  #relayNotification(n: UpstreamNotification, progressToken: unknown): void {
    if (n.method === "notifications/progress") {
      if (progressToken === undefined || !isRecord(n.params) || n.params.progressToken !== progressToken) return;
    } else if (n.method !== "notifications/message") return;
    this.#ingress.send({ jsonrpc: "2.0", method: n.method, ...(n.params !== undefined ? { params: n.params } : {}) });
  }

  /** Asks a stateful-era client what a server asks it, when it declared it can be asked. */
  async #askClient(r: UpstreamServerRequest, client: ClientView): Promise<ServerRequestAnswer> {
    if (client.relaySession === undefined || !clientTakes(r.method, client.capabilities)) return { error: { code: -32601, message: `The client did not declare the capability for ${r.method}.` } };
    return await this.#mcp.relays.ask(client.relaySession, r, this.#ingress.send, this.#ctx.signal);
  }
}

/**
 * What of a caller's params goes upstream besides the request's own fields: its progress token
 * (the rest of its `_meta` is not the server's business) and, in the 2026-07-28 revision, the
 * answers to an `input_required` result with the state the server asked to have echoed.
 */
function forwardedParams(params: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (isRecord(params._meta) && params._meta.progressToken !== undefined) out._meta = { progressToken: params._meta.progressToken };
  if (isRecord(params.inputResponses)) out.inputResponses = params.inputResponses;
  if (typeof params.requestState === "string") out.requestState = params.requestState;
  return out;
}
