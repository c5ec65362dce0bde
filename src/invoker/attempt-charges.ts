import type { AttemptScope } from "../context/request-context.ts";
import type { PlannedModel } from "../decide/dispatch-plan.ts";

/**
 * The budget ledger as the invoke phase sees it: every attempt reserves its own worst case before
 * it is sent (retries and fallbacks included). Implemented by the reserve phase, so attempts know
 * nothing of prices or scopes.
 */
export interface AttemptCharger {
  /**
   * Reserves the attempt's worst case and registers its settlement on the attempt, to run when the
   * attempt ends. `first` is the request's first attempt (request-rate limits count requests, not
   * retries).
   *
   * @throws GatewayError when a budget refuses, or when the ledger cannot be reached on a strict route.
   */
  reserve(attempt: AttemptScope, model: PlannedModel, first: boolean): Promise<void>;
}
