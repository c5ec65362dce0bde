import { admitRequest } from "../admit/admit-phase.ts";
import { authenticate } from "../auth/authenticate.ts";
import { authorize } from "../auth/authorize.ts";
import type { CallBudget } from "../call-budget/attempt-budget-client.ts";
import { CONTENT_MARGIN, RequestContext, type AbortReason } from "../context/request-context.ts";
import { requestTrace } from "../context/trace-context.ts";
import { planRequest } from "../decide/decide.ts";
import { GatewayError, toGatewayError } from "../errors/gateway-error.ts";
import type { ResponseStamp } from "../protocol/codec.ts";
import { textOf } from "../protocol/content-parts.ts";
import type { NeutralRequest } from "../protocol/neutral.ts";
import type { CompiledEntrypoint } from "../publication/compile-publication.ts";
import type { Principal } from "../publication/principal.ts";
import { prepareCharges, type RequestCharges } from "../reserve/reserve-phase.ts";
import { taskFigures } from "../reserve/task-scope.ts";
import { respond } from "../respond/respond.ts";
import type { PinnedSnapshot } from "../snapshot/pinned-snapshot.ts";
import type { EngineDeps } from "./engine-deps.ts";
import type { Action, DispatchAction, Ingress, ModelExecutor, Reply, ReplyMeta, Session, SubcallRequest, SubcallResult } from "./session-api.ts";

/** What a sub-call's session takes from its parent. */
interface Inherited {
  readonly parent: RequestContext;
  readonly principal: Principal;
  readonly trusted: ReadonlyMap<string, string>;
  readonly call: CallBudget | undefined;
  readonly snapshot: () => Promise<PinnedSnapshot>;
  readonly sub: SubcallRequest;
  /** The parent's per-request task cap: a sub-call spends from the same task. */
  readonly taskBudget: string | undefined;
}

/** One request's session: runs the phases in order on its own request context. */
export class RequestSession implements Session {
  readonly requestId: string;
  readonly models: ModelExecutor;
  readonly #deps: EngineDeps;
  readonly #ingress: Ingress | undefined;
  readonly #inherited: Inherited | undefined;
  readonly #ctx: RequestContext;
  readonly #trusted: ReadonlyMap<string, string>;
  #principal: Principal | undefined;
  #entrypoint: CompiledEntrypoint | undefined;
  #prepared: DispatchAction | undefined;
  #call: CallBudget | undefined;
  #snapshot: Promise<PinnedSnapshot> | undefined;
  /** The request's charging, once the reserve phase has run (the reply's budget facts come from it). */
  #charges: RequestCharges | undefined;
  /** The client protocol's names of the fields dropped under declared downgrades. */
  #downgraded: readonly string[] = [];

