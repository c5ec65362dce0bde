/**
 * The MCP kind: one MCP request through the runner's phases. Its decode reads the message in its
 * era — a 2026-07-28 stateless request, or a stateful-era (2025) message in a sealed session: an
 * `initialize`, a client's answer to a relayed request, a cancellation, a method — and picks the
 * operation its method names (catalog-operations, tool-operations, stream-operations); every later
 * hook is that operation's. Its failure hook decides which refusals are answered in-band.
 */

import type { AdmissionLease } from "../../admit/admission.ts";
import { readAttribution } from "../../attribution/attribution.ts";
import { authenticateCaller } from "../../auth/authenticator-chain.ts";
import type { RequestContext } from "../../context/request-context.ts";
import { GatewayError } from "../../errors/gateway-error.ts";
import { clientResponseOf, type ClientResponse } from "../../mcp/client-relays.ts";
import type { ClientView } from "../../mcp/client-view.ts";
import { TASKS_CAPABILITY, tasksServed } from "../../mcp/task-support.ts";
import type { StreamEventChain } from "../../plugins/stream-event-chain.ts";
import { isRecord } from "../../protocol/fast-guard.ts";
import { checkLegacyParams, isStatelessMessage, legacyVersionOf, negotiateVersion, validateLegacyMessage } from "../../protocol/mcp/legacy-request.ts";
import { STATELESS_VERSION, validateStatelessRequest, type StatelessRequest } from "../../protocol/mcp/stateless-request.ts";
import type { Principal } from "../../publication/principal.ts";
import { inBandStatus, rpcResult, UNCACHEABLE } from "../../respond/mcp-result.ts";
import type { SignalSet } from "../../signals/signal-set.ts";
import type { Subject } from "../../signals/subject.ts";
import type { AdmissionKey, Early, KindTurn, Responded } from "../traffic-kind.ts";
import { catalogList, catalogRead, complete, setLevel, toolList } from "./catalog-operations.ts";
import type { McpIngress, McpReply } from "./mcp-api.ts";
import { knownServer, mcpCall, type McpCall, type McpKindDeps } from "./mcp-call.ts";
import type { McpDeps } from "./mcp-deps.ts";
import type { McpOperation } from "./mcp-operation.ts";
import { getStream, listen, subscribe } from "./stream-operations.ts";
import { taskRequest, toolCall } from "./tool-operations.ts";

/** A stateful-era session's store: present only when a session secret is configured. */
type McpSessions = NonNullable<McpDeps["sessions"]>;

const NO_HEADERS: ReadonlyMap<string, string> = new Map();

const ACCEPTED: McpReply = { kind: "result", status: 202, body: undefined };

/** An MCP request of either era, as the runner drives it. */
export class McpTurn implements KindTurn<McpReply> {
  readonly kind = "mcp";
  readonly #deps: McpKindDeps;
  readonly #mcp: McpDeps;
  readonly #ingress: McpIngress;
  readonly #ctx: RequestContext;
  #principal: Principal | undefined;
  /** The id an error answers: the request's own whenever the body has a readable one. */
  #id: string | number | null = null;
  /** Set once a stateful-era request presented a valid session: its refusals are then answered in-band. */
  #inSession = false;
  #client: ClientView | undefined;
  #op: McpOperation | undefined;
  /** The id of the request whose result is answered (a request, not a notification). */
  #requestId: string | number = 0;

  constructor(deps: McpKindDeps, mcp: McpDeps, ctx: RequestContext, ingress: McpIngress) {
    this.#deps = deps;
    this.#mcp = mcp;
    this.#ingress = ingress;
    this.#ctx = ctx;
    // No plan sets an MCP request's deadline: the gateway's own bound applies from the start.
    ctx.setDeadline(ctx.receivedAt + deps.requestDeadlineMs);
    ctx.record.entrypoint = ingress.server === undefined ? "mcp" : `mcp/${ingress.server}`;
    ctx.record.workload = ingress.workload;
  }

