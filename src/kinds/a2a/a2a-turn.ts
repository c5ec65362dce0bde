/**
 * The A2A kind: one `POST /a2a/<agent>` through the runner's phases, like an MCP tool call. Decode
 * reads the caller's generation (`A2A-Version`) and its JSON-RPC request; authorize asks the A2A
 * policy about the skill; reserve prices a message (`a2a.prices`) and applies the task cap; admit
 * keys on `a2a:<agent>`; invoke sends the request to the agent's JSON-RPC URL for that generation;
 * respond relays its answer — one JSON-RPC response, or its SSE stream event by event.
 *
 * A caller of the generation the agent speaks is relayed as it came; a caller of the other is
 * bridged (src/protocol/a2a/bridge.ts): its request translated at decode — so a call the agent's
 * generation cannot express is refused before anything is reserved — and every answer, or each
 * event of a stream, translated back.
 */

import type { AdmissionLease } from "../../admit/admission.ts";
import { readAttribution } from "../../attribution/attribution.ts";
import { gatewayAgentUrl } from "../../a2a/card-rewrite.ts";
import type { A2aDecision } from "../../a2a/a2a-policy.ts";
import { isBoundId, type CallerIds } from "../../a2a/task-binding.ts";
import { authorizeAgentUse, authorizeMessage } from "../../auth/a2a-authorize.ts";
import { authenticateCaller, type AuthenticatorDeps } from "../../auth/authenticator-chain.ts";
import type { RequestContext } from "../../context/request-context.ts";
import type { A2aRecord } from "../../context/request-record.ts";
import type { Clock } from "../../deps/clock.ts";
import { gateAgentMessage } from "../../decide/agent-approval-gate.ts";
import type { ApprovedCall } from "../../decide/approval-gate.ts";
import { echo } from "../../errors/echo.ts";
import { GatewayError, toGatewayError } from "../../errors/gateway-error.ts";
import { toJsonRpcErrorBody } from "../../errors/json-rpc.ts";
import { sendToAgent, type A2aAnswer } from "../../invoker/a2a-exchange.ts";
import type { StreamEventChain } from "../../plugins/stream-event-chain.ts";
import { isRecord } from "../../protocol/fast-guard.ts";
import { A2A_VERSION_HEADER, decodeA2aRequest, jsonRpcIdOf, requestGeneration, type A2aRequest } from "../../protocol/a2a/a2a-request.ts";
import { generationsOf, type A2aGeneration, type AgentCardView } from "../../protocol/a2a/agent-card.ts";
import { agentGenerationFor, bridgeRequest, bridgeResponse, type A2aJsonRpcRequest, type A2aJsonRpcResponse } from "../../protocol/a2a/bridge.ts";
import { mapIds, requestIdSlots, resultIdSlots, type IdSlot } from "../../protocol/a2a/id-slots.ts";
import type { CompiledPublication } from "../../publication/compile-publication.ts";
import type { Principal } from "../../publication/principal.ts";
import { agentRateScope, reservePricedCall, type ToolCallTrack } from "../../reserve/tool-charge.ts";
import type { ReserveDeps } from "../../reserve/reserve-phase.ts";
import type { SignalSet } from "../../signals/signal-set.ts";
import type { AdmissionKey, Early, KindTurn, Responded } from "../traffic-kind.ts";
import type { A2aIngress, A2aReply } from "./a2a-api.ts";
import { answerHeldTask, checkHoldable, continuation, endpointOf, heldReply, heldTaskOf, sendClaimed, type HeldTask } from "./a2a-approvals.ts";
import { answerForCaller, checkPushAtDecode, relayedRequest, type PushCallFacts } from "./push-operations.ts";
import type { A2aDeps } from "./a2a-deps.ts";

/** What the A2A kind's hooks use besides the agents and the policy, built once per isolate. */
export interface A2aKindDeps extends AuthenticatorDeps {
  readonly publication: CompiledPublication;
  readonly clock: Clock;
  readonly requestDeadlineMs: number;
  readonly reserve: ReserveDeps;
}

const encoder = new TextEncoder();

/** Where a call goes: the agent's JSON-RPC URL, the generation it is spoken in there, and the request as the agent reads it. */
interface AgentRoute {
  readonly url: string;
  readonly generation: A2aGeneration;
  readonly request: A2aJsonRpcRequest;
}

