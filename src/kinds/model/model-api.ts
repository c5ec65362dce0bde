import type { Attribution } from "../../attribution/attribution.ts";
import type { CacheDirectives } from "../../cache/cache-policy.ts";
import type { Workload } from "../../attribution/workload.ts";
import type { CallBudget } from "../../call-budget/attempt-budget-client.ts";
import type { TraceParent } from "../../context/trace-context.ts";
import type { GatewayError } from "../../errors/gateway-error.ts";
import type { ProtocolId } from "../../protocol/codec.ts";
import type { EmbeddingInput } from "../../protocol/embeddings.ts";
import type { NeutralRequest, NeutralResponse } from "../../protocol/neutral.ts";
import type { ModelOperation } from "../../publication/compile-publication.ts";

/**
 * What a client asks of a model: a chat (the generation APIs), embeddings (`POST /v1/embeddings`),
 * or a count of a chat's input tokens (`POST /v1/messages/count_tokens`), which a chat entrypoint
 * serves.
 */
export type RequestOperation = ModelOperation | "count_tokens";

/** What a transport adapter hands the engine for one request: nothing transport-specific. */
export interface Ingress {
  readonly requestId: string;
  /** Epoch ms when the adapter received the request; the deadline counts from here. */
  readonly receivedAt: number;
  /** The wire protocol the client speaks: its request is decoded and its answer encoded with it. */
  readonly protocol: ProtocolId;
  /** What the client asked for (see {@link RequestOperation}); chat when absent. */
  readonly operation?: RequestOperation | undefined;
  /** The API key the client presented (never forwarded anywhere). */
  readonly apiKey: string | undefined;
  /** The `Authorization: Bearer` credential alone: an access token is only read from there (never forwarded either). */
  readonly bearer?: string | undefined;
  /** Reads the request body, bounded by the adapter's limits; called once, after authentication. */
  readonly readBody: () => Promise<unknown>;
  /** Only the headers the bootstrap config marks trusted, lower-case names. */
  readonly trustedHeaders: ReadonlyMap<string, string>;
  /** The caller's cross-layer call budget, as its transport carried it (or why it was unusable). */
  readonly call?: CallBudget | { readonly error: string } | undefined;
  /** Keeps the runtime alive for work after the answer (settlements, breaker reports). */
  readonly waitUntil: (p: Promise<unknown>) => void;
  /** The client's W3C trace context (`traceparent`), as its transport carried it. */
  readonly traceParent?: TraceParent | undefined;
  /** The caller's task, session and turn ids, as its transport carried them (or why they were refused). */
  readonly attribution?: Attribution | { readonly error: GatewayError } | undefined;
  /** The workload behind the call, from the trusted headers configured for it. */
  readonly workload?: Workload | undefined;
  /** The caller's per-request task cap (`x-sluice-task-budget`), as sent. */
  readonly taskBudget?: string | undefined;
  /** What the client's headers allow the response cache (`x-sluice-cache`, `Cache-Control`); absent: everything. */
  readonly cacheDirectives?: CacheDirectives | undefined;
}

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
  /** The decision that chose the plan (`default` when none held): its name only, never signals or scores. */
  readonly decision?: string | undefined;
  /** A soft route went ahead without the ledger. */
  readonly budgetUnchecked: boolean;
  /** The task's committed spend and remaining cap after this request's last reservation (capped tasks only). */
  readonly task?: readonly { readonly metric: string; readonly currency?: string | undefined; readonly spent: number; readonly remaining: number }[] | undefined;
  /** What remains after this request's reservation, for keys allowed to see it. */
  readonly budgetRemaining: readonly { readonly scope: string; readonly metric: string; readonly remaining: number }[] | undefined;
  /**
   * Provider response headers the backend passes on (backends.yaml `responseHeaders`), lower-case
   * names; empty unless the answer succeeded and the backend lists some. The adapter writes the
   * gateway's own headers over them.
   */
  readonly upstreamHeaders: Readonly<Record<string, string>>;
  /** A token count's figure: `reported` by the model's backend, or `estimated` by the gateway. */
  readonly tokenCount?: "reported" | "estimated" | undefined;
  /** A Looper run's summary (`cascade; steps=2; accepted=<tier>`), when the decision ran one. */
  readonly looper?: string | undefined;
  /** The answer came from the response cache: no provider attempt was made. */
  readonly cache?: "hit" | undefined;
}

/** The answer, ready for the adapter to write. */
export type Reply =
  | {
      readonly kind: "buffered";
      /** A chat's answer in neutral form (a sub-call reads it; an input-only operation's is on its turn). */
      readonly response?: NeutralResponse | undefined;
      /** The response in the client's protocol (undefined for an in-process caller). */
      readonly body: unknown;
      readonly meta: ReplyMeta;
    }
  | { readonly kind: "stream"; /** Client-protocol SSE bytes; the request ends with this stream. */ readonly body: ReadableStream<Uint8Array>; readonly meta: ReplyMeta }
  | { readonly kind: "error"; readonly error: GatewayError; readonly meta: ReplyMeta };

/** An embedding the gateway makes inside a request, for a similarity signal. */
export interface EmbeddingSubcall {
  /** The embeddings entrypoint the signal names. */
  readonly model: string;
  readonly inputs: readonly EmbeddingInput[];
  readonly dimensions?: number | undefined;
  /** Stops the embedding (a signal's deadline passed): the sub-request ends as cancelled. */
  readonly signal?: AbortSignal | undefined;
}

/** A moderation the gateway makes inside a request, for a moderation signal. */
export interface ModerationSubcall {
  /** The moderations entrypoint the signal names. */
  readonly model: string;
  readonly inputs: readonly string[];
}

/** A buffered model call made inside a request, e.g. by a looper step or MCP sampling. */
export interface SubcallRequest {
  /** The public model name (entrypoint) to call; the parent's key must be granted it. */
  readonly model: string;
  readonly request: Omit<NeutralRequest, "model" | "stream" | "streamUsage">;
  /**
   * A Looper step's tier (the engine's own sub-calls only): planned as it is, with no decision
   * rules — the parent's decision already chose — and none of the entrypoint's or decision's plugins.
   */
  readonly tier?: readonly string[] | undefined;
  /** A Looper step's own plugins (its algorithm's `perModelCall`), by name; with `tier` only. */
  readonly plugins?: readonly string[] | undefined;
  /** Stops the sub-call (a Looper run's time bound): it ends as cancelled. */
  readonly signal?: AbortSignal | undefined;
}
