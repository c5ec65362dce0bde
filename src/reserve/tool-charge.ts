import { newAttemptId } from "../context/attempt-record.ts";
import type { McpCharge, ToolCallDebt } from "../context/debt.ts";
import type { RequestContext } from "../context/request-context.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { LedgerHandle } from "../ledger/ledger-client.ts";
import { DEFAULT_LEASE_MS, type LedgerAmount, type ReserveResult, type ScopeRef } from "../ledger/ledger.ts";
import type { UpstreamEvidence } from "../mcp/upstream-evidence.ts";
import { scopeName } from "../publication/budgets.ts";
import type { CompiledPublication } from "../publication/compile-publication.ts";
import type { Principal } from "../publication/principal.ts";
import type { ToolPrices, ToolPricing } from "../publication/tool-prices.ts";
import { refusalError } from "./request-charges.ts";
import type { ReserveDeps } from "./reserve-phase.ts";
import { governTask, taskFigures, type TaskFigure } from "./task-scope.ts";

/** What the invoke phase tells a tool call's charge: hand these to the upstream request. */
export interface ToolCallTrack {
  /** The call is handed to `fetch`: from now on it may run. */
  readonly onSent: () => void;
  /** What the call's last try proves (see upstream-evidence.ts). */
  readonly onEvidence: (e: UpstreamEvidence) => void;
  /** The task's spend and remaining cap after this call's reservation, when the call names a capped task. */
  readonly task?: { readonly taskId: string; readonly figures: readonly TaskFigure[] } | undefined;
}

/** The ledger scope of one key's calls of the tools one price rule matches (its rate limit). */
export function toolRateScope(keyId: string, rule: string): string {
  return `${scopeName.key(keyId)}/tools:${rule}`;
}

/** The ledger scope of one key's calls of the agents one `a2a.prices` rule matches (its rate limit). */
export function agentRateScope(keyId: string, rule: string): string {
  return `${scopeName.key(keyId)}/agents:${rule}`;
}

/**
 * The reserve phase of a `tools/call`: when a rule of `mcp.prices` prices or rate-limits the tool,
 * its price is reserved on the caller's budget path — the scopes a model request of the same
 * principal reserves against, plus, for a rate limit, a scope of the key and rule holding the
 * request bucket — before anything is sent. A tenant that keeps no budgets is not charged (as its
 * model requests are not); a rate limit still applies to it, on its tenant and key scopes. A
 * refusal throws the error a model request gets (`budget_exceeded`, `request_rate_exceeded`,
 * `balance_exhausted`; `budget_unavailable` when the ledger cannot be reached). Undefined: the
 * tool is free and unlimited, nothing is reserved.
 *
 * The reservation is the request's debt, so the runner's settle step (src/settle/) settles it
 * exactly once whichever way the request ends; it is paid earlier, as soon as the upstream answer's
 * evidence proves what happened (`onEvidence`):
 * - never sent, or proven not run (a refusal before running, see upstream-evidence.ts): released;
 * - answered (a result, an `isError` result, an error of the server's own): charged the price;
 * - sent with no proof either way (timeout, cut connection, a client that left): held in full
 *   for reconciliation, with the price recorded as the estimate — never zero, never refunded.
 */
export async function reserveToolCall(
  deps: ReserveDeps,
  publication: CompiledPublication,
  prices: ToolPrices | undefined,
  ctx: RequestContext,
  principal: Principal,
  target: { readonly server: string; readonly name: string },
): Promise<ToolCallTrack | undefined> {
  return await reservePricedCall(deps, publication, ctx, principal, {
    pricing: prices?.of(target.server, target.name),
    label: `mcp:${target.server}/${target.name}`,
    what: "tool call",
    rateScope: toolRateScope,
    onCharge: (charge) => {
      if (ctx.record.mcp) ctx.record.mcp.charge = charge;
    },
  });
}