  constructor(deps: EngineDeps, ingress: Ingress | undefined, inherited: Inherited | undefined) {
    this.#deps = deps;
    this.#ingress = ingress;
    this.#inherited = inherited;
    const parentCtx = inherited?.parent;
    this.requestId = ingress?.requestId ?? deps.newRequestId();
    this.#trusted = ingress?.trustedHeaders ?? inherited?.trusted ?? new Map();
    this.#ctx = new RequestContext({
      requestId: this.requestId,
      receivedAt: ingress?.receivedAt ?? deps.clock.now(),
      clock: deps.clock,
      scheduler: deps.scheduler,
      sink: deps.sink,
      waitUntil: ingress?.waitUntil ?? parentCtx!.waitUntil,
      onUndoError: deps.onUndoError,
      parent: parentCtx,
      trace: requestTrace(ingress?.traceParent, deps.tracing?.trustClient ?? false, parentCtx?.record.trace, deps.tracing?.sample ?? (() => false)),
    });
    this.#ctx.record.protocol = ingress?.protocol;
    this.#ctx.record.publicationRevision = deps.publication.revision;
    this.models = { call: (sub) => this.#subcall(sub) };
  }

  abort(reason: AbortReason): void {
    this.#ctx.abort(reason);
  }

  close(): void {
    this.#ctx.finish({ kind: "completed" });
  }

  async prepare(): Promise<Action> {
    const ctx = this.#ctx;
    try {
      ctx.enter("authenticate");
      const principal = this.#inherited?.principal ?? (await authenticate(this.#deps.publication, this.#ingress?.apiKey));
      this.#principal = principal;
      ctx.record.tenant = principal.tenantId;
      ctx.record.key = principal.keyId;
      ctx.record.chargeTo = principal.chargeTo;
      // The body is read only now, after authentication.
      ctx.enter("decode");
      let request: NeutralRequest;
      if (this.#inherited) {
        request = { ...this.#inherited.sub.request, model: this.#inherited.sub.model, stream: false, streamUsage: false };
        ctx.record.attribution = this.#inherited.parent.record.attribution;
        ctx.record.workload = this.#inherited.parent.record.workload;
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
      ctx.enter("authorize");
      const ep = authorize(this.#deps.publication, principal, request.model);
      this.#entrypoint = ep;
      ctx.record.entrypoint = ep.name;
      const contentLog = ep.contentLog;
      if (contentLog && contentLog.sampleRatio > 0 && (this.#deps.random ?? Math.random)() < contentLog.sampleRatio) {
        // Kept short from the start: a sampled request never holds more than the line will show.
        const prompt = request.messages.map((m) => `${m.role}: ${textOf(m.content)}`).join("\n");
        ctx.record.content = { prompt: prompt.slice(0, contentLog.maxChars + CONTENT_MARGIN), completion: "", maxChars: contentLog.maxChars, redact: contentLog.redact };
      }
      ctx.enter("decide");
      const parentDeadline = this.#inherited?.parent.deadlineAt;
      const plan = planRequest(this.#deps.publication, ep, request, {
        requestId: this.requestId,
        receivedAt: ctx.receivedAt,
        now: this.#deps.clock.now(),
        clientProtocol: this.#ingress?.protocol ?? "openai-chat",
        trustedHeaders: this.#trusted,
        requestDeadlineMs: this.#deps.requestDeadlineMs,
        callerDeadlineAt: Math.min(this.#call?.deadlineAt ?? Number.POSITIVE_INFINITY, parentDeadline ?? Number.POSITIVE_INFINITY),
      });
      ctx.record.route = plan.route;
      ctx.setDeadline(plan.deadlineAt);
      this.#prepared = { kind: "dispatch", plan, request };
      return this.#prepared;
    } catch (err) {
      const error = this.#failure(err);
      ctx.finish({ kind: "failed", error });
      return { kind: "immediate", error };
    }
  }

  async dispatch(): Promise<Reply> {
    const ctx = this.#ctx;
    const prepared = this.#prepared;
    const principal = this.#principal;
    const ep = this.#entrypoint;
    if (!prepared || !principal || !ep) throw new Error("dispatch() before a dispatch action from prepare()");
    let handedToStream = false;
    try {
      const deps = this.#deps;
      const { plan } = prepared;
      // The request's charging; each attempt reserves its own worst case.
      ctx.enter("reserve");
      const charges = await prepareCharges(deps.reserve, deps.publication, ep, ctx, principal, prepared.request, this.#trusted, this.#call ?? this.#inherited?.call, this.#ingress?.taskBudget ?? this.#inherited?.taskBudget);
      this.#charges = charges;
      ctx.enter("admit");
      const lease = await admitRequest(ctx, deps.admission, this.#inherited ? undefined : deps.drain, { tenant: principal.tenantId, model: plan.entrypoint });
      // On the snapshot the request pins for its whole life (sub-calls share it).
      ctx.enter("invoke");
      const snapshot = await this.#pinSnapshot();
      ctx.checkpoint();
      const execution = await deps.invoker.execute(plan, charges.request, {
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
      ctx.checkpoint();
      const codec = this.#inherited ? undefined : deps.codecs.get(this.#ingress!.protocol)!;
      this.#downgraded = execution.downgraded.map((f) => codec?.paramName(f) ?? f);
      ctx.enter("respond");
      const stamp: ResponseStamp = { id: this.requestId.slice(4), created: Math.floor(ctx.receivedAt / 1000), model: plan.entrypoint };
      const answer = respond(execution, codec, stamp, charges.request, deps);
      const meta = this.#replyMeta(execution.headers);
      if (answer.kind === "stream") {
        handedToStream = true;
        return { kind: "stream", body: answer.body, meta };
      }
      const content = ctx.record.content;
      if (content) content.completion = answer.response.text.slice(0, content.maxChars + CONTENT_MARGIN);
      ctx.finish({ kind: "completed" });
      return { kind: "buffered", response: answer.response, body: answer.body, meta };
    } catch (err) {
      const error = this.#failure(err);
      const meta = this.#replyMeta();
      ctx.finish({ kind: "failed", error });
      return { kind: "error", error, meta };
    } finally {
      // Belt and braces: no path out of dispatch leaves the request open, except into its stream.
      if (!handedToStream) ctx.finish({ kind: "completed" });
    }
  }

  #pinSnapshot(): Promise<PinnedSnapshot> {
    if (this.#inherited) return this.#inherited.snapshot();
    this.#snapshot ??= this.#deps.snapshot();
    return this.#snapshot;
  }

  /** What the client hears for a failure: the abort's own error once the request was aborted. */
  #failure(err: unknown): GatewayError {
    // A client that left is a cancellation, logged apart so alerts on failures do not fire for
    // clients that hang up; a client's own mistake (4xx) is not logged at all.
    if (!(err instanceof GatewayError)) this.#deps.log({ kind: "request_failed", ...this.#chain(), code: "internal_error", cause: String(err) });
    else if (err.code === "client_closed") this.#deps.log({ kind: "request_cancelled", ...this.#chain(), code: err.code });
    else if (err.source === "internal") this.#deps.log({ kind: "request_failed", ...this.#chain(), code: err.code, cause: String(err.cause) });
    return toGatewayError(err);
  }

  /** The ids an internal failure's log line carries, as the access log's lines do. */
  #chain(): Record<string, unknown> {
    const r = this.#ctx.record;
    const last = this.#ctx.attempts.at(-1);
    return {
      requestId: r.requestId,
      traceId: r.trace.traceId,
      spanId: r.trace.spanId,
      publicationRevision: r.publicationRevision,
      entrypoint: r.entrypoint,
      route: r.route,
      callId: r.callId,
      phase: r.phase,
      attemptId: last?.id,
      model: last?.logicalModel,
      modelRevision: last?.modelRevision,
      snapshotRevision: last?.snapshotRevision,
      evidence: last?.evidence ? { class: last.evidence.class, reason: last.evidence.reason } : undefined,
    };
  }

  /** `upstreamHeaders`: only a successful answer carries any; an error is the gateway's own. */
  #replyMeta(upstreamHeaders: Readonly<Record<string, string>> = {}): ReplyMeta {
    const charges = this.#charges;
    const billing = charges?.billing;
    return {
      requestId: this.requestId,
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

  async #subcall(sub: SubcallRequest): Promise<SubcallResult> {
    const principal = this.#principal;
    if (!principal || !this.#prepared) throw new Error("a sub-call needs a prepared parent request");
    const child = new RequestSession(this.#deps, undefined, {
      parent: this.#ctx,
      principal,
      trusted: this.#trusted,
      call: this.#call,
      snapshot: () => this.#pinSnapshot(),
      sub,
      taskBudget: this.#ingress?.taskBudget ?? this.#inherited?.taskBudget,
    });
    const action = await child.prepare();
    if (action.kind === "immediate") return { ok: false, requestId: child.requestId, error: action.error, attempts: [] };
    const reply = await child.dispatch();
    switch (reply.kind) {
      case "buffered":
        return { ok: true, requestId: child.requestId, response: reply.response, attempts: reply.meta.attempts };
      case "error":
        return { ok: false, requestId: child.requestId, error: reply.error, attempts: reply.meta.attempts };
      case "stream":
        throw new Error("unreachable: sub-calls are buffered");
    }
  }
}
