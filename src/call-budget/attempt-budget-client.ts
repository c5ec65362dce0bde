import { MAX_ATTEMPT_BUDGET, type AttemptBudgetView, type ConsumeResult } from "./attempt-budget.ts";

/** What a request announces for its call: the caller's remaining budget and absolute deadline. */
export interface CallAnnouncement {
  /** The caller's remaining attempt budget (integer, 0..1000). */
  readonly initialBudget: number;
  /** The caller's absolute deadline, epoch ms. */
  readonly deadlineAt: number;
}

/**
 * One call id's budget, as the AttemptBudget Durable Object serves it over RPC (one object per call
 * id, addressed by name). The object uses its own clock for every decision; the caller's clock is
 * never trusted for expiry. An invalid argument is rejected with a RangeError.
 */
export interface AttemptBudgetRpc {
  consume(callId: string, announced: CallAnnouncement): Promise<ConsumeResult>;
  peek(callId: string): Promise<AttemptBudgetView | undefined>;
}

/** All calls' budgets, keyed by call id: what the request path talks to. */
export interface AttemptBudgetClient {
  /** Takes one attempt from the call's budget (creating it from `announced` on first use). */
  consume(callId: string, announced: CallAnnouncement): Promise<ConsumeResult>;
  peek(callId: string): Promise<AttemptBudgetView | undefined>;
}

/**
 * An {@link AttemptBudgetClient} over per-call RPC objects. `objectFor` is called on every call,
 * because a Durable Object stub is an I/O object bound to the request that made it (in the Worker:
 * `(id) => env.ATTEMPT_BUDGET.getByName(id)`, which is cheap).
 */
export function attemptBudgetClient(objectFor: (callId: string) => AttemptBudgetRpc): AttemptBudgetClient {
  return {
    consume: async (callId, announced) => await objectFor(callId).consume(callId, { initialBudget: announced.initialBudget, deadlineAt: announced.deadlineAt }),
    peek: async (callId) => await objectFor(callId).peek(callId),
  };
}

export const CALL_ID_HEADER = "x-sluice-call-id";
export const ATTEMPT_BUDGET_HEADER = "x-sluice-attempt-budget";
export const DEADLINE_HEADER = "x-sluice-deadline";

/** Furthest a caller's deadline may lie ahead of the gateway's clock. */
export const MAX_DEADLINE_AHEAD_MS = 24 * 60 * 60 * 1000;

/** A request's call budget, from its headers. */
export interface CallBudget {
  readonly callId: string;
  readonly budget: number;
  /** Absolute deadline, epoch ms. */
  readonly deadlineAt: number;
}

const CALL_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const DIGITS = /^[0-9]+$/;

/**
 * Reads the three call-budget headers. All three or none: none → `undefined` (the request has no
 * cross-layer budget); a partial or invalid set → `{ error }` naming the header and what is wrong
 * (never echoing the value), for a 400 `invalid_request`.
 *
 * - `x-sluice-call-id`: 1–128 characters of `[A-Za-z0-9._:-]`.
 * - `x-sluice-attempt-budget`: a decimal integer 0..1000 (digits only: no sign, fraction or exponent).
 * - `x-sluice-deadline`: epoch milliseconds, digits only, later than `now` and at most 24 h ahead.
 *
 * A header sent twice arrives joined with ", " and fails its format check.
 */
export function parseCallBudget(headers: Headers, now: number): CallBudget | undefined | { error: string } {
  const callId = headers.get(CALL_ID_HEADER);
  const budget = headers.get(ATTEMPT_BUDGET_HEADER);
  const deadline = headers.get(DEADLINE_HEADER);
  if (callId === null && budget === null && deadline === null) return undefined;
  const missing = [
    [CALL_ID_HEADER, callId],
    [ATTEMPT_BUDGET_HEADER, budget],
    [DEADLINE_HEADER, deadline],
  ]
    .filter(([, v]) => v === null)
    .map(([name]) => name);
  if (missing.length > 0) return { error: `missing header ${missing.join(" and ")}: ${CALL_ID_HEADER}, ${ATTEMPT_BUDGET_HEADER} and ${DEADLINE_HEADER} must be sent together` };

  if (!CALL_ID.test(callId!)) return { error: `${CALL_ID_HEADER} must be 1-128 characters of A-Z a-z 0-9 . _ : -` };

  if (!DIGITS.test(budget!) || budget!.length > 4 || Number(budget) > MAX_ATTEMPT_BUDGET) {
    return { error: `${ATTEMPT_BUDGET_HEADER} must be an integer from 0 to ${MAX_ATTEMPT_BUDGET}` };
  }

  if (!DIGITS.test(deadline!) || deadline!.length > 16) return { error: `${DEADLINE_HEADER} must be an absolute time in epoch milliseconds (digits only)` };
  const deadlineAt = Number(deadline);
  if (deadlineAt <= now) return { error: `${DEADLINE_HEADER} is not in the future` };
  if (deadlineAt - now > MAX_DEADLINE_AHEAD_MS) return { error: `${DEADLINE_HEADER} is more than 24 h ahead` };

  return { callId: callId!, budget: Number(budget), deadlineAt };
}
