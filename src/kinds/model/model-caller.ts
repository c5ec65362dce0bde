import type { AdmissionController, AdmissionLease } from "../../admit/admission.ts";
import { assertedPrincipal, type AssertedCaller } from "../../auth/asserted-principal.ts";
import { authenticateCaller, type AuthenticatorDeps } from "../../auth/authenticator-chain.ts";
import { authorize } from "../../auth/authorize.ts";
import type { CallBudget } from "../../call-budget/attempt-budget-client.ts";
import type { RequestContext } from "../../context/request-context.ts";
import { CONTENT_MARGIN } from "../../context/request-record.ts";
import type { Clock } from "../../deps/clock.ts";
import { GatewayError } from "../../errors/gateway-error.ts";
import type { GatewayExecutor, InvocationContext } from "../../invoker/executor.ts";
import type { CodecRegistry, ResponseStamp } from "../../protocol/codec.ts";
import { textOf } from "../../protocol/content-parts.ts";
import type { NeutralRequest } from "../../protocol/neutral.ts";
import type { DecisionInput } from "../../decide/decide.ts";
import type { CompiledEntrypoint, CompiledPublication, ModelOperation } from "../../publication/compile-publication.ts";
import type { Principal } from "../../publication/principal.ts";
import type { RequestCharges, ReserveDeps } from "../../reserve/reserve-phase.ts";
import { taskFigures } from "../../reserve/task-scope.ts";
import type { PinnedSnapshot } from "../../snapshot/pinned-snapshot.ts";
import type { BreakerCache } from "../../traffic/breaker-cache.ts";
import type { HealthCache } from "../../traffic/health-cache.ts";
import type { Ingress, ReplyMeta } from "./model-api.ts";

/** What the model kind's hooks use, built once per isolate. */
export interface ModelKindDeps extends AuthenticatorDeps {
  readonly publication: CompiledPublication;
  readonly codecs: CodecRegistry;
  readonly clock: Clock;
  readonly requestDeadlineMs: number;
  readonly streamTimeouts: { readonly firstTokenMs: number; readonly idleMs: number };
  readonly admission: AdmissionController;
  readonly invoker: GatewayExecutor;
  readonly reserve: ReserveDeps;
  readonly breakers: BreakerCache | undefined;
  readonly health: HealthCache | undefined;
  /** A uniform draw in [0, 1) for content-log sampling; `Math.random` when absent. */
  readonly random?: (() => number) | undefined;
}

/** What a sub-call takes from the request it runs inside. */
export interface Inherited {
  readonly principal: Principal;
  readonly trusted: ReadonlyMap<string, string>;
  readonly call: CallBudget | undefined;
  /** The parent's pinned snapshot (sub-calls share it). */
  readonly snapshot: () => Promise<PinnedSnapshot>;
  /** The parent's per-request task cap: a sub-call spends from the same task. */
  readonly taskBudget: string | undefined;
  /**
   * The gateway's own call for the request (a signal's embedding or moderation): its model is the publication's
   * choice, so the caller's key needs no grant of it; it is charged to the caller all the same.
   */
  readonly internal?: boolean | undefined;
  /**
   * Made for an explain (its signal's embedding): the operator's question, not the caller's
   * traffic, so it is sent without a reservation against the caller's budgets, and its content
   * is never sampled.
   */
  readonly unbilled?: boolean | undefined;
}

/** An explain's ingress facts: whom the operator asks about, instead of a presented key. */
export interface ExplainOrigin {
  readonly as: AssertedCaller;
}

/**
 * Who a model request is for and what it carries besides its body, shared by every model
 * operation (chat, embeddings, moderations): an API request from the HTTP adapter, or a sub-call that inherits
 * its parent's principal, trusted headers, call budget, pinned snapshot and task.
 */
