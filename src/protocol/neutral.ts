/**
 * The neutral model every codec decodes into and encodes from. Policy (routing, limits, accounting)
 * runs on these objects only; public bytes are never re-parsed.
 */

/**
 * A content part of a message. Images are URLs: `https:` or `data:<media type>;base64,…` (Anthropic
 * base64 sources become data URLs and back). `reasoning` parts are a model's own earlier reasoning
 * replayed in history (Anthropic thinking blocks keep their opaque `signature`); codecs whose
 * protocol has no place for them drop them from history, which docs/protocols.md records.
 */
export type ContentPart =
  | { readonly type: "text"; readonly text: string; readonly cacheControl?: CacheControl | undefined }
  | {
      readonly type: "image";
      readonly url: string;
      readonly detail?: "auto" | "low" | "high" | undefined;
      readonly cacheControl?: CacheControl | undefined;
    }
  | { readonly type: "reasoning"; readonly text: string; readonly signature?: string | undefined };

/**
 * A prompt-cache breakpoint (Anthropic `cache_control`). OpenAI caches prompts automatically and
 * has no such field, so OpenAI encoders leave it out (documented); it never changes the answer.
 */
export interface CacheControl {
  readonly type: "ephemeral";
  readonly ttl?: "5m" | "1h" | undefined;
}

/** A tool call made by the model. `arguments` is the raw JSON text the model produced. */
export interface ToolCall {
  readonly id: string;
  readonly name: string;
  readonly arguments: string;
}

export type NeutralMessage =
  | { readonly role: "system" | "developer"; readonly content: readonly ContentPart[]; readonly name?: string | undefined }
  | { readonly role: "user"; readonly content: readonly ContentPart[]; readonly name?: string | undefined }
  | {
      readonly role: "assistant";
      readonly content: readonly ContentPart[];
      readonly toolCalls?: readonly ToolCall[] | undefined;
      readonly name?: string | undefined;
    }
  | {
      readonly role: "tool";
      readonly toolCallId: string;
      readonly content: readonly ContentPart[];
      /** The tool reported failure (Anthropic `is_error`). */
      readonly isError?: boolean | undefined;
    };

export interface ToolDefinition {
  readonly name: string;
  readonly description?: string | undefined;
  /** JSON Schema of the arguments. */
  readonly parameters?: Readonly<Record<string, unknown>> | undefined;
  readonly strict?: boolean | undefined;
  readonly cacheControl?: CacheControl | undefined;
}

export type ToolChoice =
  | { readonly type: "auto" }
  | { readonly type: "none" }
  | { readonly type: "required" }
  | { readonly type: "tool"; readonly name: string };

/**
 * Reasoning effort: the union of every protocol's values. OpenAI has all of them; Anthropic
 * (`output_config.effort`) has low to max. An encoder whose protocol lacks the value refuses the
 * request (never maps it to a neighbour).
 */
export const REASONING_EFFORTS = ["none", "minimal", "low", "medium", "high", "xhigh", "max"] as const;
export type ReasoningEffort = (typeof REASONING_EFFORTS)[number];

/**
 * How much the model may think (Anthropic `thinking`): a token budget, `"adaptive"` (thinking on,
 * the model chooses how much) or `"between_tools"` (the model thinks only between tool calls).
 * All three are the feature `reasoning_budget`, which only Anthropic carries.
 */
export type ReasoningBudget = number | "adaptive" | "between_tools";

/** OpenAI service tiers (Chat has all but `ultrafast`, which is Responses only). */
export const OPENAI_SERVICE_TIERS = ["auto", "default", "flex", "scale", "priority", "fast", "ultrafast"] as const;
export type OpenAiServiceTier = (typeof OPENAI_SERVICE_TIERS)[number];

export type ResponseFormat =
  | { readonly type: "text" }
  | { readonly type: "json_object" }
  | {
      readonly type: "json_schema";
      /** A label; Anthropic has none (its clients' schemas arrive without one). */
      readonly name?: string | undefined;
      readonly schema?: Readonly<Record<string, unknown>> | undefined;
      readonly strict?: boolean | undefined;
      readonly description?: string | undefined;
    };

