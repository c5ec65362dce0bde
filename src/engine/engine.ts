import type { AdmissionController } from "../admit/admission.ts";
import { admitRequest } from "../admit/admit-phase.ts";
import type { DrainController } from "../admit/drain.ts";
import { authenticate } from "../auth/authenticate.ts";
import { authorize, grantedEntrypoints } from "../auth/authorize.ts";
import type { CallBudget } from "../call-budget/attempt-budget-client.ts";
import { RequestContext, type AbortReason, type RecordSink, type UndoErrorHandler } from "../context/request-context.ts";
import { planRequest } from "../decide/decide.ts";
import type { DispatchPlan } from "../decide/dispatch-plan.ts";
import type { Clock } from "../deps/clock.ts";
import type { Scheduler } from "../deps/scheduler.ts";
import { GatewayError, toGatewayError } from "../errors/gateway-error.ts";
import type { GatewayExecutor } from "../invoker/executor.ts";
import type { CodecRegistry, ProtocolId, ResponseStamp } from "../protocol/codec.ts";
import type { NeutralRequest, NeutralResponse } from "../protocol/neutral.ts";
import type { CompiledEntrypoint, CompiledPublication } from "../publication/compile-publication.ts";
import type { Principal } from "../publication/principal.ts";
import { prepareCharges, type ReserveDeps } from "../reserve/reserve-phase.ts";
import { createClientStream } from "../respond/stream-pipeline.ts";
import type { PinnedSnapshot } from "../snapshot/pinned-snapshot.ts";
import type { BreakerCache } from "../traffic/breaker-cache.ts";
import type { HealthCache } from "../traffic/health-cache.ts";

/** What a transport adapter hands the engine for one request: nothing transport-specific. */
export interface Ingress {
  readonly requestId: string;
  /** Epoch ms when the adapter received the request; the deadline counts from here. */
  readonly receivedAt: number;
  /** The wire protocol the client speaks: its request is decoded and its answer encoded with it. */
  readonly protocol: ProtocolId;
  /** The API key the client presented (never forwarded anywhere). */
  readonly apiKey: string | undefined;
  /** Reads the request body, bounded by the adapter's limits; called once, after authentication. */
  readonly readBody: () => Promise<unknown>;
  /** Only the headers the bootstrap config marks trusted, lower-case names. */
  readonly trustedHeaders: ReadonlyMap<string, string>;
  /** The caller's cross-layer call budget, as its transport carried it (or why it was unusable). */
  readonly call?: CallBudget | { readonly error: string } | undefined;
  /** Keeps the runtime alive for work after the answer (settlements, breaker reports). */
  readonly waitUntil: (p: Promise<unknown>) => void;
}

/** Answer without calling a backend (a refusal, a protocol error). The request has ended. */
export interface ImmediateAction {
  readonly kind: "immediate";
  readonly error: GatewayError;
}

/** Call a backend according to the plan: {@link Session.dispatch} does it. */
export interface DispatchAction {
  readonly kind: "dispatch";
  readonly plan: DispatchPlan;
  readonly request: NeutralRequest;
}

export type Action = ImmediateAction | DispatchAction;

/** What the client is told besides the answer, whatever the answer is. */
export interface ReplyMeta {
  readonly requestId: string;
  /** Attempt ids in order, so a caller can quote exactly which upstream calls its request made. */
  readonly attempts: readonly string[];
  /** The client protocol's names of the request fields dropped under declared downgrades. */
  readonly downgraded: readonly string[];
  /** The output cap the gateway set because the request had none, if it did. */
  readonly injectedMaxOutputTokens: number | undefined;
  readonly callId: string | undefined;
  /** A soft route went ahead without the ledger. */
  readonly budgetUnchecked: boolean;
  /** What remains after this request's reservation, for keys allowed to see it. */
  readonly budgetRemaining: readonly { readonly scope: string; readonly metric: string; readonly remaining: number }[] | undefined;
}

