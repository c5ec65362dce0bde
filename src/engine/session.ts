import type { AbortReason, RequestContext } from "../context/request-context.ts";
import type { RequestTiming } from "../context/request-timing.ts";
import { requestTrace } from "../context/trace-context.ts";
import type { DispatchPlan } from "../decide/dispatch-plan.ts";
import { ChatTurn } from "../kinds/model/chat-turn.ts";
import { explainAnswer, type ExplainAnswer } from "../kinds/model/explain-answer.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { SignalModels } from "../signals/signal-models.ts";
import { CountTokensTurn } from "../kinds/model/count-tokens-turn.ts";
import { InputTurn } from "../kinds/model/input-turn.ts";
import type { Ingress, Reply, SubcallRequest } from "../kinds/model/model-api.ts";
import type { ExplainOrigin, Inherited, ModelCaller } from "../kinds/model/model-caller.ts";
import type { KindTurn } from "../kinds/traffic-kind.ts";
import { EMBEDDINGS, MODERATIONS, type InputOperation } from "../protocol/input-operation.ts";
import type { InputRequest, InputResponse } from "../protocol/input-wire.ts";
import type { NeutralRequest } from "../protocol/neutral.ts";
import type { PinnedSnapshot } from "../snapshot/pinned-snapshot.ts";
import type { EngineDeps } from "./engine-deps.ts";
import { Runner } from "./runner.ts";
import type { Action, InputResult, ModelExecutor, Session, SubcallResult } from "./session-api.ts";
import type { StepRequest, StepResult } from "../looper/bounded-steps.ts";

/** A model-kind turn, whatever its operation: its hooks, who it is for, and what it decided. */
interface ModelTurn extends KindTurn<Reply> {
  readonly caller: ModelCaller;
  readonly decided: { readonly plan: DispatchPlan; readonly request: NeutralRequest | undefined };
}

/** An explain's mode: whom it asks about, and whether model-backed signals are computed. */
export interface ExplainMode extends ExplainOrigin {
  /** No gateway to call (the CLI's offline explain): model-backed signals are unknown (`offline`). */
  readonly offline: boolean;
}

/** Where a session's request comes from: the HTTP adapter (or the admin API's explain), or a request it runs inside. */
type Origin =
  | { readonly ingress: Ingress; readonly explain?: ExplainMode | undefined }
  | { readonly parent: RequestSession; readonly sub: SubcallRequest; readonly internal: boolean }
  /** The gateway's own input-only call: its turn, made on the child's context with what it inherits. */
  | { readonly parent: RequestSession; readonly input: (ctx: RequestContext, inherited: Inherited, pin: () => Promise<PinnedSnapshot>) => ModelTurn };

/**
 * One model request's session: the model kind (chat, embeddings, moderations, a token count) on
 * the one runner, behind the API the HTTP adapter and sub-calls use ({@link Session}). It pins the
 * snapshot once for the request and every sub-call made inside it.
 */
export class RequestSession implements Session {
  readonly requestId: string;
  readonly models: ModelExecutor;
  readonly #deps: EngineDeps;
  readonly #runner: Runner<Reply>;
  readonly #turn: ModelTurn;
  readonly #parent: RequestSession | undefined;
  readonly #explain: ExplainMode | undefined;
  #snapshot: Promise<PinnedSnapshot> | undefined;

  constructor(deps: EngineDeps, from: Origin) {
    this.#deps = deps;
    const ingress = "ingress" in from ? from.ingress : undefined;
    const parent = "parent" in from ? from.parent : undefined;
    this.#parent = parent;
    this.#explain = "ingress" in from ? from.explain : undefined;
    const parentCtx = parent === undefined ? undefined : parent.#runner.ctx;
    this.requestId = ingress?.requestId ?? deps.newRequestId();
    const pin = () => this.#pinSnapshot();
    let turn!: ModelTurn;
    this.#runner = new Runner(
      deps,
      {
        requestId: this.requestId,
        receivedAt: ingress?.receivedAt ?? deps.clock.now(),
        waitUntil: ingress?.waitUntil ?? parentCtx!.waitUntil,
        parent: parentCtx,
        trace: requestTrace(ingress?.traceParent, deps.tracing?.trustClient ?? false, parentCtx?.record.trace, deps.tracing?.sample ?? (() => false)),
        // A token count is free: it calls no model on its behalf, so its model-backed signals do not apply.
        signalModels: "ingress" in from && from.ingress.operation === "count_tokens" ? undefined : this.#signalModels(),
        explain: this.#explain === undefined ? undefined : { offline: this.#explain.offline },
      },
      (ctx) => (turn = this.#turnOf(ctx, from, pin)),
    );
    this.#turn = turn;
    this.models = {
      call: (sub) => this.#subcall(sub),
      embed: (sub) => this.#input(EMBEDDINGS, { model: sub.model, inputs: sub.inputs, dimensions: sub.dimensions, encodingFormat: "float" }, sub.signal),
      moderate: (sub) => this.#input(MODERATIONS, { model: sub.model, inputs: sub.inputs }),
    };
  }

