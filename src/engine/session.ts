import { requestTrace } from "../context/trace-context.ts";
import type { Ingress, Reply, SubcallRequest } from "../kinds/model-api.ts";
import { ModelTurn, type Inherited } from "../kinds/model-turn.ts";
import type { PinnedSnapshot } from "../snapshot/pinned-snapshot.ts";
import type { AbortReason, RequestContext } from "../context/request-context.ts";
import type { EngineDeps } from "./engine-deps.ts";
import { Runner } from "./runner.ts";
import type { Action, ModelExecutor, Session, SubcallResult } from "./session-api.ts";

/**
 * One model request's session: the model kind on the one runner, behind the API the HTTP adapter
 * and sub-calls use ({@link Session}). It pins the snapshot once for the request and every
 * sub-call made inside it.
 */
export class RequestSession implements Session {
  readonly requestId: string;
  readonly models: ModelExecutor;
  readonly #deps: EngineDeps;
  readonly #runner: Runner<Reply>;
  readonly #turn: ModelTurn;
  readonly #parentSnapshot: (() => Promise<PinnedSnapshot>) | undefined;
  #snapshot: Promise<PinnedSnapshot> | undefined;

  constructor(deps: EngineDeps, from: { readonly ingress: Ingress } | { readonly inherited: Inherited; readonly parent: RequestContext }) {
    this.#deps = deps;
    const ingress = "ingress" in from ? from.ingress : undefined;
    const parent = "parent" in from ? from.parent : undefined;
    this.#parentSnapshot = "inherited" in from ? from.inherited.snapshot : undefined;
    this.requestId = ingress?.requestId ?? deps.newRequestId();
    let turn!: ModelTurn;
    this.#runner = new Runner(
      deps,
      {
        requestId: this.requestId,
        receivedAt: ingress?.receivedAt ?? deps.clock.now(),
        waitUntil: ingress?.waitUntil ?? parent!.waitUntil,
        parent,
        trace: requestTrace(ingress?.traceParent, deps.tracing?.trustClient ?? false, parent?.record.trace, deps.tracing?.sample ?? (() => false)),
      },
      (ctx) => (turn = new ModelTurn(deps, ctx, ingress ? { ingress } : { inherited: (from as { inherited: Inherited }).inherited }, () => this.#pinSnapshot())),
    );
    this.#turn = turn;
    this.models = { call: (sub) => this.#subcall(sub) };
  }

  abort(reason: AbortReason): void {
    this.#runner.abort(reason);
  }

  close(): void {
    this.#runner.close();
  }

  async prepare(): Promise<Action> {
    const prepared = await this.#runner.prepare();
    if (prepared.kind === "dispatch") return { kind: "dispatch", ...this.#turn.decided };
    const reply = prepared.reply;
    if (reply.kind !== "error") throw new Error("unreachable: a model request answers early only with an error");
    return { kind: "immediate", error: reply.error };
  }

  dispatch(): Promise<Reply> {
    return this.#runner.dispatch();
  }

  #pinSnapshot(): Promise<PinnedSnapshot> {
    if (this.#parentSnapshot) return this.#parentSnapshot();
    this.#snapshot ??= this.#deps.snapshot();
    return this.#snapshot;
  }

  /** A model-kind request that inherits from this one, on the same runner. */
  async #subcall(sub: SubcallRequest): Promise<SubcallResult> {
    if (!this.#turn.prepared) throw new Error("a sub-call needs a prepared parent request");
    const child = new RequestSession(this.#deps, { inherited: this.#turn.inheritance(sub, () => this.#pinSnapshot()), parent: this.#runner.ctx });
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
