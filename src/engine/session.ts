import type { AbortReason, RequestContext } from "../context/request-context.ts";
import { requestTrace } from "../context/trace-context.ts";
import { ChatTurn } from "../kinds/model/chat-turn.ts";
import { CountTokensTurn } from "../kinds/model/count-tokens-turn.ts";
import { EmbeddingsTurn } from "../kinds/model/embeddings-turn.ts";
import type { EmbeddingSubcall, Ingress, Reply, SubcallRequest } from "../kinds/model/model-api.ts";
import type { ModelCaller } from "../kinds/model/model-caller.ts";
import type { PinnedSnapshot } from "../snapshot/pinned-snapshot.ts";
import type { EngineDeps } from "./engine-deps.ts";
import { Runner } from "./runner.ts";
import type { Action, EmbeddingResult, ModelExecutor, Session, SubcallResult } from "./session-api.ts";

/** Where a session's request comes from: the HTTP adapter, or a request it runs inside. */
type Origin =
  | { readonly ingress: Ingress }
  | { readonly parent: RequestSession; readonly sub: SubcallRequest; readonly internal: boolean }
  | { readonly parent: RequestSession; readonly embed: EmbeddingSubcall };

/**
 * One model request's session: the model kind (chat, embeddings or a token count) on the one runner, behind the
 * API the HTTP adapter and sub-calls use ({@link Session}). It pins the snapshot once for the
 * request and every sub-call made inside it.
 */
export class RequestSession implements Session {
  readonly requestId: string;
  readonly models: ModelExecutor;
  readonly #deps: EngineDeps;
  readonly #runner: Runner<Reply>;
  readonly #turn: ChatTurn | EmbeddingsTurn | CountTokensTurn;
  readonly #parent: RequestSession | undefined;
  #snapshot: Promise<PinnedSnapshot> | undefined;

  constructor(deps: EngineDeps, from: Origin) {
    this.#deps = deps;
    const ingress = "ingress" in from ? from.ingress : undefined;
    const parent = "parent" in from ? from.parent : undefined;
    this.#parent = parent;
    const parentCtx = parent === undefined ? undefined : parent.#runner.ctx;
    this.requestId = ingress?.requestId ?? deps.newRequestId();
    const pin = () => this.#pinSnapshot();
    let turn!: ChatTurn | EmbeddingsTurn | CountTokensTurn;
    this.#runner = new Runner(
      deps,
      {
        requestId: this.requestId,
        receivedAt: ingress?.receivedAt ?? deps.clock.now(),
        waitUntil: ingress?.waitUntil ?? parentCtx!.waitUntil,
        parent: parentCtx,
        trace: requestTrace(ingress?.traceParent, deps.tracing?.trustClient ?? false, parentCtx?.record.trace, deps.tracing?.sample ?? (() => false)),
      },
      (ctx) => (turn = this.#turnOf(ctx, from, pin)),
    );
    this.#turn = turn;
    this.models = { call: (sub) => this.#subcall(sub), embed: (sub) => this.#embed(sub) };
  }

  abort(reason: AbortReason): void {
    this.#runner.abort(reason);
  }

  close(): void {
    this.#runner.close();
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

  #turnOf(ctx: RequestContext, from: Origin, pin: () => Promise<PinnedSnapshot>): ChatTurn | EmbeddingsTurn | CountTokensTurn {
    if ("ingress" in from) {
      const ingress = from.ingress;
      switch (ingress.operation) {
        case "embeddings":
          return new EmbeddingsTurn(this.#deps, ctx, { ingress }, pin);
        case "count_tokens":
          return new CountTokensTurn(this.#deps, ctx, ingress, pin);
        case "chat":
        case undefined:
          return new ChatTurn(this.#deps, ctx, { ingress }, pin);
      }
    }
    const inherited = from.parent.#caller.inheritance(() => from.parent.#pinSnapshot(), "embed" in from || from.internal);
    return "embed" in from ? new EmbeddingsTurn(this.#deps, ctx, { inherited, sub: from.embed }, pin) : new ChatTurn(this.#deps, ctx, { inherited, sub: from.sub }, pin);
  }

  get #caller(): ModelCaller {
    return this.#turn.caller;
  }

  #pinSnapshot(): Promise<PinnedSnapshot> {
    if (this.#parent) return this.#parent.#pinSnapshot();
    this.#snapshot ??= this.#deps.snapshot();
    return this.#snapshot;
  }

  /** A model-kind request that inherits from this one, on the same runner. */
  async #subcall(sub: SubcallRequest): Promise<SubcallResult> {
    if (!(this.#turn instanceof ChatTurn) || !this.#turn.prepared) throw new Error("a sub-call needs a prepared parent request");
    const child = new RequestSession(this.#deps, { parent: this, sub, internal: false });
    const reply = await child.#run();
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
   * The gateway's own embedding on this request's behalf (a similarity signal): an embeddings
   * request that inherits from this one, charged to the same caller, whose model the publication
   * chose. Valid once the request is authenticated.
   */
  async #embed(sub: EmbeddingSubcall): Promise<EmbeddingResult> {
    if (this.#caller.principal === undefined) throw new Error("an embedding needs an authenticated parent request");
    const child = new RequestSession(this.#deps, { parent: this, embed: sub });
    const reply = await child.#run();
    if (reply.kind === "error") return { ok: false, requestId: child.requestId, error: reply.error, attempts: reply.meta.attempts };
    if (reply.kind !== "buffered" || reply.embeddings === undefined) throw new Error("unreachable: an embedding is buffered");
    return { ok: true, requestId: child.requestId, response: reply.embeddings, attempts: reply.meta.attempts };
  }

  /** A sub-call's whole life: prepared, then dispatched (a refusal while preparing is its reply). */
  async #run(): Promise<Reply> {
    const prepared = await this.#runner.prepare();
    return prepared.kind === "answered" ? prepared.reply : await this.#runner.dispatch();
  }
}