export class ModelCaller {
  readonly deps: ModelKindDeps;
  readonly ctx: RequestContext;
  readonly ingress: Ingress | undefined;
  readonly inherited: Inherited | undefined;
  readonly trusted: ReadonlyMap<string, string>;
  readonly pin: () => Promise<PinnedSnapshot>;
  /** An explain's: whom the operator asks about (the request is decided, never sent). */
  readonly explain: ExplainOrigin | undefined;
  principal: Principal | undefined;
  call: CallBudget | undefined;
  /** An explain for a tenant alone: no key, so no grant to check. */
  #anyEntrypoint = false;

  constructor(deps: ModelKindDeps, ctx: RequestContext, from: { readonly ingress: Ingress; readonly explain?: ExplainOrigin | undefined } | { readonly inherited: Inherited }, pin: () => Promise<PinnedSnapshot>) {
    this.deps = deps;
    this.ctx = ctx;
    this.ingress = "ingress" in from ? from.ingress : undefined;
    this.explain = "ingress" in from ? from.explain : undefined;
    this.inherited = "inherited" in from ? from.inherited : undefined;
    this.trusted = this.ingress?.trustedHeaders ?? this.inherited?.trusted ?? new Map();
    this.pin = pin;
    ctx.record.protocol = this.ingress?.protocol;
  }

  /** Phase 1: the parent's principal for a sub-call, the operator's assertion for an explain, else the presented credential's (an API key or an access token). */
  async authenticate(): Promise<Principal> {
    if (this.explain) {
      const asserted = assertedPrincipal(this.deps.publication, this.explain.as);
      this.#anyEntrypoint = asserted.anyEntrypoint;
      this.principal = asserted.principal;
      return asserted.principal;
    }
    this.principal = this.inherited?.principal ?? (await authenticateCaller(this.deps, { apiKey: this.ingress?.apiKey, bearer: this.ingress?.bearer }, "model"));
    return this.principal;
  }

  /** An explain, or a sub-request made for one: never billed, never sampled. */
  get explaining(): boolean {
    return this.explain !== undefined || this.inherited?.unbilled === true;
  }

  /**
   * The body, read only now (after authentication), and what the transport carried with it: the
   * call budget, the attribution and the workload. A sub-call has no body and carries its parent's.
   */
  async readIngress(): Promise<unknown> {
    const ctx = this.ctx;
    if (this.inherited) {
      ctx.record.attribution = ctx.parent?.record.attribution;
      ctx.record.workload = ctx.parent?.record.workload;
      return undefined;
    }
    const ingress = this.ingress!;
    const body = await ingress.readBody();
    ctx.checkpoint();
    const call = ingress.call;
    if (call && "error" in call) throw new GatewayError("invalid_request", call.error);
    this.call = call;
    ctx.record.callId = call?.callId;
    const attribution = ingress.attribution;
    if (attribution && "error" in attribution) throw attribution.error;
    ctx.record.attribution = attribution;
    ctx.record.workload = ingress.workload;
    return body;
  }

  /**
   * Phase 3: the entrypoint the request names, for its operation (the key's grant, unless the
   * call is the gateway's own), recorded; and the request's content sampled when its policy says so.
   */
  authorize(model: string, operation: ModelOperation, prompt: () => string): CompiledEntrypoint {
    const ep = authorize(this.deps.publication, this.principal!, model, operation, this.inherited?.internal === true || this.#anyEntrypoint);
    this.ctx.record.entrypoint = ep.name;
    // An explain keeps no content anywhere.
    if (!this.explaining) this.#sampleContent(ep, prompt);
    return ep;
  }

  /**
   * Authorizes a chat, or what is judged as one (a token count is of a chat): the entrypoint must
   * serve chat and the key be granted it; the conversation is what the content log samples.
   */
  authorizeChat(request: NeutralRequest): CompiledEntrypoint {
    return this.authorize(request.model, "chat", () => request.messages.map((m) => `${m.role}: ${textOf(m.content)}`).join("\n"));
  }

  /** What the decide phase reads besides the request: ids, times, the client's protocol, trusted headers, deadlines. */
  decisionInput(): DecisionInput {
    const { ctx, deps } = this;
    return {
      requestId: ctx.requestId,
      receivedAt: ctx.receivedAt,
      now: deps.clock.now(),
      clock: () => deps.clock.now(),
      clientProtocol: this.ingress?.protocol ?? "openai-chat",
      trustedHeaders: this.trusted,
      requestDeadlineMs: deps.requestDeadlineMs,
      callerDeadlineAt: this.callerDeadlineAt,
    };
  }

  /** Samples the request's content for the content log, when the entrypoint's policy says so. */
  #sampleContent(ep: CompiledEntrypoint, prompt: () => string): void {
    const contentLog = ep.contentLog;
    if (contentLog && contentLog.sampleRatio > 0 && (this.deps.random ?? Math.random)() < contentLog.sampleRatio) {
      // Kept short from the start: a sampled request never holds more than the line will show.
      this.ctx.record.content = { prompt: prompt().slice(0, contentLog.maxChars + CONTENT_MARGIN), completion: "", maxChars: contentLog.maxChars, redact: contentLog.redact };
    }
  }

