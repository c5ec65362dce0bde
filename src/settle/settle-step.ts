import type { AttemptRecord } from "../context/attempt-record.ts";
import type { Debt, SettleStep, ToolCallDebt } from "../context/debt.ts";
import type { BudgetLedgerClient } from "../ledger/ledger-client.ts";
import { provesNotRun } from "../mcp/upstream-evidence.ts";
import { settleCharge, writeSettlement, type SettlementDeps, type SettlementObservation } from "./settle-charge.ts";

/** What the settle step writes with, built once per isolate. */
export interface SettleStepDeps {
  readonly ledger: BudgetLedgerClient;
  readonly log: (event: Readonly<Record<string, unknown>>) => void;
  /** Told how each settlement ended (metrics); the ledger stays the authority on money. */
  readonly onSettlement?: ((s: SettlementObservation) => void) | undefined;
}

/**
 * The settle phase as the runner runs it: the terminal hands it each debt whose owner ended (an
 * attempt's reservation when the attempt ends, a tool call's when its request ends or its evidence
 * arrives), and it settles, releases or holds it for reconciliation by the evidence alone:
 * - a model attempt: by its evidence class and reported usage (see {@link settleCharge});
 * - a tool call: never sent, or proven not run → released; answered → charged its price; sent
 *   with no proof either way → held in full for reconciliation, never zero, never refunded.
 */
export function settleStep(deps: SettleStepDeps): SettleStep {
  return (debt: Debt, owner: AttemptRecord | undefined, waitUntil: (p: Promise<unknown>) => void): Promise<void> => {
    switch (debt.kind) {
      case "attempt": {
        if (owner === undefined) throw new Error("an attempt's debt is paid with the attempt's record");
        const settlement: SettlementDeps = { ledger: deps.ledger, log: deps.log, onSettlement: deps.onSettlement, waitUntil, currency: debt.currency, inputEstimate: debt.inputEstimate };
        // What the settlement books goes on the attempt's record before the record is reported.
        return settleCharge(settlement, debt.handle, owner, debt.price, (charge) => {
          owner.charge = charge;
        });
      }
      case "tool_call":
        return settleToolCall({ ledger: deps.ledger, log: deps.log, onSettlement: deps.onSettlement, waitUntil, currency: debt.charge.currency, inputEstimate: () => 0 }, debt);
    }
  };
}

/** How a tool call's reservation is settled, from whether it was sent and what its last try proved. */
export function toolCallOutcome(debt: Pick<ToolCallDebt, "sent" | "evidence">): "released" | "charged" | "pending_reconciliation" {
  if (!debt.sent || (debt.evidence !== undefined && provesNotRun(debt.evidence))) return "released";
  return debt.evidence === "answered" ? "charged" : "pending_reconciliation";
}

/** Settles one tool call's reservation (never rejects), and records how on the request's MCP charge. */
function settleToolCall(deps: SettlementDeps, debt: ToolCallDebt): Promise<void> {
  const { ledger } = deps;
  const { handle, charge, amount, label, requestId } = debt;
  const outcome = toolCallOutcome(debt);
  charge.settlement = outcome;
  return writeSettlement(deps, { requestId, attemptId: charge.attemptId, model: label, label, priceVersion: charge.priceVersion }, (opts) =>
    outcome === "released"
      ? ledger.release(handle, charge.attemptId, opts)
      : outcome === "charged"
        ? ledger.settle(handle, charge.attemptId, amount, undefined, opts)
        : ledger.settle(handle, charge.attemptId, "unknown", { estimate: amount }, opts),
  );
}