  abort(reason: AbortReason): void {
    this.#runner.abort(reason);
  }

  close(): void {
    this.#runner.close();
  }

  timing(): RequestTiming {
    return this.#runner.timing();
  }

  async prepare(): Promise<Action> {
    const prepared = await this.#runner.prepare();
    if (prepared.kind === "dispatch") {
      return { kind: "dispatch", ...this.#turn.decided };
    }
    const reply = prepared.reply;
    if (reply.kind !== "error") throw new Error("unreachable: a model request answers early only with an error");
    return { kind: "immediate", error: reply.error };
  }

  dispatch(): Promise<Reply> {
    return this.#runner.dispatch();
  }

  /**
   * An explain's whole life on the runner (explain mode): decided, its plugins reported, ended
   * through the terminal; nothing reserved, admitted, sent or charged. Its signals' embeddings
   * are sent (unbilled) unless it is offline.
   *
   * @throws GatewayError the request's refusal before decide (a bad body, an unknown caller or
   *   model, a key without the grant): there is no decision to explain. A refusal at decide (a
   *   fail-closed decision) or by a plugin is the answer's outcome.
   */
  async explain(): Promise<ExplainAnswer> {
    const mode = this.#explain;
    if (mode === undefined || !(this.#turn instanceof ChatTurn)) throw new Error("explain() on a session that is not a chat explain");
    const turn = this.#turn;
    const explained = await this.#runner.explain();
    if (explained.refusal && !explained.decided && explained.phase !== "decide") throw explained.refusal;
    // The candidates come from the snapshot the request would have pinned.
    const snapshot = explained.decided ? await this.#pinSnapshot().catch(() => undefined) : undefined;
    return explainAnswer({
      publication: this.#deps.publication,
      codecs: this.#deps.codecs,
      record: this.#runner.ctx.record,
      explained,
      offline: mode.offline,
      entrypoint: turn.entrypoint,
      decided: turn.prepared ? turn.decided : undefined,
      snapshot,
    });
  }

  #turnOf(ctx: RequestContext, from: Origin, pin: () => Promise<PinnedSnapshot>): ModelTurn {
    if ("ingress" in from) {
      const origin = { ingress: from.ingress };
      switch (from.ingress.operation ?? "chat") {
        case "chat":
          return new ChatTurn(this.#deps, ctx, { ingress: from.ingress, explain: from.explain }, pin, { port: (step, signal, started) => this.#step(step, signal, started), scheduler: this.#deps.scheduler });
        case "embeddings":
          return new InputTurn(EMBEDDINGS, this.#deps, ctx, origin, pin);
        case "moderations":
          return new InputTurn(MODERATIONS, this.#deps, ctx, origin, pin);
        case "count_tokens":
          return new CountTokensTurn(this.#deps, ctx, from.ingress, pin);
      }
    }
    const inherited = from.parent.#caller.inheritance(() => from.parent.#pinSnapshot(), "input" in from || from.internal);
    return "input" in from ? from.input(ctx, inherited, pin) : new ChatTurn(this.#deps, ctx, { inherited, sub: from.sub }, pin);
  }

  get #caller(): ModelCaller {
    return this.#turn.caller;
  }

  #pinSnapshot(): Promise<PinnedSnapshot> {
    if (this.#parent) return this.#parent.#pinSnapshot();
    this.#snapshot ??= this.#deps.snapshot();
    return this.#snapshot;
  }

  /**
   * A Looper step: a sub-call to the tier the algorithm chose, on the request's own entrypoint (the
   * key was granted it when the request was authorized), made by the engine and never a listener.
   */
  async #step(step: StepRequest, signal: AbortSignal, started: (requestId: string) => void): Promise<StepResult> {
    const r = await this.#subcall({ model: this.#turn.decided.plan.entrypoint, request: step.request, tier: step.tier, plugins: step.plugins, signal }, started);
    return r.ok ? { ok: true, requestId: r.requestId, response: r.response } : { ok: false, requestId: r.requestId, error: r.error };
  }

  /** A model-kind request that inherits from this one, on the same runner. */
  async #subcall(sub: SubcallRequest, started?: (requestId: string) => void): Promise<SubcallResult> {
    if (!(this.#turn instanceof ChatTurn) || !this.#turn.prepared) throw new Error("a sub-call needs a prepared parent request");
    // Only a signal's embedding runs inside an explain: it sends no generation.
    if (this.#runner.ctx.record.explain === true) throw new Error("an explain makes no generation sub-call");
    const child = new RequestSession(this.#deps, { parent: this, sub, internal: false });
    started?.(child.requestId);
    // The caller stopped waiting for it (a Looper run's time bound): to the sub-call, its parent has ended.
    const stop = () => child.abort("parent_ended");
    if (sub.signal?.aborted) stop();
    sub.signal?.addEventListener("abort", stop, { once: true });
    let reply: Reply;
    try {
      reply = await child.#run();
    } finally {
      sub.signal?.removeEventListener("abort", stop);
    }
    switch (reply.kind) {
      case "buffered":
        return { ok: true, requestId: child.requestId, response: reply.response!, attempts: reply.meta.attempts };
      case "error":
        return { ok: false, requestId: child.requestId, error: reply.error, attempts: reply.meta.attempts };
      case "stream":
        throw new Error("unreachable: sub-calls are buffered");
    }
  }

  /**
   * The gateway's own input-only call on this request's behalf (a similarity signal's embedding,
   * a moderation signal's verdicts): a request that inherits from this one, charged to the same
   * caller, whose model the publication chose. Valid once the request is authenticated.
   */
  async #input<Req extends InputRequest, Res extends InputResponse>(op: InputOperation<Req, Res>, request: Req, signal?: AbortSignal): Promise<InputResult<Res>> {
    if (this.#caller.principal === undefined) throw new Error(`the gateway's own ${op.id} call needs an authenticated parent request`);
    // Made synchronously while the child is constructed, so it is set before the child runs.
    let turn!: InputTurn<Req, Res>;
    const child = new RequestSession(this.#deps, { parent: this, input: (ctx, inherited, pin) => (turn = new InputTurn(op, this.#deps, ctx, { inherited, request }, pin)) });
    // The signal stopped waiting for it: to the sub-request, its parent has ended.
    const stop = () => child.abort("parent_ended");
    if (signal?.aborted) stop();
    signal?.addEventListener("abort", stop, { once: true });
    let reply: Reply;
    try {
      reply = await child.#run();
    } finally {
      signal?.removeEventListener("abort", stop);
    }
    if (reply.kind === "error") return { ok: false, requestId: child.requestId, error: reply.error, attempts: reply.meta.attempts };
    const response = turn.response;
    if (reply.kind !== "buffered" || response === undefined) throw new Error(`unreachable: the gateway's own ${op.id} call is buffered`);
    return { ok: true, requestId: child.requestId, response, attempts: reply.meta.attempts };
  }

  /** What the request's model-backed signals call: embeddings as this request's own sub-requests. */
  #signalModels(): SignalModels {
    return {
      embed: async (model, texts, signal) => {
        const result = await this.#input(EMBEDDINGS, { model, inputs: texts, encodingFormat: "float" }, signal);
        if (!result.ok) throw result.error;
        if (result.response.vectors.length !== texts.length) throw new GatewayError("upstream_protocol_error", "The embedding model answered a different number of vectors than texts.");
        return result.response.vectors;
      },
      moderate: async (model, texts, signal) => {
        const result = await this.#input(MODERATIONS, { model, inputs: texts }, signal);
        if (!result.ok) throw result.error;
        if (result.response.results.length !== texts.length) throw new GatewayError("upstream_protocol_error", "The moderation model answered a different number of verdicts than texts.");
        return result.response.results.map((r) => ({ flagged: r.flagged, scores: r.categoryScores }));
      },
    };
  }

  /** A sub-call's whole life: prepared, then dispatched (a refusal while preparing is its reply). */
  async #run(): Promise<Reply> {
    const prepared = await this.#runner.prepare();
    return prepared.kind === "answered" ? prepared.reply : await this.#runner.dispatch();
  }
}
