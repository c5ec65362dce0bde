import type { AdmissionController, AdmissionLease } from "../admit/admission.ts";
import { authenticate } from "../auth/authenticate.ts";
import { authorize } from "../auth/authorize.ts";
import type { CallBudget } from "../call-budget/attempt-budget-client.ts";
import type { RequestContext } from "../context/request-context.ts";
import { CONTENT_MARGIN } from "../context/request-record.ts";
import { planRequest } from "../decide/decide.ts";
import type { DispatchPlan } from "../decide/dispatch-plan.ts";
import type { Clock } from "../deps/clock.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { Execution, GatewayExecutor } from "../invoker/executor.ts";
import type { StreamEventChain } from "../plugins/stream-event-chain.ts";
import type { CodecRegistry, ResponseStamp } from "../protocol/codec.ts";
import { textOf } from "../protocol/content-parts.ts";
import type { NeutralRequest } from "../protocol/neutral.ts";
import type { CompiledEntrypoint, CompiledPublication } from "../publication/compile-publication.ts";
import type { Principal } from "../publication/principal.ts";
import { prepareCharges, type RequestCharges, type ReserveDeps } from "../reserve/reserve-phase.ts";
import { taskFigures } from "../reserve/task-scope.ts";
import { respond } from "../respond/respond.ts";
import type { SignalSet } from "../signals/signal-set.ts";
import type { Subject } from "../signals/subject.ts";
import type { PinnedSnapshot } from "../snapshot/pinned-snapshot.ts";
import type { BreakerCache } from "../traffic/breaker-cache.ts";
import type { HealthCache } from "../traffic/health-cache.ts";
import type { Ingress, Reply, ReplyMeta, SubcallRequest } from "./model-api.ts";
import type { AdmissionKey, Early, KindTurn, Responded } from "./traffic-kind.ts";

/** What the model kind's hooks use, built once per isolate. */
export interface ModelKindDeps {
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
  readonly sub: SubcallRequest;
  /** The parent's per-request task cap: a sub-call spends from the same task. */
  readonly taskBudget: string | undefined;
}

/**
 * A model call through the phases: an API request from the HTTP adapter (`ingress`), or a
 * sub-call made inside another request (`inherited`: the parent's principal, trusted headers,
 * call budget, pinned snapshot and task, and a buffered answer in neutral form).
 */
export class ModelTurn implements KindTurn<Reply> {
  readonly kind = "model";
  readonly #deps: ModelKindDeps;
  readonly #ctx: RequestContext;
  readonly #ingress: Ingress | undefined;
  readonly #inherited: Inherited | undefined;
  readonly #trusted: ReadonlyMap<string, string>;
  readonly #pin: () => Promise<PinnedSnapshot>;
  #principal: Principal | undefined;
  #request: NeutralRequest | undefined;
  #entrypoint: CompiledEntrypoint | undefined;
  #plan: DispatchPlan | undefined;
  #call: CallBudget | undefined;
  /** The request's charging, once the reserve phase has run (the reply's budget facts come from it). */
  #charges: RequestCharges | undefined;
  #execution: Extract<Execution, { ok: true }> | undefined;
  /** The client protocol's names of the fields dropped under declared downgrades. */
  #downgraded: readonly string[] = [];

  constructor(deps: ModelKindDeps, ctx: RequestContext, from: { readonly ingress: Ingress } | { readonly inherited: Inherited }, pin: () => Promise<PinnedSnapshot>) {
    this.#deps = deps;
    this.#ctx = ctx;
    this.#ingress = "ingress" in from ? from.ingress : undefined;
    this.#inherited = "inherited" in from ? from.inherited : undefined;
    this.#trusted = this.#ingress?.trustedHeaders ?? this.#inherited?.trusted ?? new Map();
    this.#pin = pin;
    ctx.record.protocol = this.#ingress?.protocol;
  }

  /** Whether the decide phase made a plan (a sub-call needs a prepared parent). */
  get prepared(): boolean {
    return this.#plan !== undefined;
  }

