import { z } from "zod";

const modelId = z.string().regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, "ids are 1-64 lower-case letters, digits, '.', '_' or '-'");

/**
 * What one algorithm run may spend, all required: the engine, not the algorithm, holds each, and
 * exhausting any fails the request closed with `looper_bound_exceeded` naming the bound.
 */
export const looperBoundsSchema = z.strictObject({
  /** Sub-calls of one run, verifier calls included. */
  maxCalls: z.number().int().min(1).max(16),
  /** Sub-calls in flight at once. */
  maxParallel: z.number().int().min(1).max(16),
  /** Nesting: a sub-call runs no algorithm of its own unless this allows it (1: none). */
  maxDepth: z.number().int().min(1).max(4),
  /** Input and output tokens of all sub-calls together, each step's worst case checked before it is sent. */
  maxTokens: z.number().int().min(1).max(10_000_000),
  /** Money of all sub-calls together in the publication's currency's micro-units, worst case checked before each step. */
  maxCostMicros: z.number().int().min(0).max(1_000_000_000_000),
  /** Wall time of the run from its start; the request's own deadline still applies. */
  maxTimeMs: z.number().int().min(1).max(3_600_000),
});

export type LooperBounds = z.infer<typeof looperBoundsSchema>;

/**
 * Plugins (publication.yaml `plugins:`, by name) that run on every sub-call of the run, around that
 * one model call: a step's `request_safe` plugins on the request the step sends, its
 * `stream_event_safe` plugins on the step's answer. The decision's own `plugins` still run once, on
 * the client's request and the final answer.
 */
const perModelCall = z.array(modelId).max(16).default([]);

/**
 * A cascade: the decision's tiers are its steps, cheapest first. Each step's answer is scored and
 * accepted at `threshold` or above, else the next step runs; the last step's answer is accepted as
 * it is. `avg_logprob`: the mean log-probability of the answer's tokens (at most 0); `margin`: the
 * mean gap between each token's log-probability and its best alternative's (at least 0); both need
 * the `logprobs` capability on every model of the cascade. `verify`: a verifier model is asked, with
 * the published `prompt`, for a JSON `{"score": <0..1>}` about the answer.
 */
export const cascadeSchema = z.strictObject({
  kind: z.literal("cascade"),
  score: z.enum(["avg_logprob", "margin", "verify"]),
  threshold: z.number().min(-100).max(100),
  /** `verify` only: the verifier model and its prompt (with `{{question}}` and `{{answer}}`). */
  verifier: z.strictObject({ model: modelId, prompt: z.string().min(1).max(8192) }).optional(),
  bounds: looperBoundsSchema,
  perModelCall,
});

/**
 * A panel: the decision's tiers are its members, asked in parallel (`bounds.maxParallel` at a
 * time); once `quorum` answered, the members still running are stopped and the arbiter writes the
 * final answer from the quorum's answers with the published `prompt` (`{{question}}` and
 * `{{answers}}` filled in).
 */
export const panelSchema = z.strictObject({
  kind: z.literal("panel"),
  quorum: z.number().int().min(1).max(16),
  arbiter: z.strictObject({ model: modelId, prompt: z.string().min(1).max(8192) }),
  bounds: looperBoundsSchema,
  perModelCall,
});

/** A decision's algorithm (`algorithm:` beside `models:`). */
export const algorithmSchema = z.discriminatedUnion("kind", [cascadeSchema, panelSchema]);

export type AlgorithmConfig = z.infer<typeof algorithmSchema>;
export type CascadeConfig = z.infer<typeof cascadeSchema>;
export type PanelConfig = z.infer<typeof panelSchema>;