  /** The caller's deadline: its call budget's, and its parent's for a sub-call (only ever earlier). */
  get callerDeadlineAt(): number {
    return Math.min(this.call?.deadlineAt ?? Number.POSITIVE_INFINITY, this.ctx.parent?.deadlineAt ?? Number.POSITIVE_INFINITY);
  }

  /** The call budget its attempts spend from, and the task cap it reserves against. */
  get callBudget(): CallBudget | undefined {
    return this.call ?? this.inherited?.call;
  }

  get taskBudget(): string | undefined {
    return this.ingress?.taskBudget ?? this.inherited?.taskBudget;
  }

  /** What the gateway writes on the answer instead of the provider's identifiers, for the public `model`. */
  stamp(model: string): ResponseStamp {
    return { id: this.ctx.requestId.slice(4), created: Math.floor(this.ctx.receivedAt / 1000), model };
  }

  /** What a sub-call made on this request's behalf inherits from it. */
  inheritance(snapshot: () => Promise<PinnedSnapshot>, internal: boolean): Inherited {
    return { principal: this.principal!, trusted: this.trusted, call: this.callBudget, snapshot, taskBudget: this.taskBudget, internal, unbilled: this.explaining };
  }

  /** Phase 7's surroundings: the pinned snapshot, breakers, health, call budget, backend slots and charger. */
  async invocation(charges: RequestCharges, lease: AdmissionLease): Promise<InvocationContext> {
    const { deps, ctx } = this;
    // On the snapshot the request pins for its whole life (sub-calls share it).
    const snapshot = await this.pin();
    ctx.checkpoint();
    return {
      request: ctx,
      snapshot,
      breakers: deps.breakers?.forRequest(ctx.waitUntil),
      health: deps.health?.forRequest(ctx.waitUntil),
      callBudget: charges.callBudget,
      backendSlots: {
        // The slot this request already holds counts as room: a retry may go back to it.
        hasRoom: (id) => lease.backend === id || deps.admission.hasBackendRoom(id),
        acquire: (id) => !lease.released && lease.acquireBackend(id).ok,
      },
      charges: charges.billing,
    };
  }

  /** What the client is told besides the answer; `upstreamHeaders` only on a success (an error is the gateway's own). */
  replyMeta(charges: RequestCharges | undefined, downgraded: readonly string[], upstreamHeaders: Readonly<Record<string, string>> = {}): ReplyMeta {
    const billing = charges?.billing;
    return {
      requestId: this.ctx.requestId,
      attempts: this.ctx.attempts.map((a) => a.id),
      downgraded,
      injectedMaxOutputTokens: charges?.injectedCap,
      callId: this.call?.callId,
      budgetUnchecked: billing?.unchecked ?? false,
      budgetRemaining: charges?.budget?.exposeBudget ? billing?.lastGrant?.remaining : undefined,
      task: taskFigures(charges?.task, billing?.lastGrant?.remaining),
      upstreamHeaders,
    };
  }
}
