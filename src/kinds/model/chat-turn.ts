import type { AdmissionLease } from "../../admit/admission.ts";
import type { RequestContext } from "../../context/request-context.ts";
import { CONTENT_MARGIN } from "../../context/request-record.ts";
import { decideChat, decideTier } from "../../decide/decide.ts";
import type { AlgorithmConfig } from "../../config/algorithm-schema.ts";
import type { DispatchPlan } from "../../decide/dispatch-plan.ts";
import { GatewayError } from "../../errors/gateway-error.ts";
import type { Execution } from "../../invoker/executor.ts";
import type { StreamEventChain } from "../../plugins/stream-event-chain.ts";
import { looperHeader, runLooper, type LooperOutcome } from "../../looper/run-looper.ts";
import type { StepPort } from "../../looper/bounded-steps.ts";
import type { Scheduler } from "../../deps/scheduler.ts";
import { replayStream } from "../../respond/replay-stream.ts";
import type { NeutralRequest, NeutralResponse } from "../../protocol/neutral.ts";
import type { RequestFacts } from "../../plugins/plugin.ts";
import type { CompiledEntrypoint } from "../../publication/compile-publication.ts";
import type { Principal } from "../../publication/principal.ts";
import { chatSizing, prepareCharges, type RequestCharges } from "../../reserve/reserve-phase.ts";
import { respond } from "../../respond/respond.ts";
import type { SignalSet } from "../../signals/signal-set.ts";
import type { Subject } from "../../signals/subject.ts";
import type { PinnedSnapshot } from "../../snapshot/pinned-snapshot.ts";
import type { AdmissionKey, Early, KindTurn, Responded } from "../traffic-kind.ts";
import type { Ingress, Reply, SubcallRequest } from "./model-api.ts";
import { ModelCaller, type ExplainOrigin, type Inherited, type ModelKindDeps } from "./model-caller.ts";

/**
 * A chat request through the phases (the model kind's chat operation): an API request from the
 * HTTP adapter, or a sub-call made inside another request (buffered, in neutral form).
 */
export class ChatTurn implements KindTurn<Reply> {
  readonly kind = "model";
  readonly #caller: ModelCaller;
  readonly #sub: SubcallRequest | undefined;
  #request: NeutralRequest | undefined;
  #entrypoint: CompiledEntrypoint | undefined;
  #plan: DispatchPlan | undefined;
  /** The decision that chose the plan (undefined: the entrypoint's default). */
  #decision: string | undefined;
  #decisionPlugins: readonly string[] = [];
  /** Headers a `headers` plugin set for the backend. */
  #upstreamHeaders: Readonly<Record<string, string>> | undefined;
  /** The request's charging, once the reserve phase has run (the reply's budget facts come from it). */
  #charges: RequestCharges | undefined;
  #execution: Extract<Execution, { ok: true }> | undefined;
  /** The client protocol's names of the fields dropped under declared downgrades. */
  #downgraded: readonly string[] = [];
  /** The decision's Looper algorithm, when it has one (a client's request only: a step runs none). */
  #algorithm: AlgorithmConfig | undefined;
  /** How the engine makes this request's sub-calls (its session's ModelExecutor), and its timers. */
  readonly #steps: { readonly port: StepPort; readonly scheduler: Scheduler } | undefined;
  #looper: LooperOutcome | undefined;

  constructor(
    deps: ModelKindDeps,
    ctx: RequestContext,
    from: { readonly ingress: Ingress; readonly explain?: ExplainOrigin | undefined } | { readonly inherited: Inherited; readonly sub: SubcallRequest },
    pin: () => Promise<PinnedSnapshot>,
    steps?: { readonly port: StepPort; readonly scheduler: Scheduler },
  ) {
    this.#caller = new ModelCaller(deps, ctx, from, pin);
    this.#sub = "sub" in from ? from.sub : undefined;
    this.#steps = steps;
  }

  /** Who the request is for: what sub-calls made on its behalf inherit. */
  get caller(): ModelCaller {
    return this.#caller;
  }

  /** Whether the decide phase made a plan (a sub-call needs a prepared parent). */
  get prepared(): boolean {
    return this.#plan !== undefined;
  }

  /** The entrypoint the request names, once authorized. */
  get entrypoint(): CompiledEntrypoint | undefined {
    return this.#entrypoint;
  }