/** The answer, ready for the adapter to write. */
export type Reply =
  | { readonly kind: "buffered"; readonly response: NeutralResponse; /** The response in the client's protocol. */ readonly body: unknown; readonly meta: ReplyMeta }
  | { readonly kind: "stream"; /** Client-protocol SSE bytes; the request ends with this stream. */ readonly body: ReadableStream<Uint8Array>; readonly meta: ReplyMeta }
  | { readonly kind: "error"; readonly error: GatewayError; readonly meta: ReplyMeta };

/**
 * One request's passage through the runtime's phases (see docs/architecture.md for the table).
 * The adapter calls {@link prepare}, writes an immediate action, or calls {@link dispatch} and
 * writes its reply. The request ends by itself when its answer is complete; {@link abort} stops it
 * from outside (client disconnect), and {@link close} ends whatever is left (idempotent).
 */
export interface Session {
  readonly requestId: string;
  /** authenticate → decode → authorize → decide. */
  prepare(): Promise<Action>;
  /** reserve → admit → invoke → respond (settle runs when each attempt and the request end). */
  dispatch(): Promise<Reply>;
  /** In-process sub-calls on this request's behalf (valid once it is prepared). */
  readonly models: ModelExecutor;
  abort(reason: AbortReason): void;
  close(): void;
}

/** A buffered model call made inside a request, e.g. by a looper step or MCP sampling. */
export interface SubcallRequest {
  /** The public model name (entrypoint) to call; the parent's key must be granted it. */
  readonly model: string;
  readonly request: Omit<NeutralRequest, "model" | "stream" | "streamUsage">;
}

export type SubcallResult =
  | { readonly ok: true; readonly requestId: string; readonly response: NeutralResponse; readonly attempts: readonly string[] }
  | { readonly ok: false; readonly requestId: string; readonly error: GatewayError; readonly attempts: readonly string[] };

/**
 * Sub-calls bound to one session: each inherits the parent's principal, pinned publication and
 * snapshot, absolute deadline, cancellation and budget scope (its trusted headers and call
 * budget), and gets its own request and attempt ids, its own admission lease and its own evidence.
 * It never touches a listener.
 */
export interface ModelExecutor {
  call(sub: SubcallRequest): Promise<SubcallResult>;
}

/** A model the caller may use, for `GET /v1/models`. */
export interface ListedModel {
  readonly id: string;
  readonly description?: string | undefined;
}

/** Everything the engine's phases use, built once per isolate by the composition root. */
export interface EngineDeps {
  readonly publication: CompiledPublication;
  readonly codecs: CodecRegistry;
  readonly clock: Clock;
  readonly scheduler: Scheduler;
  readonly newRequestId: () => string;
  readonly requestDeadlineMs: number;
  readonly streamTimeouts: { readonly firstTokenMs: number; readonly idleMs: number };
  readonly drain: DrainController;
  readonly admission: AdmissionController;
  /** The active BackendSnapshot; a request pins the one it gets first. */
  readonly snapshot: () => Promise<PinnedSnapshot>;
  readonly invoker: GatewayExecutor;
  readonly reserve: ReserveDeps;
  readonly breakers: BreakerCache | undefined;
  readonly health: HealthCache | undefined;
  readonly sink: RecordSink;
  readonly onUndoError: UndoErrorHandler;
  /** Internal failures (a phase that threw something not a GatewayError), for logs. */
  readonly log: (event: Readonly<Record<string, unknown>>) => void;
}

/** The transport-neutral gateway engine: one per isolate and publication. */
export interface Engine {
  readonly publicationRevision: string;
  begin(ingress: Ingress): Session;
  /** Authenticates a key and lists what it may call. @throws GatewayError on a bad key. */
  listModels(apiKey: string | undefined): Promise<ListedModel[]>;
}

export function createEngine(deps: EngineDeps): Engine {
  return {
    publicationRevision: deps.publication.revision,
    begin: (ingress) => new RequestSession(deps, ingress, undefined),
    async listModels(apiKey) {
      const principal = await authenticate(deps.publication, apiKey);
      return grantedEntrypoints(deps.publication, principal).map((ep) => ({ id: ep.name, description: ep.description }));
    },
  };
}

/** What a sub-call's session takes from its parent. */
interface Inherited {
  readonly parent: RequestContext;
  readonly principal: Principal;
  readonly trusted: ReadonlyMap<string, string>;
  readonly call: CallBudget | undefined;
  readonly snapshot: () => Promise<PinnedSnapshot>;
  readonly sub: SubcallRequest;
}