/** One priced call of a tool or an agent, as {@link reservePricedCall} reserves it. */
export interface PricedCall {
  /** The first matching price rule's price and rate limit; undefined: free and unlimited. */
  readonly pricing: ToolPricing | undefined;
  /** The ledger's label of the call (`mcp:<server>/<tool>`, `a2a:<agent>/<skill>`). */
  readonly label: string;
  /** What the call is, for refusals ("tool call", "agent call"). */
  readonly what: string;
  /** The ledger scope holding a key's request bucket for one price rule. */
  readonly rateScope: (keyId: string, rule: string) => string;
  /** Told the charge once reserved, for the request's record (the settle step fills in its settlement). */
  readonly onCharge: (charge: McpCharge) => void;
}

/**
 * The reserve phase of a priced call of any kind (an MCP tool's, an A2A agent's), as
 * {@link reserveToolCall} describes it: reserved on the caller's budget path before sending,
 * the request's debt until evidence settles it once.
 */
export async function reservePricedCall(deps: ReserveDeps, publication: CompiledPublication, ctx: RequestContext, principal: Principal, call: PricedCall): Promise<ToolCallTrack | undefined> {
  // MCP and A2A requests carry no trusted headers, so no end-user scope joins the path.
  const task = await governTask(deps.tasks, publication, ctx, principal, new Map(), undefined, undefined);
  const pricing = call.pricing;
  if (!pricing) return undefined;
  const found = publication.budgets.forPrincipal(principal, new Map());
  const budget = found && task ? { ...found, scopes: [...found.scopes, task] } : found;
  // A tenant that keeps no budgets keeps no books, for tools as for models: only a rate limit applies.
  if (!budget && !pricing.requests) return undefined;
  const base: readonly ScopeRef[] = budget?.scopes ?? [{ name: scopeName.tenant(principal.tenantId) }, { name: scopeName.key(principal.keyId) }];
  const scopes = pricing.requests ? [...base, { name: call.rateScope(principal.keyId, pricing.rule), limits: { requests: pricing.requests } }] : base;
  const amount: LedgerAmount = { micros: budget ? (pricing.price?.micros ?? 0) : 0, tokens: 0 };
  const currency = pricing.price?.currency ?? publication.budgets.currency ?? "USD";
  const attemptId = newAttemptId(ctx.clock.now());
  const label = call.label;
  let reserved: { result: ReserveResult; handle: LedgerHandle };
  try {
    reserved = await deps.ledger.reserve(
      attemptId,
      {
        scopes,
        currency,
        amount,
        // A tool call is a request of its caller: it takes a token from every request bucket on the path.
        countsRequest: true,
        leaseMs: budget?.leaseMs ?? DEFAULT_LEASE_MS,
        ...(budget ? { retentionMs: budget.retentionMs, historyMs: budget.historyMs } : {}),
        meta: { requestId: ctx.requestId, model: label, ...(pricing.price ? { priceVersion: pricing.price.version } : {}) },
      },
      ctx.waitUntil,
    );
  } catch (err) {
    throw new GatewayError("budget_unavailable", `The budget ledger could not be reached, so the ${call.what} was not sent. Retry later.`, { cause: err, retryAfterSeconds: 1 });
  }
  const r = reserved.result;
  if (!r.ok && r.reason === "invalid_argument") throw new GatewayError("internal_error", "The gateway failed to check the budget.", { cause: r.message });
  if (!r.ok) {
    if (r.reason === "money_budget_exceeded" && r.requested > r.limit) {
      // No period will ever admit it: no retry-after, and no advice about output caps.
      throw new GatewayError("budget_exceeded", `The price of this ${call.what === "tool call" ? "tool" : call.what} is larger than the whole budget of ${r.scope}.`, { details: [{ scope: r.scope, metric: r.metric, reason: r.reason }] });
    }
    throw refusalError(r);
  }

  const charge: McpCharge = { rule: pricing.rule, attemptId, micros: amount.micros, currency, priceVersion: pricing.price?.version };
  call.onCharge(charge);
  const debt: ToolCallDebt = { kind: "tool_call", requestId: ctx.requestId, handle: reserved.handle, amount, label, charge, sent: false, evidence: undefined };
  const owed = ctx.owe(debt);
  const figures = taskFigures(task, r.remaining);
  const taskId = ctx.record.attribution?.taskId;
  return {
    ...(figures && taskId !== undefined ? { task: { taskId, figures } } : {}),
    onSent: () => {
      debt.sent = true;
    },
    onEvidence: (e) => {
      debt.evidence = e;
      owed.payNow();
    },
  };
}
