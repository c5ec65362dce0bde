import { GatewayError } from "../errors/gateway-error.ts";
import type { AttemptRecord } from "../invoker/attempt.ts";
import type { AttemptCharge, AttemptCharger } from "../invoker/attempt-charges.ts";
import type { BudgetLedgerClient, LedgerHandle } from "../ledger/ledger-client.ts";
import { MAX_LEDGER_AMOUNT, type LedgerAmount, type ReserveRefusal, type ReserveResult } from "../ledger/ledger.ts";
import type { PlannedModel } from "../plan/dispatch-plan.ts";
import type { EntrypointBudget, PrincipalBudget } from "./budget-policy.ts";
import { actualCost, usageDetail, worstCase, type Price } from "./prices.ts";

/** What one request's billing needs; built per request by the adapter. */
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
  /** Typical estimate of the input tokens, recorded when usage is unknown (computed only then). */
  readonly inputEstimate: () => number;
  /** The output cap every attempt is sent with. */
  readonly outputCap: number;
  /** Keeps the isolate alive for settlement after the response. */
  readonly waitUntil: (p: Promise<unknown>) => void;
  readonly log: (event: Readonly<Record<string, unknown>>) => void;
  /** Settlement attempts before the lease expiry is left to move the hold to reconciliation. */
  readonly settleTries?: number;
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
 * One request's attempts against its tenant's ledger. Every attempt reserves its own priced worst
 * case before it is sent; its finalizer then settles it exactly once:
 * - known-zero or refused by the provider (4xx): nothing was done, the hold is released;
 * - usage reported: settled at the actual cost, the excess released;
 * - usage missing (cut, cancel, 5xx, timeout): settled as unknown, the hold kept for
 *   reconciliation with the gateway's estimate recorded beside it.
 */
export class RequestBilling implements AttemptCharger {
  readonly #init: RequestBillingInit;
  /** Settlements of this request's attempts (never rejects: failures are logged). */
  readonly #settling: Promise<void>[] = [];
  /** True once a soft route went ahead without the ledger. */
  unchecked = false;
  /** The last granted reservation's view of what remains (for keys that may see it). */
  lastGrant: Extract<ReserveResult, { ok: true }> | undefined;

  constructor(init: RequestBillingInit) {
    this.#init = init;
  }

  async reserve(attemptId: string, model: PlannedModel, first: boolean): Promise<AttemptCharge> {
    const init = this.#init;
    // A retry follows a failed attempt whose release may still be on its way: wait for it, so
    // the request does not compete with its own earlier hold near a limit.
    if (this.#settling.length > 0) await Promise.all(this.#settling);
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
        meta: { requestId: init.requestId, model: `${model.logicalModel}@${model.revision}`, ...(price ? { priceVersion: price.version } : {}) },
      });
    } catch (err) {
      if (init.policy.mode === "soft") {
        this.unchecked = true;
        init.log({ kind: "ledger_unchecked", requestId: init.requestId, attemptId, error: String(err) });
        return NOT_CHARGED;
      }
      throw new GatewayError("budget_unavailable", "The budget ledger could not be reached, so the request was not sent. Retry later.", { cause: err, retryAfterSeconds: 1 });
    }
    // A malformed reservation is the gateway's bug, not a refusal or an unreachable ledger: never "unchecked".
    if (!reserved.result.ok && reserved.result.reason === "invalid_argument") throw new GatewayError("internal_error", "The gateway failed to check the budget.", { cause: reserved.result.message });
    if (!reserved.result.ok) throw refusalError(reserved.result);
    this.lastGrant = reserved.result;
    let done = false;
    return {
      finish: (attempt) => {
        if (done) return;
        done = true;
        const settled = this.#settle(reserved.handle, attempt, price);
        this.#settling.push(settled);
        init.waitUntil(settled);
      },
    };
  }

  async #settle(handle: LedgerHandle, a: Readonly<AttemptRecord>, price: Price | undefined): Promise<void> {
    const { ledger, log } = this.#init;
    const tries = this.#init.settleTries ?? 3;
    const evidence = a.evidence?.class;
    const op =
      evidence === "known_zero" || evidence === "client_error"
        ? () => ledger.release(handle, a.id)
        : a.usage !== undefined && a.usage.source === "provider"
          ? () => ledger.settle(handle, a.id, actualCost(price, a.usage!), { usage: usageDetail(a.usage!) })
          : () => ledger.settle(handle, a.id, "unknown", { estimate: this.#estimate(a, price) });
    for (let i = 1; ; i++) {
      try {
        const r = await op();
        if (!r.ok) log({ kind: "ledger_settle_refused", requestId: a.requestId, attemptId: a.id, reason: r.reason, ...(r.reason === "invalid_argument" ? { error: r.message } : { state: r.state }) });
        else if ("settlement" in r && (r.settlement.overrun.micros > 0 || r.settlement.overrun.tokens > 0)) {
          // Actual above the worst case means a price or cap below the provider's: flag the config.
          log({ kind: "ledger_overrun", requestId: a.requestId, attemptId: a.id, model: `${a.logicalModel}@${a.modelRevision}`, priceVersion: price?.version, overrun: r.settlement.overrun });
        }
        return;
      } catch (err) {
        if (i >= tries) {
          // The hold stays in the ledger; its lease expiry moves it to reconciliation.
          log({ kind: "ledger_settle_failed", requestId: a.requestId, attemptId: a.id, error: String(err) });
          return;
        }
        await new Promise((r) => setTimeout(r, 50 * i));
      }
    }
  }

  /** What the attempt probably cost when the provider did not say: typical input + output seen. */
  #estimate(a: Readonly<AttemptRecord>, price: Price | undefined): LedgerAmount {
    const output = Math.ceil((a.outputChars ?? 0) / 4);
    return actualCost(price, { inputTokens: this.#init.inputEstimate(), outputTokens: output, source: "estimated" });
  }
}

const NOT_CHARGED: AttemptCharge = { finish: () => {} };
