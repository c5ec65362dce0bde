import { GatewayError } from "../errors/gateway-error.ts";
import type { AttemptScope } from "../context/request-context.ts";
import type { BudgetLedgerClient, LedgerHandle } from "../ledger/ledger-client.ts";
import { MAX_LEDGER_AMOUNT, type ReserveRefusal, type ReserveResult } from "../ledger/ledger.ts";
import type { PlannedModel } from "../decide/dispatch-plan.ts";
import type { EntrypointBudget, PrincipalBudget } from "../publication/budgets.ts";
import { worstCase, type Price } from "../publication/prices.ts";

/**
 * The budget ledger as the invoke phase sees it: every attempt reserves its own worst case before
 * it is sent (retries and fallbacks included). The reserve phase implements it, so attempts know
 * nothing of prices or scopes.
 */
export interface AttemptCharger {
  /**
   * Reserves the attempt's worst case and registers what the attempt then owes (its debt, paid by
   * the runner's settle step when the attempt ends). `first` is the request's first attempt
   * (request-rate limits count requests, not retries).
   *
   * @throws GatewayError when a budget refuses, or when the ledger cannot be reached on a strict route.
   */
  reserve(attempt: AttemptScope, model: PlannedModel, first: boolean): Promise<void>;
}

/** What one request's billing needs; built per request by the reserve phase. */
export interface RequestBillingInit {
  readonly ledger: BudgetLedgerClient;
  readonly budget: PrincipalBudget;
  readonly policy: EntrypointBudget;
  readonly price: (logicalModel: string, revision: number) => Price | undefined;
  /** The publication's one currency of prices and budgets, when it names one. */
  readonly currency: string | undefined;
  readonly requestId: string;
  /** Upper bound on the request's input tokens (reservations). */
  readonly inputBound: number;
  /** The output cap every attempt is sent with. */
  readonly outputCap: number;
  /** Typical estimate of the request's input tokens, recorded when an attempt's usage is unknown. */
  readonly inputEstimate: () => number;
  /** Keeps the isolate alive for reservations' I/O (a leasing client's background work). */
  readonly waitUntil: (p: Promise<unknown>) => void;
  readonly log: (event: Readonly<Record<string, unknown>>) => void;
}

/** The figures a refusal shows the caller: its own scope name, the metric and when to retry. */
export interface BudgetRefusalDetail {
  readonly scope: string;
  readonly metric: string;
  readonly reason: string;
  readonly retryAfterSeconds?: number;
}

/** A ledger refusal as the client's error; the message names the caller's own scope. */
export function refusalError(r: ReserveRefusal): GatewayError {
  const retryAfterSeconds = r.retryAfterMs === undefined ? undefined : Math.max(1, Math.ceil(r.retryAfterMs / 1000));
  const detail: BudgetRefusalDetail = { scope: r.scope, metric: r.metric, reason: r.reason, ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}) };
  const opts = { retryAfterSeconds, details: [detail] };
  if ((r.reason === "money_budget_exceeded" || r.reason === "token_limit_exceeded") && r.requested > r.limit) {
    // No period will ever admit it: a retry-after would have the client retry forever.
    const what = r.reason === "token_limit_exceeded" ? "token limit" : "budget";
    return new GatewayError("invalid_request", `This request's worst case is larger than the whole ${what} of ${r.scope}. Lower its output token cap.`, { details: [detail] });
  }
  switch (r.reason) {
    case "money_budget_exceeded":
      return new GatewayError("budget_exceeded", `The budget of ${r.scope} for this period does not cover this request.`, opts);
    case "token_limit_exceeded":
      return new GatewayError("token_limit_exceeded", `The token limit of ${r.scope} for this window does not cover this request.`, opts);
    case "request_rate_exceeded":
      return new GatewayError("request_rate_exceeded", `The request rate limit of ${r.scope} is reached.`, opts);
    case "balance_exhausted":
      return new GatewayError("balance_exhausted", `The prepaid balance of ${r.scope} does not cover this request.`, { details: [detail] });
    case "currency_mismatch":
      // The publication's currencies are checked at load; reaching this is a gateway fault.
      return new GatewayError("internal_error", "The gateway failed to price the request.", { cause: `currency mismatch at ${r.scope}` });
  }
}

