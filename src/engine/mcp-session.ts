import { admitRequest } from "../admit/admit-phase.ts";
import { authenticate } from "../auth/authenticate.ts";
import { RequestContext } from "../context/request-context.ts";
import { requestTrace, type TraceParent } from "../context/trace-context.ts";
import { GatewayError, toGatewayError } from "../errors/gateway-error.ts";
import { isStatelessMessage, legacyVersionOf, negotiateVersion, validateLegacyMessage } from "../mcp/legacy-request.ts";
import { STATELESS_VERSION, validateStatelessRequest, type HeaderReader, type StatelessRequest } from "../mcp/stateless-request.ts";
import { authorizeCall } from "../mcp/tool-policy.ts";
import { mergeToolLists, routeToolCall, type ListedTool, type ServerListing } from "../mcp/virtual-server.ts";
import type { Principal } from "../publication/principal.ts";
import type { EngineDeps } from "./engine-deps.ts";
import type { McpDeps } from "./mcp-deps.ts";
import { isRecord } from "../protocol/fast-guard.ts";
import { mcpHealthId } from "../mcp/health-probe.ts";
import type { HealthStatus } from "../traffic/health.ts";

/** What the HTTP adapter hands the engine for one MCP request: nothing transport-specific. */
export interface McpIngress {
  readonly requestId: string;
  readonly receivedAt: number;
  readonly apiKey: string | undefined;
  /** The request's headers, read only to cross-check the body (never to decide). */
  readonly headers: HeaderReader;
  readonly readBody: () => Promise<unknown>;
  /** `/mcp/<server>`: that server alone, names unchanged; undefined: the virtual server. */
  readonly server: string | undefined;
  readonly traceParent?: TraceParent | undefined;
  readonly waitUntil: (p: Promise<unknown>) => void;
}

/**
 * The answer: a JSON-RPC result (200), an accepted notification (202, no body), or a refusal the
 * adapter renders in JSON-RPC's envelope, answering the request's id when it was read.
 */
export type McpReply =
  | { readonly kind: "result"; readonly status: 200 | 202; readonly body: unknown; readonly headers?: Readonly<Record<string, string>> | undefined }
  | { readonly kind: "error"; readonly error: GatewayError; readonly id: string | number | null };

/** Results proxied through a per-caller policy must not be shared by caches (2026-07-28 caching). */
const UNCACHEABLE = { ttlMs: 0, cacheScope: "private" } as const;


/**
 * One MCP request through the same runtime as a model request: its own request context (ids,
 * deadline, holdings, the one terminal that logs it), `authenticate` with the gateway's keys,
 * `decode` (the revision's per-request validation), `authorize` and `decide` (the tool policy and
 * the server a name reaches), `admit` (the drain's ticket and an admission lease keyed by the
 * server), `invoke` (the gateway's own upstream client) and `respond`.
 */