/** An A2A call of one agent, as the runner drives it. */
export class A2aTurn implements KindTurn<A2aReply> {
  readonly kind = "a2a";
  readonly #deps: A2aKindDeps;
  readonly #a2a: A2aDeps;
  readonly #ingress: A2aIngress;
  readonly #ctx: RequestContext;
  #principal: Principal | undefined;
  #id: string | number | null = null;
  #req: A2aRequest | undefined;
  #card: AgentCardView | undefined;
  #route: AgentRoute | undefined;
  #charge: ToolCallTrack | undefined;
  #answer: A2aAnswer | undefined;
  /** A JSON answer as the caller reads it (its generation, its id, its task ids), made at invoke. */
  #json: A2aJsonRpcResponse | undefined;
  /** The caller's bound task and context ids at the agent called (made once the agent is known). */
  #ids: CallerIds | undefined;
  /** The ids opened in the request, each with the caller's form it had. */
  #opened: readonly IdSlot[] = [];
  /** Whether the virtual agent's answer has pinned its context already. */
  #pinned = false;
  /** The agent called: the one named in the path, or (the virtual agent) the one routed to at decide. */
  #agent: string;
  /** The skill the message is decided and priced by: the one it names, or the one routing matched. */
  #skill: string | undefined;
  /** The gateway's own approval task the request presents (a2a-approvals.ts): read, cancelled or continued. */
  #held: HeldTask | undefined;
  /** A message's policy decision (authorize, or decide for the virtual agent). */
  #decision: A2aDecision | undefined;
  /** The approval a message runs under, claimed at invoke. */
  #approved: ApprovedCall | undefined;

  constructor(deps: A2aKindDeps, a2a: A2aDeps, ctx: RequestContext, ingress: A2aIngress) {
    this.#deps = deps;
    this.#a2a = a2a;
    this.#ingress = ingress;
    this.#ctx = ctx;
    // No plan sets an agent call's deadline: the gateway's own bound applies from the start.
    ctx.setDeadline(ctx.receivedAt + deps.requestDeadlineMs);
    this.#agent = ingress.agent ?? "";
    ctx.record.entrypoint = ingress.agent === undefined ? "a2a" : `a2a/${ingress.agent}`;
    ctx.record.workload = ingress.workload;
  }

  async authenticate(): Promise<Principal> {
    this.#principal = await authenticateCaller(this.#deps, { apiKey: this.#ingress.apiKey, bearer: this.#ingress.bearer }, "model");
    return this.#principal;
  }