/**
 * One request's attempts against its tenant's ledger: every attempt reserves its own priced worst
 * case right before it is sent, and registers the debt on the attempt, so the runner's settle step
 * (src/settle/) settles it exactly once when the attempt ends, whichever way it ends.
 */
export class RequestBilling implements AttemptCharger {
  readonly #init: RequestBillingInit;
  /** Payments of this request's attempts' debts (never reject: failures are logged). */
  readonly #settling: Promise<void>[] = [];
  /** True once a soft route went ahead without the ledger. */
  unchecked = false;
  /** The last granted reservation's view of what remains (for keys that may see it). */
  lastGrant: Extract<ReserveResult, { ok: true }> | undefined;

  constructor(init: RequestBillingInit) {
    this.#init = init;
  }

  async reserve(attempt: AttemptScope, model: PlannedModel, first: boolean): Promise<void> {
    const init = this.#init;
    const attemptId = attempt.record.id;
    // A retry follows a failed attempt whose release may still be on its way: wait for it, so
    // the request does not compete with its own earlier hold near a limit.
    if (this.#settling.length > 0) {
      await Promise.all(this.#settling);
      // A batching ledger client has only queued it: write it before competing with it.
      await init.ledger.settleNow(false);
    }
    const price = init.price(model.logicalModel, model.revision);
    const amount = worstCase(price, init.inputBound, init.outputCap);
    if (amount.tokens > MAX_LEDGER_AMOUNT || amount.micros > MAX_LEDGER_AMOUNT) {
      // No budget can hold it, and the ledger refuses such amounts as malformed: the client's
      // cap is the problem, not the ledger.
      throw new GatewayError("invalid_request", "The requested output token cap is too large to be budgeted. Set a smaller maximum.");
    }
    let reserved: { result: ReserveResult; handle: LedgerHandle };
    try {
      reserved = await init.ledger.reserve(attemptId, {
        scopes: init.budget.scopes,
        // Unpriced revisions reserve no money; the currency only has to match the budgets'.
        currency: price?.currency ?? init.currency ?? "USD",
        amount,
        countsRequest: first,
        leaseMs: init.budget.leaseMs,
        retentionMs: init.budget.retentionMs,
        historyMs: init.budget.historyMs,
        meta: { requestId: init.requestId, model: `${model.logicalModel}@${model.revision}`, ...(price ? { priceVersion: price.version } : {}) },
      }, init.waitUntil);
    } catch (err) {
      if (init.policy.mode === "soft") {
        this.unchecked = true;
        init.log({ kind: "ledger_unchecked", requestId: init.requestId, attemptId, error: String(err) });
        return;
      }
      throw new GatewayError("budget_unavailable", "The budget ledger could not be reached, so the request was not sent. Retry later.", { cause: err, retryAfterSeconds: 1 });
    }
    // A malformed reservation is the gateway's bug, not a refusal or an unreachable ledger: never "unchecked".
    if (!reserved.result.ok && reserved.result.reason === "invalid_argument") throw new GatewayError("internal_error", "The gateway failed to check the budget.", { cause: reserved.result.message });
    if (!reserved.result.ok) throw refusalError(reserved.result);
    this.lastGrant = reserved.result;
    // Taken: from now on the attempt owes it, and its end settles it (or releases it when nothing was sent).
    const owed = attempt.owe({ kind: "attempt", handle: reserved.handle, price, currency: init.currency, inputEstimate: init.inputEstimate });
    this.#settling.push(owed.paid);
  }
}
