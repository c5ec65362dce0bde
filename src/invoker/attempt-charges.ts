import type { PlannedModel } from "../plan/dispatch-plan.ts";
import type { AttemptRecord } from "./attempt.ts";

/** One reserved attempt: told exactly once how the attempt ended, so it can be settled. */
export interface AttemptCharge {
  finish(attempt: Readonly<AttemptRecord>): void;
}

/**
 * The budget ledger as the executor sees it: every attempt reserves its own worst case before it is
 * sent (retries and fallbacks included) and is settled from its finalizer. Implemented outside the
 * invoker, so attempts know nothing of prices or scopes.
 */
export interface AttemptCharger {
  /**
   * Reserves an attempt about to be sent. `first` is the request's first attempt (request-rate
   * limits count requests, not retries).
   *
   * @throws GatewayError when a budget refuses, or when the ledger cannot be reached on a strict route.
   */
  reserve(attemptId: string, model: PlannedModel, first: boolean): Promise<AttemptCharge>;
}