export class McpSession {
  readonly #deps: EngineDeps;
  readonly #mcp: McpDeps;
  readonly #ingress: McpIngress;
  readonly #ctx: RequestContext;

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
      const principal = await authenticate(this.#deps.publication, this.#ingress.apiKey);
      ctx.record.tenant = principal.tenantId;
      ctx.record.key = principal.keyId;
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
      if (req.id === undefined) {
        // A notification (cancellation over HTTP is the closed stream): accepted, nothing to relay.
        ctx.finish({ kind: "completed" });
        return { kind: "result", status: 202, body: undefined };
      }
      const server = this.#ingress.server;
      if (server !== undefined && !this.#mcp.servers.has(server)) throw new GatewayError("not_found", `No MCP server is named ${JSON.stringify(server.slice(0, 64))}.`);
      const result = await this.#answer(req, principal, server);
      ctx.enter("respond");
      ctx.finish({ kind: "completed" });
      return { kind: "result", status: 200, body: { jsonrpc: "2.0", id: req.id, result } };
    } catch (err) {
      const error = toGatewayError(err);
      if (!(err instanceof GatewayError)) this.#deps.log({ kind: "request_failed", requestId: ctx.requestId, code: error.code, cause: String(err) });
      ctx.finish({ kind: "failed", error });
      return { kind: "error", error, id };
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
    const req = validateLegacyMessage(body);
    ctx.record.route = req.method;
    ctx.record.mcp = { method: req.method, jsonrpcId: req.id, protocolVersion: undefined };
    const who = `${principal.tenantId}/${principal.keyId}`;
    const now = this.#deps.clock.now();
    const server = this.#ingress.server;
    if (server !== undefined && !this.#mcp.servers.has(server)) throw new GatewayError("not_found", `No MCP server is named ${JSON.stringify(server.slice(0, 64))}.`);
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
          result: { protocolVersion, capabilities: server === undefined ? { tools: { listChanged: false } } : { tools: { listChanged: false }, prompts: { listChanged: false }, resources: {} }, serverInfo: this.#mcp.serverInfo },
        },
      };
    }
    const presented = this.#ingress.headers.get("mcp-session-id");
    if (presented === null) throw new GatewayError("invalid_request", "Send the Mcp-Session-Id this gateway answered initialize with.");
    const opened = await sessions.sealer.open(presented, who, now);
    // Unknown, expired, tampered or another caller's: to this caller the session does not exist.
    if (!opened.ok) throw new GatewayError("not_found", "The MCP session is unknown or has expired: initialize again.");
    const version = legacyVersionOf(this.#ingress.headers);
    ctx.record.mcp = { ...ctx.record.mcp!, protocolVersion: version };
    if (req.id === undefined) {
      ctx.finish({ kind: "completed" });
      return { kind: "result", status: 202, body: undefined };
    }
    if (req.method === "server/discover") throw new GatewayError("mcp_method_not_found", "server/discover belongs to protocol revision 2026-07-28; this session speaks the 2025 era.");
    const result = await this.#answer({ id: req.id, method: req.method, params: req.params, protocolVersion: version, clientCapabilities: opened.state.clientCapabilities }, principal, server);
    // The 2025 shape: no result type and no caching fields.
    const { resultType: _type, ttlMs: _ttl, cacheScope: _scope, ...legacyResult } = result;
    ctx.enter("respond");
    ctx.finish({ kind: "completed" });
    return { kind: "result", status: 200, body: { jsonrpc: "2.0", id: req.id, result: legacyResult } };
  }

  async #answer(req: StatelessRequest, principal: Principal, server: string | undefined): Promise<Record<string, unknown>> {
    const ctx = this.#ctx;
    const caller = { tenant: principal.tenantId, key: principal.keyId };
    switch (req.method) {
      case "server/discover":
        return {
          resultType: "complete",
          supportedVersions: [STATELESS_VERSION],
          capabilities: server === undefined ? { tools: {} } : { tools: {}, prompts: {}, resources: {} },
          _meta: { "io.modelcontextprotocol/serverInfo": this.#mcp.serverInfo },
          ...UNCACHEABLE,
        };
      case "ping":
        return { resultType: "complete" };
      case "tools/list": {
        ctx.enter("authorize");
        const names = server === undefined ? [...this.#mcp.servers.keys()] : [server];
        ctx.enter("decide");
        await this.#admit(principal, server ?? "*");
        ctx.enter("invoke");
        const listings = await Promise.all(names.map((n) => this.#list(n, server === undefined)));
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
        ctx.enter("authorize");
        const params = req.params;
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
        await this.#admit(principal, routed.server);
        ctx.enter("invoke");
        const upstream = this.#mcp.servers.get(routed.server)!;
        // A call asked for by name is sent whatever the probes say (they can be wrong); it starts them.
        this.#health(routed.server);
        // The caller's _meta (progress token aside) is not the upstream's business.
        const meta = isRecord(params._meta) && params._meta.progressToken !== undefined ? { _meta: { progressToken: params._meta.progressToken } } : {};
        const answer = await upstream.request("tools/call", { name: routed.name, arguments: args ?? {}, ...meta }, { signal: ctx.signal, keepAlive: ctx.waitUntil });
        if (!answer.ok) throw new GatewayError("upstream_error", `MCP server ${routed.server} refused the call (${answer.error.code}).`, { cause: answer.error.message });
        const result = isRecord(answer.result) ? answer.result : {};
        if (audit && result.isError === true) audit.toolError = true;
        return { resultType: "complete", ...result };
      }
      case "prompts/list":
      case "resources/list":
      case "resources/templates/list": {
        // Prompts and resources are served on one server's endpoint, where their names are the server's own.
        if (server === undefined) throw new GatewayError("mcp_method_not_found", `${req.method} is served on /mcp/<server>; the virtual server lists tools only.`);
        ctx.enter("authorize");
        ctx.enter("decide");
        await this.#admit(principal, server);
        ctx.enter("invoke");
        const answer = await this.#mcp.servers.get(server)!.request(req.method, typeof req.params.cursor === "string" ? { cursor: req.params.cursor } : {}, { signal: ctx.signal });
        if (!answer.ok) throw new GatewayError("upstream_error", `MCP server ${server} refused ${req.method} (${answer.error.code}).`, { cause: answer.error.message });
        const result = isRecord(answer.result) ? answer.result : {};
        const [field, key] = req.method === "prompts/list" ? (["prompts", "name"] as const) : req.method === "resources/list" ? (["resources", "uri"] as const) : (["resourceTemplates", "uriTemplate"] as const);
        const kind = req.method === "prompts/list" ? "prompt" : "resource";
        const items = Array.isArray(result[field]) ? (result[field] as unknown[]).filter((i): i is Record<string, unknown> => isRecord(i) && typeof i[key] === "string") : [];
        const visible = items.filter((i) => this.#mcp.policy.visible({ ...caller, server, kind, name: i[key] as string }).allowed);
        return { resultType: "complete", [field]: visible, ...(typeof result.nextCursor === "string" ? { nextCursor: result.nextCursor } : {}), ...UNCACHEABLE };
      }
      case "prompts/get":
      case "resources/read": {
        if (server === undefined) throw new GatewayError("mcp_method_not_found", `${req.method} is served on /mcp/<server>.`);
        ctx.enter("authorize");
        const kind = req.method === "prompts/get" ? "prompt" : "resource";
        const name = (req.method === "prompts/get" ? req.params.name : req.params.uri) as string;
        const audit = ctx.record.mcp;
        authorizeCall(this.#mcp.policy, { ...caller, server, kind, name }, req.params.arguments, (decision) => audit && Object.assign(audit, { decision, server, target: name }));
        ctx.enter("decide");
        await this.#admit(principal, server);
        ctx.enter("invoke");
        const forwarded = req.method === "prompts/get" ? { name, ...(req.params.arguments !== undefined ? { arguments: req.params.arguments } : {}) } : { uri: name };
        const answer = await this.#mcp.servers.get(server)!.request(req.method, forwarded, { signal: ctx.signal, keepAlive: ctx.waitUntil });
        if (!answer.ok) throw new GatewayError("upstream_error", `MCP server ${server} refused ${req.method} (${answer.error.code}).`, { cause: answer.error.message });
        return { resultType: "complete", ...(isRecord(answer.result) ? answer.result : {}), ...(req.method === "resources/read" ? UNCACHEABLE : {}) };
      }
      default:
        throw new GatewayError("mcp_method_not_found", `Method ${JSON.stringify(req.method)} is not served by this gateway's MCP endpoint.`);
    }
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

  async #list(name: string, merging: boolean): Promise<ServerListing> {
    const upstream = this.#mcp.servers.get(name)!;
    // On the virtual server a server the probes found down is reported in `partial` at once
    // instead of being waited on; one that fails closed is still asked (the probes can be wrong).
    if (this.#health(name) === "unhealthy" && merging && upstream.listFailure === "open") return { server: name, ok: false, reason: "unhealthy" };
    try {
      const answer = await upstream.request("tools/list", {}, { signal: this.#ctx.signal });
      if (!answer.ok) return { server: name, ok: false, reason: `error ${answer.error.code}` };
      const tools = isRecord(answer.result) && Array.isArray(answer.result.tools) ? (answer.result.tools as ListedTool[]).filter((t) => isRecord(t) && typeof t.name === "string") : [];
      return { server: name, ok: true, tools };
    } catch (err) {
      return { server: name, ok: false, reason: toGatewayError(err).code };
    }
  }
}