/** A request as the engine sees it, whichever protocol it arrived in. */
export interface NeutralRequest {
  /** The public model name the client asked for (an entrypoint name). */
  readonly model: string;
  readonly messages: readonly NeutralMessage[];
  readonly tools?: readonly ToolDefinition[] | undefined;
  readonly toolChoice?: ToolChoice | undefined;
  readonly parallelToolCalls?: boolean | undefined;
  readonly maxOutputTokens?: number | undefined;
  readonly temperature?: number | undefined;
  readonly topP?: number | undefined;
  readonly presencePenalty?: number | undefined;
  readonly frequencyPenalty?: number | undefined;
  readonly seed?: number | undefined;
  readonly stop?: readonly string[] | undefined;
  readonly responseFormat?: ResponseFormat | undefined;
  readonly reasoningEffort?: ReasoningEffort | undefined;
  /** Reasoning budget (Anthropic `thinking`: `enabled` + `budget_tokens`, `adaptive`, `between_tools`). */
  readonly reasoningBudgetTokens?: ReasoningBudget | undefined;
  /** Whether thinking text is returned or omitted (Anthropic `thinking.display`); rides with the budget. */
  readonly reasoningDisplay?: "summarized" | "omitted" | undefined;
  /** Output length hint (OpenAI `verbosity` / `text.verbosity`). */
  readonly verbosity?: "low" | "medium" | "high" | undefined;
  /**
   * Request-level prompt-cache breakpoint (Anthropic top-level `cache_control`): a cache hint like
   * the per-block ones, left out by OpenAI encoders.
   */
  readonly cacheControl?: CacheControl | undefined;
  /** OpenAI prompt-cache routing hints; cache hints only, left out by the Anthropic encoder. */
  readonly promptCacheKey?: string | undefined;
  readonly promptCacheRetention?: "in_memory" | "24h" | undefined;
  /** End-user id for OpenAI's abuse tooling (`safety_identifier`, the successor of `user`). */
  readonly safetyIdentifier?: string | undefined;
  /** OpenAI `service_tier` (changes price: feature `openai_service_tier`). */
  readonly openAiServiceTier?: OpenAiServiceTier | undefined;
  /** Anthropic `service_tier` (capacity and price: feature `anthropic_service_tier`). */
  readonly anthropicServiceTier?: "auto" | "standard_only" | undefined;
  /** Anthropic `speed` (fast mode changes price: feature `speed`). */
  readonly speed?: "standard" | "fast" | undefined;
  /** Anthropic `inference_geo` (where inference runs; residency and price: feature `inference_geo`). */
  readonly inferenceGeo?: string | undefined;
  /** Top-k sampling (Anthropic only). */
  readonly topK?: number | undefined;
  /** Caller metadata; carried as data, never used for routing. */
  readonly metadata?: Readonly<Record<string, string>> | undefined;
  /** End-user id for the provider's abuse tooling. */
  readonly user?: string | undefined;
  readonly stream: boolean;
  /** Whether the client asked to receive usage in the stream (OpenAI `stream_options.include_usage`). */
  readonly streamUsage: boolean;
  /**
   * Token log-probabilities to ask the backend for, with this many alternatives per token
   * (OpenAI `logprobs` + `top_logprobs`). Set only by the gateway's own looper steps (a client
   * protocol's decoder never sets it), and sent only by encoders whose wire has the field.
   */
  readonly logprobs?: number | undefined;
}

/** One output token's log-probability and its most likely alternatives (OpenAI `logprobs.content[]`). */
export interface TokenLogprob {
  readonly token: string;
  readonly logprob: number;
  /** The most likely tokens at this position, the chosen one usually among them, most likely first. */
  readonly top: readonly { readonly token: string; readonly logprob: number }[];
}

/** Where a usage figure came from: the provider said so, or the gateway estimated it. */
export type UsageSource = "provider" | "estimated";

export interface Usage {
  /** ALL input tokens, cached reads and cache writes included (Anthropic reports them apart). */
  readonly inputTokens: number;
  readonly outputTokens: number;
  /** Input tokens read from the provider's prompt cache (a subset of inputTokens). */
  readonly cachedInputTokens?: number | undefined;
  /** Input tokens written to the provider's prompt cache (a subset of inputTokens; Anthropic). */
  readonly cacheWriteInputTokens?: number | undefined;
  /** Output tokens spent on reasoning (a subset of outputTokens). */
  readonly reasoningTokens?: number | undefined;
  readonly source: UsageSource;
}

/** Why generation stopped, in neutral terms each protocol maps exactly. */
export type StopReason = "end_turn" | "max_tokens" | "stop_sequence" | "tool_use" | "content_filter" | "other";

/** A buffered response as decoded from the provider. */
export interface NeutralResponse {
  /** Provider's response id (not shown to clients; the gateway stamps its own). */
  readonly providerId?: string | undefined;
  readonly text: string;
  /** The model's visible reasoning, when the provider returns it. */
  readonly reasoning?: readonly { readonly text: string; readonly signature?: string | undefined }[] | undefined;
  readonly toolCalls: readonly ToolCall[];
  readonly stopReason: StopReason;
  /** Which stop sequence matched, when the provider says (Anthropic). */
  readonly stopSequence?: string | undefined;
  /** Undefined when the provider reported none: unknown, never zero. */
  readonly usage: Usage | undefined;
  /** The output tokens' log-probabilities, when they were asked for and the backend returned them. */
  readonly logprobs?: readonly TokenLogprob[] | undefined;
}

/** Neutral stream events; a stream ends with `stop` then optional `usage`, or with `error`. */
export type NeutralEvent =
  | { readonly type: "start" }
  | { readonly type: "text"; readonly text: string }
  | { readonly type: "tool_call_start"; readonly index: number; readonly id: string; readonly name: string }
  | { readonly type: "tool_call_args"; readonly index: number; readonly delta: string }
  | { readonly type: "reasoning"; readonly text: string }
  /** Opaque integrity token closing a reasoning block (Anthropic `signature_delta`). */
  | { readonly type: "reasoning_signature"; readonly signature: string }
  | { readonly type: "stop"; readonly reason: StopReason; readonly stopSequence?: string | undefined }
  | { readonly type: "usage"; readonly usage: Usage }
  | { readonly type: "heartbeat" }
  | { readonly type: "error"; readonly code: "upstream_stream_cut" | "upstream_protocol_error" | "upstream_error" | "upstream_timeout" | "deadline_exceeded" | "gateway_draining" | "client_closed"; readonly message: string };
