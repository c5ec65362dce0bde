import type { AbortReason } from "../context/request-context.ts";
import type { RequestTiming } from "../context/request-timing.ts";
import type { DispatchPlan } from "../decide/dispatch-plan.ts";
import type { GatewayError } from "../errors/gateway-error.ts";
import type { EmbeddingSubcall, ModerationSubcall, Reply, SubcallRequest } from "../kinds/model/model-api.ts";
import type { NeutralEmbeddingResponse } from "../protocol/embeddings.ts";
import type { NeutralModerationResponse } from "../protocol/moderations.ts";
import type { NeutralRequest, NeutralResponse } from "../protocol/neutral.ts";

/** Answer without calling a backend (a refusal, a protocol error). The request has ended. */
export interface ImmediateAction {
  readonly kind: "immediate";
  readonly error: GatewayError;
}

/** Call a backend according to the plan: {@link Session.dispatch} does it. */
export interface DispatchAction {
  readonly kind: "dispatch";
  readonly plan: DispatchPlan;
  /** A chat's neutral request (an embeddings or moderations request, or a token count, shows none). */
  readonly request: NeutralRequest | undefined;
}

export type Action = ImmediateAction | DispatchAction;

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
  /** Where the request's time went so far: the gateway's own and the upstreams' (for `Server-Timing`). */
  timing(): RequestTiming;
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
  /** The gateway's own embedding on the request's behalf (a similarity signal); valid once the request is authenticated. */
  embed(sub: EmbeddingSubcall): Promise<EmbeddingResult>;
  /** The gateway's own moderation on the request's behalf (a moderation signal); valid once the request is authenticated. */
  moderate(sub: ModerationSubcall): Promise<ModerationResult>;
}

/** The outcome of the gateway's own input-only call (an embedding, a moderation): its answer in neutral form, or why not. */
export type InputResult<R> =
  | { readonly ok: true; readonly requestId: string; readonly response: R; readonly attempts: readonly string[] }
  | { readonly ok: false; readonly requestId: string; readonly error: GatewayError; readonly attempts: readonly string[] };

export type EmbeddingResult = InputResult<NeutralEmbeddingResponse>;

export type ModerationResult = InputResult<NeutralModerationResponse>;

/** A model the caller may use, for `GET /v1/models`. */
export interface ListedModel {
  readonly id: string;
  readonly description?: string | undefined;
}