  /** The plan and the request as decided (for the adapter's dispatch action). */
  get decided(): { readonly plan: DispatchPlan; readonly request: NeutralRequest } {
    return { plan: this.#plan!, request: this.#request! };
  }

  /** What a sub-call made on this request's behalf inherits from it (valid once the request is prepared). */
  inheritance(sub: SubcallRequest, snapshot: () => Promise<PinnedSnapshot>): Inherited {
    return { principal: this.#principal!, trusted: this.#trusted, call: this.#call ?? this.#inherited?.call, snapshot, sub, taskBudget: this.#ingress?.taskBudget ?? this.#inherited?.taskBudget };
  }

  async authenticate(): Promise<Principal> {
    this.#principal = this.#inherited?.principal ?? (await authenticate(this.#deps.publication, this.#ingress?.apiKey));
    return this.#principal;
  }

  async decode(): Promise<Early<Reply> | undefined> {
    const ctx = this.#ctx;
    let request: NeutralRequest;
    if (this.#inherited) {
      const inherited = this.#inherited;
      request = { ...inherited.sub.request, model: inherited.sub.model, stream: false, streamUsage: false };
      ctx.record.attribution = ctx.parent?.record.attribution;
      ctx.record.workload = ctx.parent?.record.workload;
    } else {
      const ingress = this.#ingress!;
      const codec = this.#deps.codecs.get(ingress.protocol);
      if (!codec) throw new GatewayError("not_found", `Protocol '${ingress.protocol}' is not served.`);
      const body = await ingress.readBody();
      ctx.checkpoint();
      request = codec.decodeRequest(body);
      const call = ingress.call;
      if (call && "error" in call) throw new GatewayError("invalid_request", call.error);
      this.#call = call;
      ctx.record.callId = call?.callId;
      const attribution = ingress.attribution;
      if (attribution && "error" in attribution) throw attribution.error;
      ctx.record.attribution = attribution;
      ctx.record.workload = ingress.workload;
    }
    ctx.record.stream = request.stream;
    this.#request = request;
    return undefined;
  }

  async authorize(): Promise<Early<Reply> | undefined> {
    const ctx = this.#ctx;
    const request = this.#request!;
    const ep = authorize(this.#deps.publication, this.#principal!, request.model);
    this.#entrypoint = ep;
    ctx.record.entrypoint = ep.name;
    const contentLog = ep.contentLog;
    if (contentLog && contentLog.sampleRatio > 0 && (this.#deps.random ?? Math.random)() < contentLog.sampleRatio) {
      // Kept short from the start: a sampled request never holds more than the line will show.
      const prompt = request.messages.map((m) => `${m.role}: ${textOf(m.content)}`).join("\n");
      ctx.record.content = { prompt: prompt.slice(0, contentLog.maxChars + CONTENT_MARGIN), completion: "", maxChars: contentLog.maxChars, redact: contentLog.redact };
    }
    return undefined;
  }

  subject(): Subject | undefined {
    return this.#request === undefined ? undefined : { kind: "model", request: this.#request };
  }

  async decide(signals: SignalSet): Promise<Early<Reply> | undefined> {
    const ctx = this.#ctx;
    const plan = planRequest(this.#deps.publication, this.#entrypoint!, this.#request!, {
      requestId: ctx.requestId,
      receivedAt: ctx.receivedAt,
      now: this.#deps.clock.now(),
      clientProtocol: this.#ingress?.protocol ?? "openai-chat",
      trustedHeaders: this.#trusted,
      requestDeadlineMs: this.#deps.requestDeadlineMs,
      callerDeadlineAt: Math.min(this.#call?.deadlineAt ?? Number.POSITIVE_INFINITY, ctx.parent?.deadlineAt ?? Number.POSITIVE_INFINITY),
      signals,
    });
    this.#plan = plan;
    ctx.record.route = plan.route;
    ctx.setDeadline(plan.deadlineAt);
    return undefined;
  }

  amend(subject: Subject): void {
    if (subject.kind === "model") this.#request = subject.request;
  }

  async reserve(): Promise<void> {
    const deps = this.#deps;
    this.#charges = await prepareCharges(
      deps.reserve,
      deps.publication,
      this.#entrypoint!,
      this.#ctx,
      this.#principal!,
      this.#request!,
      this.#trusted,
      this.#call ?? this.#inherited?.call,
      this.#ingress?.taskBudget ?? this.#inherited?.taskBudget,
    );
  }

  admission(): AdmissionKey {
    return { tenant: this.#principal!.tenantId, model: this.#plan!.entrypoint };
  }

  async invoke(lease: AdmissionLease): Promise<void> {
    const deps = this.#deps;
    const ctx = this.#ctx;
    const charges = this.#charges!;
    // On the snapshot the request pins for its whole life (sub-calls share it).
    const snapshot = await this.#pin();
    ctx.checkpoint();
    const execution = await deps.invoker.execute(this.#plan!, charges.request, {
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
    });
    if (!execution.ok) throw execution.error;
    this.#execution = execution;
  }

  respond(events: StreamEventChain | undefined): Responded<Reply> {
    const deps = this.#deps;
    const ctx = this.#ctx;
    const execution = this.#execution!;
    const codec = this.#ingress ? deps.codecs.get(this.#ingress.protocol)! : undefined;
    this.#downgraded = execution.downgraded.map((f) => codec?.paramName(f) ?? f);
    const stamp: ResponseStamp = { id: ctx.requestId.slice(4), created: Math.floor(ctx.receivedAt / 1000), model: this.#plan!.entrypoint };
    const answer = respond(execution, codec, stamp, this.#charges!.request, deps, events);
    const meta = this.#replyMeta(execution.headers);
    if (answer.kind === "stream") return { reply: { kind: "stream", body: answer.body, meta }, streaming: true };
    const content = ctx.record.content;
    if (content) content.completion = answer.response.text.slice(0, content.maxChars + CONTENT_MARGIN);
    return { reply: { kind: "buffered", response: answer.response, body: answer.body, meta }, streaming: false };
  }

  failed(error: GatewayError): Reply {
    return { kind: "error", error, meta: this.#replyMeta() };
  }

  /** `upstreamHeaders`: only a successful answer carries any; an error is the gateway's own. */
  #replyMeta(upstreamHeaders: Readonly<Record<string, string>> = {}): ReplyMeta {
    const charges = this.#charges;
    const billing = charges?.billing;
    return {
      requestId: this.#ctx.requestId,
      attempts: this.#ctx.attempts.map((a) => a.id),
      downgraded: this.#downgraded,
      injectedMaxOutputTokens: charges?.injectedCap,
      callId: this.#call?.callId,
      budgetUnchecked: billing?.unchecked ?? false,
      budgetRemaining: charges?.budget?.exposeBudget ? billing?.lastGrant?.remaining : undefined,
      task: taskFigures(charges?.task, billing?.lastGrant?.remaining),
      upstreamHeaders,
    };
  }
}