  /** The plan and the request as decided (for the adapter's dispatch action). */
  get decided(): { readonly plan: DispatchPlan; readonly request: NeutralRequest } {
    return { plan: this.#plan!, request: this.#request! };
  }

  authenticate(): Promise<Principal> {
    return this.#caller.authenticate();
  }

  async decode(): Promise<Early<Reply> | undefined> {
    const caller = this.#caller;
    const body = await caller.readIngress();
    let request: NeutralRequest;
    if (this.#sub) request = { ...this.#sub.request, model: this.#sub.model, stream: false, streamUsage: false };
    else {
      const protocol = caller.ingress!.protocol;
      const codec = caller.deps.codecs.get(protocol);
      if (!codec) throw new GatewayError("not_found", `Protocol '${protocol}' is not served.`);
      request = codec.decodeRequest(body);
    }
    caller.ctx.record.stream = request.stream;
    this.#request = request;
    return undefined;
  }

  async authorize(): Promise<Early<Reply> | undefined> {
    const request = this.#request!;
    this.#entrypoint = this.#caller.authorizeChat(request);
    return undefined;
  }

  subject(): Subject | undefined {
    return this.#request === undefined ? undefined : { kind: "model", request: this.#request, headers: this.#upstreamHeaders };
  }

  trusted(): ReadonlyMap<string, string> {
    return this.#caller.trusted;
  }

  async decide(signals: SignalSet): Promise<Early<Reply> | undefined> {
    const { ctx, deps } = this.#caller;
    const tier = this.#sub?.tier;
    if (tier !== undefined) {
      // A Looper step: its parent's decision chose; the step plans the tier it was given.
      const stepped = decideTier(deps.publication, this.#entrypoint!, this.#request!, this.#caller.decisionInput(), tier, ctx.parent?.record.route ?? "default");
      this.#plan = stepped.plan;
      ctx.record.route = stepped.plan.route;
      ctx.record.decision = stepped.record;
      ctx.setDeadline(stepped.plan.deadlineAt);
      return undefined;
    }
    const deciding = decideChat(deps.publication, this.#entrypoint!, this.#request!, this.#caller.decisionInput(), signals);
    // Local signals decide synchronously: awaiting a plain value would still cost a suspension.
    const decided = deciding instanceof Promise ? await deciding : deciding;
    this.#plan = decided.plan;
    this.#decision = decided.decision?.name;
    this.#decisionPlugins = decided.decision?.plugins ?? [];
    this.#algorithm = this.#sub === undefined ? decided.decision?.algorithm : undefined;
    ctx.record.route = decided.plan.route;
    ctx.record.decision = decided.record;
    ctx.setDeadline(decided.plan.deadlineAt);
    return undefined;
  }

  plugins(): { readonly names: readonly string[]; readonly decision: string | undefined } {
    // A Looper step runs only its algorithm's per-model-call plugins: the entrypoint's and the
    // decision's ran once, on the request the steps are made from.
    if (this.#sub?.tier !== undefined) return { names: this.#sub.plugins ?? [], decision: undefined };
    const own = this.#entrypoint?.plugins ?? [];
    return { names: this.#decisionPlugins.length === 0 ? own : [...own, ...this.#decisionPlugins], decision: this.#decision };
  }

  amend(subject: Subject): void {
    if (subject.kind !== "model") return;
    this.#request = subject.request;
    this.#upstreamHeaders = subject.headers;
  }

  async reserve(): Promise<void> {
    const caller = this.#caller;
    const ep = this.#entrypoint!;
    this.#charges = await prepareCharges(
      caller.deps.reserve,
      caller.deps.publication,
      ep,
      caller.ctx,
      caller.principal!,
      () => {
        // A budgeted request is sent with an output cap (injected when it had none).
        const sized = chatSizing(this.#request!, ep);
        this.#request = sized.request;
        return sized.sizing;
      },
      caller.trusted,
      caller.callBudget,
      caller.taskBudget,
    );
  }

  admission(): AdmissionKey | undefined {
    // An algorithm's work is its sub-calls, each admitted on its own: holding a lease for the
    // parent too would let parents fill every slot while their steps wait behind them.
    if (this.#algorithm !== undefined) return undefined;
    return { tenant: this.#caller.principal!.tenantId, model: this.#plan!.entrypoint };
  }

  async invoke(lease: AdmissionLease | undefined): Promise<void> {
    const caller = this.#caller;
    if (this.#algorithm !== undefined) {
      this.#looper = await runLooper(this.#algorithm, this.#plan!, this.#request!, {
        ctx: caller.ctx,
        publication: caller.deps.publication,
        scheduler: this.#steps!.scheduler,
        steps: this.#steps!.port,
      });
      this.#execution = { ok: true, kind: "buffered", response: this.#looper.response, downgraded: [], headers: {} };
      return;
    }
    if (lease === undefined) throw new Error("unreachable: a request without an algorithm holds an admission lease");
    const execution = await caller.deps.invoker.execute(this.#plan!, this.#request!, { ...(await caller.invocation(this.#charges!, lease)), upstreamHeaders: this.#upstreamHeaders });
    if (!execution.ok) throw execution.error;
    this.#execution = execution;
  }

  respond(events: StreamEventChain | undefined): Responded<Reply> {
    const { deps, ctx, ingress } = this.#caller;
    const execution = this.#execution!;
    const codec = ingress ? deps.codecs.get(ingress.protocol)! : undefined;
    this.#downgraded = execution.downgraded.map((f) => codec?.paramName(f) ?? f);
    const looper = this.#looper;
    const meta = { ...this.#caller.replyMeta(this.#charges, this.#downgraded, execution.headers), decision: this.#plan!.route, looper: looper?.header };
    if (looper !== undefined && codec !== undefined && this.#request!.stream && execution.kind === "buffered") {
      // The steps were buffered; a streaming client gets the accepted answer as a stream in its own
      // protocol, complete in memory, so the request ends here like a buffered one.
      const response = events ? events.filterResponse(execution.response) : execution.response;
      const body = replayStream(response, codec.createStreamEncoder(this.#caller.stamp(this.#plan!.entrypoint), this.#request!));
      const content = ctx.record.content;
      if (content) content.completion = response.text.slice(0, content.maxChars + CONTENT_MARGIN);
      return { reply: { kind: "stream", body, meta }, streaming: false };
    }
    const answer = respond(execution, codec, this.#caller.stamp(this.#plan!.entrypoint), this.#request!, deps, events);
    if (answer.kind === "stream") {
      // Sent, and nothing after this reads it (the settlement's estimate, the cache key and the
      // sampled content were taken before): a stream is held for as long as the provider talks,
      // and the prompt need not be held with it.
      this.#request = undefined;
      return { reply: { kind: "stream", body: answer.body, meta }, streaming: true };
    }
    const content = ctx.record.content;
    if (content) content.completion = answer.response.text.slice(0, content.maxChars + CONTENT_MARGIN);
    return { reply: { kind: "buffered", response: answer.response, body: answer.body, meta }, streaming: false };
  }

  facts(): RequestFacts | undefined {
    const plan = this.#plan;
    if (plan === undefined) return undefined;
    return {
      entrypoint: plan.entrypoint,
      models: plan.tiers.map((tier) => tier.map((m) => `${m.logicalModel}@${m.revision}`).join(",")).join("|"),
      trustedHeaders: this.#caller.trusted,
      // A sub-call has no client headers: the cache does what its plugin says.
      cache: this.#caller.ingress?.cacheDirectives ?? { lookup: true, store: true },
    };
  }

  answer(response: NeutralResponse, events: StreamEventChain | undefined): Responded<Reply> {
    const { deps, ctx, ingress } = this.#caller;
    const codec = ingress ? deps.codecs.get(ingress.protocol)! : undefined;
    const stamp = this.#caller.stamp(this.#plan!.entrypoint);
    const answer = events ? events.filterResponse(response) : response;
    const meta = { ...this.#caller.replyMeta(undefined, []), decision: this.#plan!.route, cache: "hit" as const };
    const content = ctx.record.content;
    if (content) content.completion = answer.text.slice(0, content.maxChars + CONTENT_MARGIN);
    // The whole stream is in hand: the request ends here, not with the client's read of it.
    if (this.#request!.stream && codec) return { reply: { kind: "stream", body: replayStream(answer, codec.createStreamEncoder(stamp, this.#request!)), meta }, streaming: false };
    return { reply: { kind: "buffered", response: answer, body: codec ? codec.encodeResponse(answer, stamp) : answer, meta }, streaming: false };
  }

  failed(error: GatewayError): Reply {
    return { kind: "error", error, meta: { ...this.#caller.replyMeta(this.#charges, this.#downgraded), decision: this.#plan?.route, looper: this.#caller.ctx.record.looper === undefined ? undefined : looperHeader(this.#caller.ctx.record.looper) } };
  }
}
