/**
 * The decide phase of `tasks/get` and `tasks/cancel` (MCP 2025-11-25 tasks): a task here is a tool
 * call waiting for a human approval, so its state is its approval's at the desk, read or revoked
 * by the caller itself. The handle was opened for this caller by the authorize phase.
 */

import { CALLER_ACTOR } from "../approvals/approval-desk.ts";
import type { ApprovalDeskRpc } from "../approvals/approval-desk-rpc.ts";
import { auditEvent } from "../approvals/approval-events.ts";
import { approvalMeta, taskOf, taskStatusOf } from "../approvals/approval-task.ts";
import type { TaskHandle } from "../approvals/task-handle.ts";
import { unknownTask, type PolicyCaller } from "../auth/mcp-authorize.ts";
import type { RequestContext } from "../context/request-context.ts";
import { GatewayError } from "../errors/gateway-error.ts";

/** `tasks/get`: the task as its approval stands now. */
export async function readTask(desk: ApprovalDeskRpc, taskId: string, handle: TaskHandle): Promise<Record<string, unknown>> {
  const a = await desk.get(handle.approvalId);
  if (!a) throw unknownTask();
  return { resultType: "complete", ...taskOf(taskId, handle, a), _meta: approvalMeta(a) };
}

/** `tasks/cancel`: the caller revokes its own approval (audited as the caller's, not an approver's). */
export async function cancelTask(desk: ApprovalDeskRpc, taskId: string, handle: TaskHandle, caller: PolicyCaller, ctx: RequestContext): Promise<Record<string, unknown>> {
  const reason = "cancelled by the caller (tasks/cancel)";
  const out = await desk.cancel(handle.approvalId, caller, reason);
  if (!out.approval) throw unknownTask();
  if (!out.ok) throw new GatewayError("invalid_request", `The task cannot be cancelled: it is ${taskStatusOf(out.approval).status} (its approval is ${out.approval.state}).`, { param: "params.taskId" });
  ctx.record.events.push(auditEvent("approval.revoked", out.approval, ctx, out.approval.decidedAt ?? ctx.clock.now(), { actor: CALLER_ACTOR, reason }));
  return { resultType: "complete", ...taskOf(taskId, handle, out.approval), _meta: approvalMeta(out.approval) };
}
