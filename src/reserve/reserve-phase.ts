import type { AttemptBudgetClient, CallBudget } from "../call-budget/attempt-budget-client.ts";
import type { ConsumeResult } from "../call-budget/attempt-budget.ts";
import type { RequestContext } from "../context/request-context.ts";
import { estimatePromptTokens } from "../decide/request-facts.ts";
import type { BudgetLedgerClient } from "../ledger/ledger-client.ts";
import type { NeutralRequest } from "../protocol/neutral.ts";
import type { CompiledEntrypoint, CompiledPublication } from "../publication/compile-publication.ts";
import type { PrincipalBudget } from "../publication/budgets.ts";
import type { Principal } from "../publication/principal.ts";
import { RequestBilling } from "./request-charges.ts";
import { inputTokenBound, outputCap } from "./token-bounds.ts";
import type { ScopeRef } from "../ledger/ledger.ts";
import type { TaskBindingClient } from "../tasks/task-binding-client.ts";
import { governTask } from "./task-scope.ts";

/** What the reserve phase talks to. */
export interface ReserveDeps {
  readonly ledger: BudgetLedgerClient;
  readonly callBudgets: AttemptBudgetClient;
  readonly log: (event: Readonly<Record<string, unknown>>) => void;
  /** Task bindings (docs/governance.md); without it task ids are not checked against their owner. */
  readonly tasks?: TaskBindingClient | undefined;
}

/** One request's charging, ready for its attempts. */
export interface RequestCharges {
  /** The request as every attempt sends it (with an injected output cap when one was needed). */
  readonly request: NeutralRequest;
  /** Per-attempt ledger reservations, when the caller's tenant keeps budgets. */
  readonly billing: RequestBilling | undefined;
  readonly budget: PrincipalBudget | undefined;
  /** Takes one unit of the caller's cross-layer attempt budget, when it sent one. */
  readonly callBudget: (() => Promise<ConsumeResult>) | undefined;
  /** The output cap injected (the client is told), if any. */
  readonly injectedCap: number | undefined;
  /** The task scope on the budget path, when the request names a task and its tenant keeps a ledger. */
  readonly task: ScopeRef | undefined;
}

/**
 * The reserve phase, before the request's attempts: when the caller's tenant keeps a ledger, the
 * request gets an output cap (injected when it set none) so every attempt's worst case is bounded
 * and priced; each attempt then reserves that worst case right before it is sent (see
 * request-charges.ts). The caller's call budget is keyed by tenant, so two tenants choosing the
 * same call id never share one.
 */
export async function prepareCharges(
  deps: ReserveDeps,
  publication: CompiledPublication,
  ep: CompiledEntrypoint,
  ctx: RequestContext,
  principal: Principal,
  request: NeutralRequest,
  trustedHeaders: ReadonlyMap<string, string>,
  call: CallBudget | undefined,
  taskBudgetHeader?: string,
): Promise<RequestCharges> {
  const callBudget = call === undefined ? undefined : () => deps.callBudgets.consume(`${principal.tenantId}:${call.callId}`, { initialBudget: call.budget, deadlineAt: call.deadlineAt });
  const task = await governTask(deps.tasks, publication, ctx, principal, trustedHeaders, ep.name, taskBudgetHeader);
  const base = publication.budgets.forPrincipal(principal, trustedHeaders);
  if (!base) return { request, billing: undefined, budget: undefined, callBudget, injectedCap: undefined, task: undefined };
  // The task is the narrowest scope: reserved in the same transaction as the rest of the path.
  const budget = task ? { ...base, scopes: [...base.scopes, task] } : base;
  const cap = outputCap(request, ep.budget.defaultMaxOutputTokens);
  const sent = cap.injected ? { ...request, maxOutputTokens: cap.cap } : request;
  const billing = new RequestBilling({
    ledger: deps.ledger,
    budget,
    policy: ep.budget,
    price: publication.budgets.price,
    currency: publication.budgets.currency,
    requestId: ctx.requestId,
    inputBound: inputTokenBound(sent),
    inputEstimate: () => estimatePromptTokens(sent),
    outputCap: cap.cap,
    waitUntil: ctx.waitUntil,
    log: deps.log,
  });
  return { request: sent, billing, budget, callBudget, injectedCap: cap.injected ? cap.cap : undefined, task };
}