class RequestSession implements Session {
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
  #meta: { downgraded: readonly string[]; injectedCap: number | undefined; unchecked: () => boolean; remaining: () => ReplyMeta["budgetRemaining"] } = {
    downgraded: [],
    injectedCap: undefined,
    unchecked: () => false,
    remaining: () => undefined,
  };

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
    });
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
      // authenticate
      const principal = this.#inherited?.principal ?? (await authenticate(this.#deps.publication, this.#ingress?.apiKey));
      this.#principal = principal;
      ctx.record.tenant = principal.tenantId;
      ctx.record.key = principal.keyId;
      ctx.checkpoint();
      // decode (the body is read only now, after authentication)
      let request: NeutralRequest;
      if (this.#inherited) {
        request = { ...this.#inherited.sub.request, model: this.#inherited.sub.model, stream: false, streamUsage: false };
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
      }
      ctx.record.stream = request.stream;
      // authorize
      const ep = authorize(this.#deps.publication, principal, request.model);
      this.#entrypoint = ep;
      ctx.record.entrypoint = ep.name;
      // decide
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
      // reserve: the request's charging (the attempts reserve their own worst cases)
      const charges = prepareCharges(deps.reserve, deps.publication, ep, ctx, principal, prepared.request, this.#trusted, this.#call ?? this.#inherited?.call);
      this.#meta.injectedCap = charges.injectedCap;
      const billing = charges.billing;
      if (billing) {
        this.#meta.unchecked = () => billing.unchecked;
        const expose = charges.budget?.exposeBudget === true;
        this.#meta.remaining = () => (expose ? billing.lastGrant?.remaining : undefined);
      }
      // admit
      const lease = await admitRequest(ctx, deps.admission, this.#inherited ? undefined : deps.drain, { tenant: principal.tenantId, model: plan.entrypoint });
      // invoke, on the snapshot the request pins for its whole life (sub-calls share it)
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
        charges: billing,
      });
      if (!execution.ok) throw execution.error;
      ctx.checkpoint();
      const codec = this.#inherited ? undefined : deps.codecs.get(this.#ingress!.protocol)!;
      this.#meta.downgraded = execution.downgraded.map((f) => codec?.paramName(f) ?? f);
      // respond: decoded once, encoded last for the client
      const stamp: ResponseStamp = { id: this.requestId.slice(4), created: Math.floor(ctx.receivedAt / 1000), model: plan.entrypoint };
      if (execution.kind === "buffered") {
        const body = codec ? codec.encodeResponse(execution.response, stamp) : execution.response;
        const meta = this.#replyMeta();
        ctx.finish({ kind: "completed" });
        return { kind: "buffered", response: execution.response, body, meta };
      }
      if (!codec) throw new GatewayError("internal_error", "A sub-call cannot stream.");
      const body = createClientStream(execution.body, {
        decoder: execution.decoder,
        encoder: codec.createStreamEncoder(stamp, charges.request),
        attempt: execution.attempt,
        clock: deps.clock,
        timeouts: deps.streamTimeouts,
      });
      handedToStream = true;
      return { kind: "stream", body, meta: this.#replyMeta() };
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
    if (!(err instanceof GatewayError)) this.#deps.log({ kind: "request_failed", requestId: this.requestId, code: "internal_error", cause: String(err) });
    else if (err.code === "client_closed") this.#deps.log({ kind: "request_cancelled", requestId: this.requestId, code: err.code });
    else if (err.source === "internal") this.#deps.log({ kind: "request_failed", requestId: this.requestId, code: err.code, cause: String(err.cause) });
    return toGatewayError(err);
  }

  #replyMeta(): ReplyMeta {
    return {
      requestId: this.requestId,
      attempts: this.#ctx.attempts.map((a) => a.id),
      downgraded: this.#meta.downgraded,
      injectedMaxOutputTokens: this.#meta.injectedCap,
      callId: this.#call?.callId,
      budgetUnchecked: this.#meta.unchecked(),
      budgetRemaining: this.#meta.remaining(),
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