  async authenticate(): Promise<Principal> {
    this.#principal = await authenticateCaller(this.#deps, { apiKey: this.#ingress.apiKey, bearer: this.#ingress.bearer }, "mcp");
    return this.#principal;
  }

  async decode(): Promise<Early<McpReply> | undefined> {
    const ctx = this.#ctx;
    const ingress = this.#ingress;
    if (ingress.httpMethod === "GET") return await this.#decodeGet();
    const body = await ingress.readBody();
    ctx.checkpoint();
    const raw = isRecord(body) ? body.id : undefined;
    if (typeof raw === "string" || (typeof raw === "number" && Number.isFinite(raw))) this.#id = raw;
    if (this.#mcp.sessions && !isStatelessMessage(body)) return await this.#decodeLegacy(body, this.#mcp.sessions);
    const req = validateStatelessRequest(ingress.headers, body, [STATELESS_VERSION]);
    this.#id = req.id ?? null;
    ctx.record.route = req.method;
    ctx.record.mcp = { method: req.method, jsonrpcId: req.id, protocolVersion: req.protocolVersion };
    ctx.record.attribution = readAttribution(ingress.headers, req.params._meta);
    // A notification (cancellation over HTTP is the closed stream): accepted, nothing to relay.
    if (req.id === undefined) return { kind: "complete", reply: ACCEPTED };
    knownServer(this.#mcp, ingress.server);
    const principal = this.#principal!;
    this.#client = { era: "stateless", capabilities: req.clientCapabilities, sessionKey: `key:${principal.tenantId}/${principal.keyId}`, relaySession: undefined };
    return this.#operation({ ...req, id: req.id });
  }

  async authorize(): Promise<Early<McpReply> | undefined> {
    await this.#op!.authorize();
    return undefined;
  }

  subject(): Subject | undefined {
    return this.#op?.subject?.();
  }

  trusted(): ReadonlyMap<string, string> {
    return NO_HEADERS;
  }

  /** A tool call (the one operation with a subject) runs the publication's MCP plugins on its arguments. */
  plugins(): { readonly names: readonly string[]; readonly decision: string | undefined } {
    return { names: this.subject() === undefined ? [] : this.#deps.publication.mcpPlugins, decision: undefined };
  }

  async decide(_signals: SignalSet): Promise<Early<McpReply> | undefined> {
    const answered = await this.#op!.decide?.();
    return answered === undefined ? undefined : { kind: "respond", reply: this.#result(answered) };
  }

  amend(subject: Subject): void {
    this.#op!.amend?.(subject);
  }

  async reserve(): Promise<void> {
    await this.#op!.reserve?.();
  }

  admission(): AdmissionKey {
    return { tenant: this.#principal!.tenantId, model: `mcp:${this.#op!.admissionServer()}` };
  }

  async invoke(_lease: AdmissionLease): Promise<void> {
    await this.#op!.invoke();
  }

  respond(_events: StreamEventChain | undefined): Responded<McpReply> {
    const result = this.#op!.result();
    return { reply: result === undefined ? { kind: "result", status: 200, body: undefined } : this.#result(result), streaming: false };
  }

  failed(error: GatewayError, thrown: unknown): McpReply {
    return { kind: "error", error, id: this.#id, status: inBandStatus(thrown, error, this.#ctx.record.mcp?.protocolVersion, this.#inSession) };
  }

  #result(result: Readonly<Record<string, unknown>>): McpReply {
    return { kind: "result", status: 200, body: rpcResult(this.#requestId, result, this.#client!.era) };
  }

  /** The operation the request's method names; the gateway's own methods are answered here. */
  #operation(req: StatelessRequest & { readonly id: string | number }): Early<McpReply> | undefined {
    this.#requestId = req.id;
    const call = this.#call();
    switch (req.method) {
      case "server/discover":
        return {
          kind: "respond",
          reply: this.#result({
            resultType: "complete",
            supportedVersions: [STATELESS_VERSION],
            capabilities: { tools: {}, prompts: {}, resources: {}, completions: {} },
            _meta: { "io.modelcontextprotocol/serverInfo": this.#mcp.serverInfo },
            ...UNCACHEABLE,
          }),
        };
      case "ping":
        return { kind: "respond", reply: this.#result({ resultType: "complete" }) };
      case "subscriptions/listen":
        this.#op = listen(call, req);
        return undefined;
      case "resources/subscribe":
      case "resources/unsubscribe":
        this.#op = subscribe(call, req);
        return undefined;
      case "logging/setLevel":
        this.#op = setLevel(call, req);
        return undefined;
      case "completion/complete":
        this.#op = complete(call, req);
        return undefined;
      case "tools/list":
        this.#op = toolList(call, req);
        return undefined;
      case "tools/call":
        this.#op = toolCall(call, req);
        return undefined;
      case "tasks/get":
      case "tasks/result":
      case "tasks/cancel":
      case "tasks/list":
        this.#op = taskRequest(call, req);
        return undefined;
      case "prompts/list":
      case "resources/list":
      case "resources/templates/list":
        this.#op = catalogList(call, req, req.method);
        return undefined;
      case "prompts/get":
      case "resources/read":
        this.#op = catalogRead(call, req, req.method);
        return undefined;
      default:
        throw new GatewayError("mcp_method_not_found", `Method ${JSON.stringify(req.method)} is not served by this gateway's MCP endpoint.`);
    }
  }

  #call(): McpCall {
    return mcpCall(this.#deps, this.#mcp, this.#ingress, this.#ctx, this.#principal!, this.#client!);
  }

  /**
   * A stateful-era client's GET stream. The 2026-07-28 revision has no GET (it has
   * `subscriptions/listen`): without a session id the answer is 405.
   */
  async #decodeGet(): Promise<undefined> {
    const ctx = this.#ctx;
    ctx.record.route = "GET";
    ctx.record.mcp = { method: "GET", jsonrpcId: undefined, protocolVersion: undefined };
    const sessions = this.#mcp.sessions;
    if (!sessions || this.#ingress.headers.get("mcp-session-id") === null) throw new GatewayError("method_not_allowed", "This MCP endpoint takes GET only in a stateful-era session; revision 2026-07-28 subscribes with subscriptions/listen.");
    this.#client = await this.#sessionClient(sessions);
    knownServer(this.#mcp, this.#ingress.server);
    this.#op = getStream(this.#call());
    return undefined;
  }

  /**
   * A stateful-era (2025) client: `initialize` opens a session whose id is its sealed state;
   * every later message must present an id this gateway sealed for the same principal (else 404,
   * and the client initializes again, as the specification prescribes). The methods served are
   * those of the stateless path, answered in the 2025 shape.
   */
  async #decodeLegacy(body: unknown, sessions: McpSessions): Promise<Early<McpReply> | undefined> {
    const ctx = this.#ctx;
    const ingress = this.#ingress;
    const response = clientResponseOf(body);
    if (response) return await this.#clientAnswered(response, sessions);
    const req = validateLegacyMessage(body);
    ctx.record.route = req.method;
    ctx.record.mcp = { method: req.method, jsonrpcId: req.id, protocolVersion: undefined };
    ctx.record.attribution = readAttribution(ingress.headers, req.params._meta);
    knownServer(this.#mcp, ingress.server);
    if (req.method === "initialize") return { kind: "complete", reply: await this.#initialize(req.id, req.params, sessions) };
    const client = await this.#sessionClient(sessions);
    this.#client = client;
    this.#inSession = true;
    const version = legacyVersionOf(ingress.headers);
    ctx.record.mcp = { ...ctx.record.mcp, protocolVersion: version };
    if (req.id === undefined) {
      // The era's cancellation: the request it names ends, here if it runs here.
      if (req.method === "notifications/cancelled") this.#mcp.inFlight.cancel(client.relaySession!, req.params.requestId);
      return { kind: "complete", reply: ACCEPTED };
    }
    if (req.method === "server/discover") throw new GatewayError("mcp_method_not_found", "server/discover belongs to protocol revision 2026-07-28; this session speaks the 2025 era.");
    checkLegacyParams(req);
    // Until the request ends, its client may cancel it by id: a registration the terminal undoes.
    const unregister = this.#mcp.inFlight.register(client.relaySession!, req.id, () => ctx.abort("client_disconnected"));
    ctx.own("inflight_registration", unregister);
    return this.#operation({ id: req.id, method: req.method, params: req.params, protocolVersion: version, clientCapabilities: client.capabilities });
  }

  /** `initialize`: a new session, sealed into its id; answered where it was read. */
  async #initialize(id: string | number | undefined, params: Readonly<Record<string, unknown>>, sessions: McpSessions): Promise<McpReply> {
    if (id === undefined) throw new GatewayError("mcp_invalid_message", "initialize is a request: it needs an id.");
    const principal = this.#principal!;
    const protocolVersion = negotiateVersion(params.protocolVersion);
    const capabilities = isRecord(params.capabilities) ? params.capabilities : {};
    const sessionId = await sessions.sealer.seal({ principal: `${principal.tenantId}/${principal.keyId}`, protocolVersion, clientCapabilities: capabilities, upstream: {}, expiresAt: this.#deps.clock.now() + sessions.ttlMs });
    return {
      kind: "result",
      status: 200,
      headers: { "mcp-session-id": sessionId },
      body: {
        jsonrpc: "2.0",
        id,
        result: {
          protocolVersion,
          capabilities: {
            tools: { listChanged: true },
            prompts: { listChanged: true },
            resources: { subscribe: true, listChanged: true },
            completions: {},
            logging: {},
            ...(tasksServed(this.#mcp.approvals !== undefined, "stateful", protocolVersion) ? { tasks: TASKS_CAPABILITY } : {}),
          },
          serverInfo: this.#mcp.serverInfo,
        },
      },
    };
  }

  /**
   * A stateful-era client's answer to a request the gateway relayed to it (elicitation, sampling,
   * roots): delivered to the request waiting for it, in the same session, or refused.
   */
  async #clientAnswered(response: ClientResponse, sessions: McpSessions): Promise<Early<McpReply>> {
    const ctx = this.#ctx;
    ctx.record.route = "response";
    ctx.record.mcp = { method: "response", jsonrpcId: response.id, protocolVersion: undefined };
    const { relaySession } = await this.#sessionClient(sessions);
    if (!this.#mcp.relays.answer(relaySession!, response)) {
      throw new GatewayError("invalid_request", "No request of this session waits for that response: it ended, or it runs on another gateway instance.");
    }
    return { kind: "complete", reply: ACCEPTED };
  }

  /**
   * The stateful-era client behind the request's `Mcp-Session-Id`: a session this gateway sealed
   * for this principal. Unknown, expired, tampered or another caller's: to this caller the session
   * does not exist (404, and the client initializes again, as the specification prescribes).
   */
  async #sessionClient(sessions: McpSessions): Promise<ClientView> {
    const principal = this.#principal!;
    const presented = this.#ingress.headers.get("mcp-session-id");
    if (presented === null) throw new GatewayError("invalid_request", "Send the Mcp-Session-Id this gateway answered initialize with.");
    const opened = await sessions.sealer.open(presented, `${principal.tenantId}/${principal.keyId}`, this.#deps.clock.now());
    if (!opened.ok) throw new GatewayError("not_found", "The MCP session is unknown or has expired: initialize again.");
    return { era: "stateful", capabilities: opened.state.clientCapabilities, sessionKey: `session:${presented}`, relaySession: presented };
  }
}
