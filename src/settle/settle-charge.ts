import type { AttemptCharge, AttemptRecord } from "../context/attempt-record.ts";
import type { BudgetLedgerClient, LedgerHandle, QueuedSettlement, SettleOptions } from "../ledger/ledger-client.ts";
import type { LedgerAmount, ReleaseResult, SettleResult } from "../ledger/ledger.ts";
import { actualCost, usageDetail, type Price } from "../publication/prices.ts";

/** What settling an attempt's reservation needs. */
export interface SettlementDeps {
  readonly ledger: BudgetLedgerClient;
  /** Typical estimate of the request's input tokens, recorded when usage is unknown (computed only then). */
  readonly inputEstimate: () => number;
  readonly log: (event: Readonly<Record<string, unknown>>) => void;
  /** Settlement attempts before the lease expiry is left to move the hold to reconciliation. */
  readonly settleTries?: number;
  /** Keeps the isolate alive for a settlement written after the response. */
  readonly waitUntil: (p: Promise<unknown>) => void;
  /** Told how each settlement ended, for metrics (the ledger stays the authority on money). */
  readonly onSettlement?: ((s: SettlementObservation) => void) | undefined;
  /** The currency of the settled amounts, when the publication names one. */
  readonly currency?: string | undefined;
}

/** How one attempt's settlement ended, as metrics count it. */
export interface SettlementObservation {
  readonly result: "settled" | "released" | "pending_reconciliation" | "refused" | "failed";
  readonly model: string;
  /** The actual cost booked, for a settled attempt with reported usage. */
  readonly costMicros?: number | undefined;
  readonly currency?: string | undefined;
  readonly overrun: boolean;
}

/** What the attempt probably cost when the provider did not say: typical input + output seen. */
function estimate(deps: SettlementDeps, a: Readonly<AttemptRecord>, price: Price | undefined): LedgerAmount {
  const output = Math.ceil((a.outputChars ?? 0) / 4);
  return actualCost(price, { inputTokens: deps.inputEstimate(), outputTokens: output, source: "estimated" });
}

/**
 * The settle phase for one reserved attempt, run by its end (never rejects: failures are logged):
 * - known-zero or refused by the provider (4xx): nothing was done, the hold is released;
 * - usage reported: settled at the actual cost, the excess released, an overrun flagged;
 * - usage missing (cut, cancel, 5xx, timeout): settled as unknown, the hold kept for
 *   reconciliation with the gateway's estimate recorded beside it.
 */
export async function settleCharge(deps: SettlementDeps, handle: LedgerHandle, a: Readonly<AttemptRecord>, price: Price | undefined, onBooked?: (charge: AttemptCharge) => void): Promise<void> {
  const { ledger } = deps;
  const evidence = a.evidence?.class;
  const usage = a.usage;
  const book = (usage: AttemptCharge["usage"], costMicros: number) => onBooked?.({ usage, costMicros, currency: price?.currency ?? deps.currency });
  let op: (opts: SettleOptions) => Promise<SettleResult | ReleaseResult | QueuedSettlement>;
  if (evidence === "known_zero" || evidence === "client_error") {
    book("none", 0);
    op = (opts) => ledger.release(handle, a.id, opts);
  } else if (usage !== undefined && usage.source === "provider") {
    const actual = actualCost(price, usage);
    book("known", actual.micros);
    op = (opts) => ledger.settle(handle, a.id, actual, { usage: usageDetail(usage) }, opts);
  } else {
    book("unknown", 0);
    op = (opts) => ledger.settle(handle, a.id, "unknown", { estimate: estimate(deps, a, price) }, opts);
  }
  await writeSettlement(deps, { requestId: a.requestId, attemptId: a.id, model: a.logicalModel, label: `${a.logicalModel}@${a.modelRevision}`, priceVersion: price?.version }, op);
}

/** Who a settlement belongs to, for its logs and metrics. */
export interface SettlementIds {
  readonly requestId: string;
  readonly attemptId: string;
  /** The metrics' model label. */
  readonly model: string;
  /** What an overrun log names (`model@revision`, or an MCP server and tool). */
  readonly label: string;
  readonly priceVersion: string | undefined;
}

/**
 * Writes one settlement or release (`op`) with a few tries, and reports how it ended to the logs
 * and metrics (never rejects). Shared by model attempts and priced tool calls.
 */
export async function writeSettlement(
  deps: SettlementDeps,
  ids: SettlementIds,
  op: (opts: SettleOptions) => Promise<SettleResult | ReleaseResult | QueuedSettlement>,
): Promise<void> {
  const { log } = deps;
  const tries = deps.settleTries ?? 3;
  const observe = (o: Omit<SettlementObservation, "model" | "currency">) => {
    try {
      deps.onSettlement?.({ ...o, model: ids.model, currency: deps.currency });
    } catch {
      // Metrics never fail a settlement.
    }
  };
  const report = (r: SettleResult | ReleaseResult | { readonly error: unknown }) => {
    if ("error" in r) observe({ result: "failed", overrun: false });
    else if (!r.ok) observe({ result: "refused", overrun: false });
    else if (r.state === "released") observe({ result: "released", overrun: false });
    else if ("settlement" in r) {
      const overrun = r.settlement.overrun.micros > 0 || r.settlement.overrun.tokens > 0;
      if (r.state === "settled") observe({ result: "settled", costMicros: r.settlement.actual === "unknown" ? undefined : r.settlement.actual.micros, overrun });
      else observe({ result: "pending_reconciliation", overrun });
    }
    if ("error" in r) {
      // The hold stays in the ledger; its lease expiry moves it to reconciliation.
      log({ kind: "ledger_settle_failed", requestId: ids.requestId, attemptId: ids.attemptId, error: String(r.error) });
      return;
    }
    if (!r.ok) log({ kind: "ledger_settle_refused", requestId: ids.requestId, attemptId: ids.attemptId, reason: r.reason, ...(r.reason === "invalid_argument" ? { error: r.message } : { state: r.state }) });
    else if ("settlement" in r && (r.settlement.overrun.micros > 0 || r.settlement.overrun.tokens > 0)) {
      // Actual above the worst case means a price or cap below the provider's: flag the config.
      log({ kind: "ledger_overrun", requestId: ids.requestId, attemptId: ids.attemptId, model: ids.label, priceVersion: ids.priceVersion, overrun: r.settlement.overrun });
    }
  };
  const opts = { keepAlive: deps.waitUntil, report };
  for (let i = 1; ; i++) {
    try {
      const r = await op(opts);
      // A batching client reports the answer itself, when its batch is written.
      if (!(r.ok && r.state === "queued")) report(r);
      return;
    } catch (err) {
      if (i >= tries) {
        report({ error: err });
        return;
      }
      await new Promise((r) => setTimeout(r, 50 * i));
    }
  }
}