  async decode(): Promise<Early<A2aReply> | undefined> {
    const ctx = this.#ctx;
    const ingress = this.#ingress;
    const body = await ingress.readBody();
    ctx.checkpoint();
    this.#id = jsonRpcIdOf(body);
    const generation = requestGeneration(ingress.headers.get(A2A_VERSION_HEADER));
    const decoded = decodeA2aRequest(body, generation);
    // An approval task's id is the gateway's own: read, cancelled or continued here, never sent on.
    const held = await heldTaskOf(this.#a2a.approvals, decoded, this.#principal!, endpointOf(ingress.agent), ctx.clock.now());
    ctx.checkpoint();
    const req = held && decoded.info.kind === "message" ? continuation(decoded, held) : decoded;
    this.#req = req;
    checkPushAtDecode(this.#a2a.push, req);
    this.#held = held;
    if (held) this.#agent = held.handle.agent;
    ctx.record.route = req.method;
    ctx.record.attribution = readAttribution(ingress.headers);
    this.#skill = req.skill;
    // The task id as presented, until it is opened into the agent's (a correlation, never the business
    // task); an approval task's id is the gateway's own, and the approval names it instead.
    ctx.record.a2a = { method: req.method, jsonrpcId: req.id, generation, agent: this.#agent, skill: req.skill, a2aTaskId: held && req.info.kind === "task" ? undefined : req.a2aTaskId?.slice(0, 256), contextId: req.contextId, approvalId: held?.handle.approvalId };
    // An approval task's state is the desk's (decide): the agent is not reached.
    if (held && req.info.kind === "task") return undefined;
    if (ingress.agent === undefined && held === undefined) {
      // The virtual agent routes a message by what it asks for; anything else belongs to the agent that holds it.
      if (req.info.kind !== "message") throw new GatewayError("invalid_request", `${req.method} names a task or an agent's own state: send it to /a2a/<agent>, the agent that holds it (the answer to the message that made it names the agent's card).`);
      return undefined;
    }
    await this.#load(this.#agent);
    return undefined;
  }

  /** The agent's card and where the call goes on it. */
  async #load(agent: string): Promise<void> {
    const ctx = this.#ctx;
    const req = this.#req!;
    if (!this.#a2a.cards.has(agent)) throw new GatewayError("agent_not_found", `No agent named ${echo(agent)} is configured.`);
    const card = await this.#a2a.cards.card(agent, ctx.waitUntil);
    ctx.checkpoint();
    if (card === undefined) throw new GatewayError("agent_card_unavailable", `The card of agent ${echo(agent)} has not been fetched yet.`, { retryAfterSeconds: 5 });
    this.#card = card;
    this.#ids = this.#a2a.ids.forOwner({ tenant: this.#principal!.tenantId, key: this.#principal!.keyId, agent });
    await this.#openIds(req);
    this.#route = routeOf(agent, card, req);
  }

  /**
   * The caller's task and context ids in the request, swapped for the agent's: an id this gateway
   * did not give this caller for this agent is one that does not exist, and nothing is sent; a
   * context id the caller chose itself goes to the agent in the caller's own namespace.
   */
  async #openIds(req: A2aRequest): Promise<void> {
    const slots = requestIdSlots(req);
    if (slots.length === 0) return;
    // Kept so that a message held for approval can be put back as the caller wrote it (#writtenMessage).
    this.#opened = slots;
    const ids = this.#ids!;
    const record = this.#ctx.record.a2a;
    for (const slot of slots) {
      const ownContext = slot.kind === "context" && !isBoundId("context", slot.id);
      const agentId = ownContext ? await ids.ownContext(slot.id) : await ids.open(slot.kind, slot.id);
      if (agentId === undefined) throw new GatewayError("agent_task_not_found", `No ${slot.kind} ${echo(slot.id)} of agent ${echo(this.#agent)} was given to this caller.`, { param: slot.param });
      (slot.holder as Record<string | number, unknown>)[slot.key] = agentId;
      if (record && slot.kind === "task" && slot.id === req.a2aTaskId) record.a2aTaskId = agentId.slice(0, 256);
      if (record && slot.kind === "context" && slot.id === req.contextId) record.contextId = agentId.slice(0, 256);
    }
    this.#ctx.checkpoint();
  }

  /**
   * The agent's ids in an answer (already in the caller's generation) swapped for the caller's
   * bound ids. The virtual agent pins the context the answer names, as the caller will present it,
   * to the agent that holds it.
   */
  async #bindIds(answer: A2aJsonRpcResponse): Promise<void> {
    const slots = resultIdSlots(answer.result);
    await mapIds(slots, (kind, id) => this.#ids!.bind(kind, id));
    if (this.#ingress.agent !== undefined || this.#pinned) return;
    const context = slots.find((s) => s.kind === "context");
    if (context === undefined) return;
    this.#pinned = true;
    this.#a2a.router.pinContext(this.#principal!.tenantId, (context.holder as Record<string | number, unknown>)[context.key] as string, this.#agent);
  }

  async authorize(): Promise<Early<A2aReply> | undefined> {
    const req = this.#req!;
    // The approval task is the caller's own (its handle opened for it): nothing of the agent's is reached.
    if (this.#held && req.info.kind === "task") return undefined;
    // The virtual agent's policy is decided at decide, for the agent routing chooses (a continuation's agent is the handle's).
    if (this.#ingress.agent === undefined && this.#held === undefined) return undefined;
    const declared = this.#card!.skills.map((s) => s.id);
    const caller = { tenant: this.#principal!.tenantId, key: this.#principal!.keyId };
    if (req.info.kind === "message") this.#decision = authorizeMessage(this.#a2a.policy, caller, this.#agent, req.skill, declared, this.#ctx.record.a2a);
    else authorizeAgentUse(this.#a2a.policy, caller, this.#agent, declared, this.#ctx.record.a2a);
    return undefined;
  }

  async decide(_signals: SignalSet): Promise<Early<A2aReply> | undefined> {
    const ctx = this.#ctx;
    const req = this.#req!;
    if (this.#held && req.info.kind === "task") return { kind: "respond", reply: await answerHeldTask(this.#a2a.approvals!, ctx, req, this.#held) };
    // A named agent (or a continuation, whose agent its handle names): the policy decided; the approval gate is left.
    if (this.#ingress.agent !== undefined || this.#held !== undefined) return await this.#gate();
    const router = this.#a2a.router;
    const caller = { tenant: this.#principal!.tenantId, key: this.#principal!.keyId };
    // Every configured agent's last good card (an agent without one yet offers nothing to route to).
    const names = this.#a2a.cards.agents();
    const cards = await Promise.all(names.map((agent) => this.#a2a.cards.card(agent, ctx.waitUntil)));
    ctx.checkpoint();
    const facts = names.flatMap((agent, i) => {
      const card = cards[i];
      return card === undefined ? [] : [{ agent, skills: card.skills.map((s) => ({ id: s.id, tags: s.tags })) }];
    });
    const declared = new Map(facts.map((f) => [f.agent, f.skills.map((s) => s.id)]));
    const trusted = new Map<string, string>();
    for (const h of router.affinityHeaders) {
      const v = this.#ingress.headers.get(h);
      if (v !== null && v !== "") trusted.set(h, v);
    }
    // A context the gateway gave this caller names its agent in its tag: the pin holds in every
    // isolate and after a restart, not only where the context began.
    if (req.contextId !== undefined) await this.#pinBoundContext(req.contextId, names);
    const decision = router.route(
      { tenant: caller.tenant, ask: { skill: req.skill, tags: req.tags }, contextId: req.contextId, trustedHeaders: trusted },
      facts,
      (agent) => this.#a2a.isHealthy(agent, ctx.waitUntil),
      (agent, skill) => this.#a2a.policy.decide(caller, agent, skill, declared.get(agent) ?? []).allowed,
    );
    if (!decision.ok) throw decision.error;
    const record = ctx.record.a2a;
    this.#agent = decision.agent;
    this.#skill = decision.skill ?? req.skill;
    if (record) {
      record.agent = decision.agent;
      record.routed = { rule: decision.rule, pinnedBy: decision.pinnedBy };
      // A message routed by its tags is recorded, priced and decided by the skill routing matched.
      record.skill = this.#skill;
    }
    await this.#load(decision.agent);
    // The chosen agent is decided like a named one: the policy asked again, for the skill routing matched.
    this.#decision = authorizeMessage(this.#a2a.policy, caller, decision.agent, this.#skill, this.#card!.skills.map((s) => s.id), record);
    return await this.#gate();
  }

  /** A message whose rule requires approval: held at the desk (answered with its task), or sent under its claim. */
  async #gate(): Promise<Early<A2aReply> | undefined> {
    const req = this.#req!;
    const decision = this.#decision;
    if (req.info.kind !== "message" || decision === undefined) return undefined;
    const held = this.#held;
    const approvals = this.#a2a.approvals;
    // A message to be held is kept, answered and bound as the caller wrote it; one that needs no approval is not copied.
    const written = decision.approval === "required" && held === undefined ? this.#writtenMessage() : (req.params.message as Readonly<Record<string, unknown>>);
    // A new message to be held must fit in its task's id: refused before an approval is asked for.
    if (decision.approval === "required" && held === undefined && approvals !== undefined) checkHoldable(written);
    const out = await gateAgentMessage(approvals, this.#ctx, {
      principal: this.#principal!,
      decision,
      agent: this.#agent,
      skill: this.#skill,
      skills: this.#card!.skills,
      // A continuation is bound by the message it holds, as it was written.
      message: held ? held.handle.message : written,
      origin: this.#ingress.origin,
      continuing: held ? { approvalId: held.handle.approvalId } : undefined,
    });
    this.#ctx.checkpoint();
    if (out.kind === "send") {
      this.#approved = out.approved;
      return undefined;
    }
    return { kind: "respond", reply: await heldReply(approvals!, this.#ctx, { ...req, params: { ...req.params, message: written } }, this.#principal!, endpointOf(this.#ingress.agent), this.#agent, this.#skill, out.approval, held) };
  }

  /** A copy of the message with the caller's own task and context ids in it (the request holds the agent's once opened). */
  #writtenMessage(): Readonly<Record<string, unknown>> {
    const message = this.#req!.params.message as Readonly<Record<string, unknown>>;
    const opened = this.#opened;
    if (opened.length === 0) return message;
    const put = (slot: IdSlot, v: unknown) => void ((slot.holder as Record<string | number, unknown>)[slot.key] = v);
    const agentIds = opened.map((slot) => (slot.holder as Record<string | number, unknown>)[slot.key]);
    opened.forEach((slot) => put(slot, slot.id));
    try {
      return structuredClone(message);
    } finally {
      opened.forEach((slot, i) => put(slot, agentIds[i]));
    }
  }

  /**
   * Pins a bound context id (`ac1.`) to the agent it was given for: the one agent whose binding
   * opens it for this caller. One that opens for none is not this caller's: not found.
   */
  async #pinBoundContext(contextId: string, agents: readonly string[]): Promise<void> {
    const caller = { tenant: this.#principal!.tenantId, key: this.#principal!.keyId };
    const binding = this.#a2a.ids;
    if (!isBoundId("context", contextId)) return;
    for (const agent of agents) {
      if ((await binding.forOwner({ ...caller, agent }).open("context", contextId)) !== undefined) {
        this.#a2a.router.pinContext(caller.tenant, contextId, agent);
        return;
      }
    }
    throw new GatewayError("agent_task_not_found", `No context ${echo(contextId)} was given to this caller.`, { param: "params.message.contextId" });
  }

  async reserve(): Promise<void> {
    const req = this.#req!;
    const agent = this.#agent;
    const skill = this.#skill;
    const record = this.#ctx.record.a2a;
    // Only a message is priced; every call counts against the business task's cap.
    this.#charge = await reservePricedCall(this.#deps.reserve, this.#deps.publication, this.#ctx, this.#principal!, {
      pricing: req.info.kind === "message" ? this.#a2a.policy.pricing(agent, skill) : undefined,
      label: `a2a:${agent}/${skill ?? "*"}`,
      what: "agent call",
      rateScope: agentRateScope,
      onCharge: (charge) => {
        if (record) record.charge = charge;
      },
    });
  }

  admission(): AdmissionKey {
    return { tenant: this.#principal!.tenantId, model: `a2a:${this.#agent}` };
  }

  async invoke(_lease: AdmissionLease | undefined): Promise<void> {
    const req = this.#req!;
    const route = this.#route!;
    const agent = this.#agent;
    const charge = this.#charge;
    const record = this.#ctx.record.a2a;
    const push: PushCallFacts = {
      caller: { tenant: this.#principal!.tenantId, key: this.#principal!.keyId },
      agent,
      callerGeneration: req.generation,
      agentGeneration: route.generation,
      origin: this.#ingress.origin,
      now: this.#deps.clock.now(),
    };
    const message = await relayedRequest(this.#a2a.push, route.request, push);
    // Never sent unapproved: a message whose rule requires approval runs only under its claim.
    if (this.#decision?.approval === "required" && this.#approved === undefined) throw new Error("a message that needs approval reached invoke without one");
    // The agent's time, from the send to its answer read (a stream's: to the stream's end, which
    // ends the request and so this wait); an approval claim's report after it is the gateway's.
    let endWait: (() => void) | undefined;
    const answer = await sendClaimed(this.#ctx, this.#approved, (claimSent) =>
      sendToAgent(this.#a2a.network, {
        agent,
        url: route.url,
        generation: route.generation,
        credential: this.#a2a.credential(agent),
        message,
        streaming: req.info.streaming,
        gatewayUrl: gatewayAgentUrl(this.#ingress.origin, agent),
        signal: this.#ctx.signal,
        onSent: () => {
          endWait = this.#ctx.upstream.begin();
          claimSent();
          if (record) record.sent = true;
          charge?.onSent();
        },
        onEvidence: (e) => charge?.onEvidence(e),
      }).then(
        (sent) => {
          if (sent.kind !== "stream") endWait?.();
          return sent;
        },
        (err: unknown) => {
          endWait?.();
          throw err;
        },
      ),
    );
    this.#answer = await answerForCaller(this.#a2a.push, route.request.method, answer, push);
    if (this.#answer.kind === "json") {
      const body = this.#toCaller(this.#answer.body);
      this.#correlate(body.result);
      await this.#bindIds(body);
      this.#json = body;
    }
  }

  respond(_events: StreamEventChain | undefined): Responded<A2aReply> {
    const answer = this.#answer!;
    if (answer.kind === "json") {
      const record = this.#ctx.record.a2a;
      if (record && answer.errorCode !== undefined) record.agentError = answer.errorCode;
      return { reply: { kind: "json", body: this.#json! }, streaming: false };
    }
    return { reply: { kind: "stream", body: this.#relay(answer.events) }, streaming: true };
  }

  failed(error: GatewayError, _thrown: unknown): A2aReply {
    return { kind: "error", error, id: this.#id };
  }

  /**
   * The agent's stream for the client, event by event (SSE, one JSON-RPC response per event). Its
   * end ends the request; a failure mid-stream is the stream's last event, a JSON-RPC error with
   * the request's id; a client that goes away aborts the request (and so the agent's stream).
   */
  #relay(events: AsyncIterable<Readonly<Record<string, unknown>>>): ReadableStream<Uint8Array> {
    const ctx = this.#ctx;
    const it = events[Symbol.asyncIterator]();
    const frame = (message: unknown) => encoder.encode(`data: ${JSON.stringify(message)}\n\n`);
    return new ReadableStream<Uint8Array>({
      pull: async (controller) => {
        try {
          const next = await it.next();
          if (next.done) {
            controller.close();
            ctx.finish({ kind: "completed" });
            return;
          }
          const error = next.value.error;
          const record = ctx.record.a2a;
          if (record && isRecord(error) && typeof error.code === "number") record.agentError ??= error.code;
          const event = this.#toCaller(next.value);
          this.#correlate(event.result);
          await this.#bindIds(event);
          controller.enqueue(frame(event));
        } catch (err) {
          const error = ctx.signal.aborted && ctx.signal.reason instanceof GatewayError ? ctx.signal.reason : toGatewayError(err);
          controller.enqueue(frame(toJsonRpcErrorBody(error, this.#id)));
          controller.close();
          ctx.finish({ kind: "failed", error });
        }
      },
      cancel: async () => {
        ctx.abort("client_disconnected");
        await it.return?.();
      },
    });
  }

  /** An answer of the agent (or one event's) in the caller's generation, with the caller's id. */
  #toCaller(answer: Readonly<Record<string, unknown>>): A2aJsonRpcResponse {
    const req = this.#req!;
    return bridgeResponse(answer as unknown as A2aJsonRpcResponse, req.method, req.generation, this.#route!.generation, req.id);
  }

  /** The A2A task and context an answer names, recorded once as correlations of the call. */
  #correlate(result: unknown): void {
    const record: A2aRecord | undefined = this.#ctx.record.a2a;
    if (!record || !isRecord(result)) return;
    // 1.0 wraps what it answers ({task}, {message}, {statusUpdate}, {artifactUpdate}); 0.3 answers it bare, with a `kind`.
    const inner = [result.task, result.message, result.statusUpdate, result.artifactUpdate].find(isRecord) ?? result;
    const isTask = isRecord(result.task) || inner.kind === "task";
    const taskId = isTask ? inner.id : inner.taskId;
    if (record.a2aTaskId === undefined && typeof taskId === "string" && taskId !== "") record.a2aTaskId = taskId.slice(0, 256);
    if (record.contextId === undefined && typeof inner.contextId === "string" && inner.contextId !== "") record.contextId = inner.contextId.slice(0, 256);
  }
}

/**
 * Where a call goes: the agent's JSON-RPC URL in the caller's generation when the agent speaks it,
 * else in the agent's own, with the request bridged to it (refused, typed, when that generation
 * cannot express it). A card with no generation the gateway speaks cannot be read into a view, so
 * there is always one.
 */
function routeOf(agent: string, card: AgentCardView, req: A2aRequest): AgentRoute {
  const generation = agentGenerationFor(card, req.generation);
  const url = generation === undefined ? undefined : card.jsonRpc[generation];
  // A card read into a view names a JSON-RPC interface of a generation the gateway speaks.
  if (generation === undefined || url === undefined) throw new Error(`agent ${agent}'s card view names no JSON-RPC interface`);
  const request = bridgeRequest({ jsonrpc: "2.0", id: req.id, method: req.method, params: req.params }, req.generation, generation);
  return { url, generation, request };
}
