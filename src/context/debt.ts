import type { LedgerHandle } from "../ledger/ledger-client.ts";
import type { LedgerAmount } from "../ledger/ledger.ts";
import type { UpstreamEvidence } from "../mcp/upstream-evidence.ts";
import type { Price } from "../publication/prices.ts";
import type { AttemptRecord } from "./attempt-record.ts";

/**
 * What a request or one of its attempts owes a budget ledger for a reservation it was granted.
 * The reserve phase registers it (`own` is for what is given back; `owe` for what is settled) the
 * moment the ledger grants the hold; the runner's settle step (src/settle/) pays it exactly once —
 * when its owner ends, or earlier once evidence proves what happened — reading only the facts
 * recorded here and on the owner's record.
 */
export type Debt = AttemptDebt | ToolCallDebt;

/** A model attempt's reservation: settled by the attempt's evidence and reported usage. */
export interface AttemptDebt {
  readonly kind: "attempt";
  readonly handle: LedgerHandle;
  /** The revision's price (undefined: unpriced, only tokens and requests are counted). */
  readonly price: Price | undefined;
  /** The publication's currency, named on settlements when the price names none. */
  readonly currency: string | undefined;
  /** Typical input tokens of the request, recorded beside an unknown settlement (computed only then). */
  readonly inputEstimate: () => number;
}

/** A priced or rate-limited MCP tool call's reservation: charged, released or held by what the call proved. */
export interface ToolCallDebt {
  readonly kind: "tool_call";
  readonly requestId: string;
  readonly handle: LedgerHandle;
  readonly amount: LedgerAmount;
  /** What the call is named in logs and metrics (`mcp:<server>/<tool>`). */
  readonly label: string;
  /** The charge on the request's MCP record: the settle step writes how it was settled into it. */
  readonly charge: McpCharge;
  /** The call was handed to `fetch`: from then on it may have run. */
  sent: boolean;
  /** What the call's last try proved (src/mcp/upstream-evidence.ts); undefined: nothing yet. */
  evidence: UpstreamEvidence | undefined;
}

/** The ledger's part of one MCP tool call (amounts in integer micro-units), as the request's record shows it. */
export interface McpCharge {
  /** The `mcp.prices` rule that priced or limited the call. */
  readonly rule: string;
  /** The reservation's id in the ledger (its attempt id). */
  readonly attemptId: string;
  readonly micros: number;
  readonly currency: string;
  readonly priceVersion: string | undefined;
  /** `charged` (the call ran), `released` (proven not run) or `pending_reconciliation` (outcome unknown). */
  settlement?: "charged" | "released" | "pending_reconciliation" | undefined;
}

/**
 * The runner's settle step as the terminal calls it: pays one debt whose owner ended (`owner`: the
 * attempt's final record, or undefined for a debt of the request itself). Never rejects; I/O it
 * starts is kept alive with `waitUntil`.
 */
export type SettleStep = (debt: Debt, owner: AttemptRecord | undefined, waitUntil: (p: Promise<unknown>) => void) => Promise<void>;

/** A registered debt: `paid` resolves once the settle step wrote it; `payNow` pays it before its owner ends (once). */
export interface Owed {
  readonly paid: Promise<void>;
  payNow(): void;
}
