import type { Rng } from "../deps/rng.ts";
import type { Evidence } from "../context/attempt-record.ts";

/** Where a request stands when an attempt has failed. */
export interface RetryState {
  /** Attempts made so far, the failed one included. */
  readonly attemptsMade: number;
  /** The plan's retry authority: attempts allowed in all, retries and fallbacks included. */
  readonly maxAttempts: number;
  /** The request's one absolute deadline (epoch ms); never moved by a retry. */
  readonly deadlineAt: number;
  readonly now: number;
  /** Whether the client has seen response headers or any byte (then nothing may be retried). */
  readonly clientCommitted: boolean;
}

export type RetryDecision =
  | { readonly action: "stop"; readonly reason: "success" | "not_known_zero" | "client_committed" | "attempts_exhausted" | "deadline" }
  | { readonly action: "retry"; readonly delayMs: number };

export interface BackoffPolicy {
  readonly baseMs: number;
  readonly maxMs: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { baseMs: 100, maxMs: 2000 };

/**
 * The one place a retry is decided (invariants 4–6): only on known-zero evidence, only before the
 * client saw anything, within the plan's attempt authority and before the single deadline. The
 * delay is full-jitter exponential backoff, at least the backend's `retry-after`; a retry whose
 * delay would end past the deadline is not made. Which backend or tier comes next is the
 * executor's narrowing, not a decision to retry.
 */
export function decideRetry(evidence: Evidence, state: RetryState, rng: Rng, backoff: BackoffPolicy = DEFAULT_BACKOFF): RetryDecision {
  if (evidence.class === "success") return { action: "stop", reason: "success" };
  if (evidence.class !== "known_zero") return { action: "stop", reason: "not_known_zero" };
  if (state.clientCommitted) return { action: "stop", reason: "client_committed" };
  if (state.attemptsMade >= state.maxAttempts) return { action: "stop", reason: "attempts_exhausted" };
  const cap = Math.min(backoff.maxMs, backoff.baseMs * 2 ** Math.max(0, state.attemptsMade - 1));
  const jittered = Math.floor(rng.next() * cap);
  const delayMs = Math.max(jittered, (evidence.retryAfterSeconds ?? 0) * 1000);
  if (state.now + delayMs >= state.deadlineAt) return { action: "stop", reason: "deadline" };
  return { action: "retry", delayMs };
}
