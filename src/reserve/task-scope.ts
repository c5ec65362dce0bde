import type { RequestContext } from "../context/request-context.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { LimitRemaining, ScopeRef } from "../ledger/ledger.ts";
import type { CompiledPublication } from "../publication/compile-publication.ts";
import type { Principal } from "../publication/principal.ts";
import { taskPolicyOf, taskScope } from "../publication/task-policy.ts";
import type { TaskBindingClient } from "../tasks/task-binding-client.ts";
import { checkClaim, type TaskClaim } from "../tasks/task-binding.ts";

/** The header a caller lowers its task's cap with, for one request (currency units, e.g. `0.25`). */
export const TASK_BUDGET_HEADER = "x-sluice-task-budget";

/** A decimal amount of currency units, at most 6 decimals, as micro-units. */
const AMOUNT = /^(0|[1-9][0-9]{0,8})(\.[0-9]{1,6})?$/;

/** The per-request task cap a caller sent, in micro-units; undefined when it sent none. */
export function parseTaskBudget(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const m = AMOUNT.exec(raw.trim());
  if (!m) throw new GatewayError("invalid_request", `${TASK_BUDGET_HEADER} must be an amount in currency units with at most 6 decimals, such as 0.25.`, { param: TASK_BUDGET_HEADER });
  return Number(m[1]) * 1_000_000 + Number((m[2] ?? ".").slice(1).padEnd(6, "0"));
}

/**
 * The attribution checks of the reserve phase, model requests and tool calls alike:
 * - ids the caller's key or entrypoint requires (`requireAttribution`) must be present, so leaving
 *   one out is refused rather than a way around a per-task or per-user limit;
 * - a task id (and its parent's) is the caller's tenant's own, bound to the project that first
 *   used it (src/tasks/task-binding.ts): another project's, under `taskSharing: project`, is
 *   refused. Another tenant's use of the same id is another task, never seen here.
 * Answers the task's scope for the caller's budget path when the request names a task; the
 * caller adds it only where the tenant keeps a ledger.
 */
export async function governTask(
  tasks: TaskBindingClient | undefined,
  publication: CompiledPublication,
  ctx: RequestContext,
  principal: Principal,
  trustedHeaders: ReadonlyMap<string, string>,
  entrypoint: string | undefined,
  taskBudgetHeader: string | undefined,
): Promise<ScopeRef | undefined> {
  const policy = taskPolicyOf(publication.source)(principal, entrypoint);
  if (!policy) return undefined;
  const attribution = ctx.record.attribution;
  const taskId = attribution?.taskId;
  if (policy.required.has("task") && taskId === undefined) {
    throw new GatewayError("attribution_required", "This key or entrypoint requires a task id: send x-sluice-task-id (on MCP, or _meta[\"sluice.dev/taskId\"]).", { param: "x-sluice-task-id" });
  }
  if (policy.required.has("endUser")) {
    const header = policy.endUserHeader;
    if (header === undefined || !trustedHeaders.get(header)) {
      throw new GatewayError("attribution_required", `This key or entrypoint requires the end user: send the ${header ?? "end-user"} header.`, header ? { param: header } : {});
    }
  }
  const lowered = parseTaskBudget(taskBudgetHeader);
  if (taskId === undefined) return undefined;
  if (tasks) {
    const claims: TaskClaim[] = [{ taskId, tenant: principal.tenantId, project: policy.project }];
    const parent = attribution?.parentTaskId;
    if (parent !== undefined && parent !== taskId) claims.push({ taskId: parent, tenant: principal.tenantId, project: policy.project });
    let bindings;
    try {
      bindings = await Promise.all(claims.map((c) => tasks.bind(c)));
    } catch (err) {
      throw new GatewayError("budget_unavailable", "The task could not be checked, so the request was not sent. Retry later.", { cause: err, retryAfterSeconds: 1 });
    }
    bindings.forEach((b, i) => {
      const claim = claims[i]!;
      // A parent is checked under tenant sharing: a child task may be charged to another project.
      if (checkClaim(b, claim, i === 0 ? policy.sharing : "tenant") !== undefined) {
        throw new GatewayError("task_not_yours", `The task id '${claim.taskId}' belongs to another project. Use a new task id.`, { param: "x-sluice-task-id" });
      }
    });
  }
  return taskScope(taskId, policy.cap, lowered, publication.budgets.currency ?? "USD");
}

/** A task's figures after a reservation: per capped metric, what is committed (spent + held) and what remains. */
export interface TaskFigure {
  readonly metric: string;
  /** The currency of a `money` figure (its values are micro-units of it). */
  readonly currency?: string | undefined;
  readonly spent: number;
  readonly remaining: number;
}

/** The task's figures out of a grant's remaining limits (micro-units for money, tokens for tokens). */
export function taskFigures(scope: ScopeRef | undefined, remaining: readonly LimitRemaining[] | undefined): TaskFigure[] | undefined {
  if (!scope?.limits || !remaining) return undefined;
  const out: TaskFigure[] = [];
  for (const r of remaining) {
    if (r.scope !== scope.name) continue;
    const money = r.metric.startsWith("money:");
    const limit = money ? scope.limits.money?.limitMicros : r.metric === "tokens" ? scope.limits.tokens?.limit : undefined;
    if (limit === undefined) continue;
    out.push({ metric: money ? "money" : r.metric, ...(money ? { currency: r.metric.slice("money:".length) } : {}), spent: Math.max(0, limit - r.remaining), remaining: r.remaining });
  }
  return out.length > 0 ? out : undefined;
}

