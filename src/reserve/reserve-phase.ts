import type { AttemptBudgetClient, CallBudget } from "../call-budget/attempt-budget-client.ts";
import type { ConsumeResult } from "../call-budget/attempt-budget.ts";
import type { RequestContext } from "../context/request-context.ts";
import { estimatePromptTokens } from "../protocol/prompt-estimate.ts";
import type { BudgetLedgerClient } from "../ledger/ledger-client.ts";
import { inputsTokenBound, type OperationInput } from "../protocol/input-wire.ts";
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

/** How large a request's attempts can be, for their worst-case reservations. */
export interface Sizing {
  /** Upper bound on the request's input tokens. */
  readonly inputBound: number;
  /** Typical estimate of its input tokens, recorded when an attempt's usage is unknown. */
  readonly inputEstimate: () => number;
  /** The output cap every attempt is sent with (0: the operation produces no tokens). */
  readonly outputCap: number;
  /** The cap the gateway set because the request had none, if it did. */
  readonly injectedCap: number | undefined;
}

/**
 * A budgeted chat request's sizing, and the request as every attempt sends it: it gets an output
 * cap (injected when it set none) so every attempt's worst case is bounded and priced.
 */
export function chatSizing(request: NeutralRequest, ep: CompiledEntrypoint): { readonly sizing: Sizing; readonly request: NeutralRequest } {
  const cap = outputCap(request, ep.budget.defaultMaxOutputTokens);
  const sent = cap.injected ? { ...request, maxOutputTokens: cap.cap } : request;
  // Counted now (a walk over lengths, as the bound is) rather than by a closure over the request:
  // the estimate's debt lives as long as the stream, and the closure kept the whole prompt with it.
  const estimate = estimatePromptTokens(sent);
  return { sizing: { inputBound: inputTokenBound(sent), inputEstimate: () => estimate, outputCap: cap.cap, injectedCap: cap.injected ? cap.cap : undefined }, request: sent };
}

/** An input-only request's sizing (embeddings, moderations): its inputs bound its tokens, and it produces none. */
export function inputSizing(inputs: readonly OperationInput[]): Sizing {
  const bound = inputsTokenBound(inputs);
  // About four bytes a token: the estimate recorded beside an unknown settlement.
  return { inputBound: bound, inputEstimate: () => Math.ceil(bound / 4), outputCap: 0, injectedCap: undefined };
}

/** What a request that reserves nothing hands the invoke phase: no charger, no call budget, no task cap. */
export const UNCHARGED: RequestCharges = { billing: undefined, budget: undefined, callBudget: undefined, injectedCap: undefined, task: undefined };

/**
 * The reserve phase of a request that spends nothing (a token count, free at the provider): no
 * ledger reservation, no call-budget unit, no task cap — only the attribution checks (the ids the
 * key or entrypoint requires, a task id's owner), so a free request is refused where a charged
 * one would be for its attribution, and is never recorded under another project's task.
 */
export async function prepareUncharged(
  deps: ReserveDeps,
  publication: CompiledPublication,
  ep: CompiledEntrypoint,
  ctx: RequestContext,
  principal: Principal,
  trustedHeaders: ReadonlyMap<string, string>,
): Promise<RequestCharges> {
  await governTask(deps.tasks, publication, ctx, principal, trustedHeaders, ep.name, undefined);
  return UNCHARGED;
}

/**
 * The reserve phase, before the request's attempts: the task scope, the caller's call budget and,
 * when the caller's tenant keeps a ledger, the charger through which each attempt reserves its
 * priced worst case right before it is sent (see request-charges.ts). The caller's call budget is
 * keyed by tenant, so two tenants choosing the same call id never share one.
 */
export async function prepareCharges(
  deps: ReserveDeps,
  publication: CompiledPublication,
  ep: CompiledEntrypoint,
  ctx: RequestContext,
  principal: Principal,
  /** Sizes the request; asked only when the caller's tenant keeps a ledger. */
  size: () => Sizing,
  trustedHeaders: ReadonlyMap<string, string>,
  call: CallBudget | undefined,
  taskBudgetHeader?: string,
): Promise<RequestCharges> {
  const callBudget = call === undefined ? undefined : () => deps.callBudgets.consume(`${principal.tenantId}:${call.callId}`, { initialBudget: call.budget, deadlineAt: call.deadlineAt });
  const task = await governTask(deps.tasks, publication, ctx, principal, trustedHeaders, ep.name, taskBudgetHeader);
  const base = publication.budgets.forPrincipal(principal, trustedHeaders);
  if (!base) return { billing: undefined, budget: undefined, callBudget, injectedCap: undefined, task: undefined };
  // The task is the narrowest scope: reserved in the same transaction as the rest of the path.
  const budget = task ? { ...base, scopes: [...base.scopes, task] } : base;
  const sizing = size();
  const billing = new RequestBilling({
    ledger: deps.ledger,
    budget,
    policy: ep.budget,
    price: publication.budgets.price,
    currency: publication.budgets.currency,
    requestId: ctx.requestId,
    inputBound: sizing.inputBound,
    inputEstimate: sizing.inputEstimate,
    outputCap: sizing.outputCap,
    waitUntil: ctx.waitUntil,
    log: deps.log,
  });
  return { billing, budget, callBudget, injectedCap: sizing.injectedCap, task };
}
