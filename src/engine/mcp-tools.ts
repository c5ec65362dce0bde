/**
 * Tool calls and the tasks that wrap the ones waiting for a human: a `tools/call` through
 * `authorize` (the tool policy on the parsed body, and the server a virtual name reaches),
 * `decide` (the approval gate of src/approvals), `reserve` (the tool's price), `admit` and
 * `invoke`; and the 2025-11-25 tasks methods, where a task is the sealed handle of a call waiting
 * for its approval — `tasks/get` and `tasks/cancel` read and end the approval, `tasks/result`
 * runs the handle's call through the same path as any retry.
 */

import { auditEvent, gateToolCall } from "../approvals/approval-gate.ts";
import { CALLER_ACTOR } from "../approvals/approval-desk.ts";
import { approvalMeta, RELATED_TASK, TASK_KEPT_AFTER_MS, taskOf, taskStatusOf } from "../approvals/approval-task.ts";
import { fitsTaskHandle, type TaskHandle } from "../approvals/task-handle.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { McpEra } from "../mcp/bridging.ts";
import type { StatelessRequest } from "../mcp/stateless-request.ts";
import { authorizeCall } from "../mcp/tool-policy.ts";
import { upstreamRefusal } from "../mcp/upstream-errors.ts";
import { routeToolCall } from "../mcp/virtual-server.ts";
import { isRecord } from "../protocol/fast-guard.ts";
import { reserveToolCall, withTaskMeta } from "../reserve/tool-charge.ts";
import { admitMcp, noteDecision, policySubject, type McpCall } from "./mcp-call.ts";
import type { McpDeps } from "./mcp-deps.ts";
import { forwardedParams, invokeUpstream, listTools, serverHealth } from "./mcp-upstream.ts";

/** The revision whose tasks the gateway serves (the 2026-07-28 revision has none). */
const TASKS_VERSION = "2025-11-25";

/** How a call relates to a task: asked for as one (`create`), or run from its handle by `tasks/result` (`resume`). */
type TaskUse = { readonly kind: "create" } | { readonly kind: "resume"; readonly taskId: string; readonly handle: TaskHandle } | undefined;

/**
 * Whether tasks (MCP 2025-11-25) are served: to a client of that revision, when approvals are
 * configured — a task here is a tool call waiting for a human approval, and nothing else.
 */
export function tasksServed(mcp: McpDeps, era: McpEra, protocolVersion: string | undefined): boolean {
  return mcp.approvals !== undefined && era === "stateful" && protocolVersion === TASKS_VERSION;
}

/** `tools/call` as the client sent it: task-augmented where tasks are served, else a plain call. */
export async function answerToolCall(call: McpCall, req: StatelessRequest): Promise<Record<string, unknown>> {
  const task = req.params.task;
  // A task-augmented call (`params.task`) exists only where tasks are served; elsewhere the field is not the revision's.
  if (task === undefined || !tasksServed(call.mcp, call.client.era, req.protocolVersion)) return await callTool(call, req.params, undefined);
  if (!isRecord(task)) throw new GatewayError("invalid_request", "params.task must be an object ({ ttl? }).", { param: "params.task" });
  return await callTool(call, req.params, { kind: "create" });
}

/**
 * One `tools/call`: `authorize` (the policy on the parsed body), `decide` (the approval gate),
 * `reserve`, `admit`, `invoke`. A task-augmented call (`create`) is answered with a task handle
 * when it waits for approval; a task's `tasks/result` (`resume`) comes back through here with
 * the call its handle carries, so it is re-admitted like any retry and runs at most once.
 */
async function callTool(call: McpCall, params: Readonly<Record<string, unknown>>, task: TaskUse): Promise<Record<string, unknown>> {
  const { ctx, deps, mcp, principal, client } = call;
  const server = call.ingress.server;
  const caller = policySubject(call);
  ctx.enter("authorize");
  const name = params.name as string;
  const args = params.arguments;
  const audit = ctx.record.mcp;
  // Decided on the parsed body: the policy never reads the Mcp-Name header.
  const routed =
    server === undefined
      ? routeToolCall(name, args, mcp.servers, caller, mcp.policy, (d, t) => noteDecision(call, d, t.server, t.target))
      : { server, name, decision: authorizeCall(mcp.policy, { ...caller, server, kind: "tool", name }, args, (decision) => noteDecision(call, decision, server, name)) };
  ctx.enter("decide");
  let asTask = task?.kind === "create";
  if (asTask && routed.decision.approval !== "required") {
    throw new GatewayError("mcp_method_not_found", `Tool ${JSON.stringify(name.slice(0, 128))} cannot be called as a task through this gateway: only a call that waits for a human approval is made a task here. Call it without params.task.`);
  }
  // A call too large to carry in a handle is answered as a 2025-era call is (-32042, then the same call again).
  if (asTask && !fitsTaskHandle(args)) asTask = false;
  // A call whose rule requires approval is answered here (pending) or re-admitted (src/approvals).
  const toolDefinition = async () => {
    const listed = await listTools(call, routed.server, false);
    return listed.ok ? listed.tools.find((t) => t.name === routed.name) : undefined;
  };
  const gate = await gateToolCall(mcp.approvals, ctx, {
    principal,
    era: client.era,
    decision: routed.decision,
    server: routed.server,
    tool: routed.name,
    args,
    params,
    toolDefinition,
    origin: call.ingress.origin,
    clientCapabilities: client.capabilities,
    task: asTask ? { kind: "create" } : task?.kind === "resume" ? { kind: "resume", approvalId: task.handle.approvalId } : undefined,
  });
  if (gate.kind === "answer") return gate.result;
  if (gate.kind === "task") {
    // The handle is the task: the call itself, sealed; the desk keeps only the approval.
    const a = gate.approval;
    const handle: TaskHandle = { approvalId: a.id, tenant: principal.tenantId, key: principal.keyId, endpoint: server ?? "*", server: routed.server, tool: routed.name, arguments: args ?? {}, issuedAt: ctx.clock.now(), expiresAt: a.expiresAt + TASK_KEPT_AFTER_MS };
    const taskId = (await mcp.approvals!.tasks.seal(handle))!;
    return { resultType: "complete", task: taskOf(taskId, handle, a), _meta: approvalMeta(a) };
  }
  ctx.enter("reserve");
  const charge = await reserveToolCall(deps.reserve, deps.publication, mcp.prices, ctx, principal, routed);
  await admitMcp(call, routed.server);
  ctx.enter("invoke");
  // A call asked for by name is sent whatever the probes say (they can be wrong); it starts them.
  serverHealth(call, routed.server);
  const answer = await gate.execute(() => {
    if (audit) audit.toolSent = true;
    return invokeUpstream(call, routed.server, "tools/call", { name: routed.name, arguments: args ?? {}, ...gate.upstreamParams(forwardedParams(params)) }, charge);
  });
  if (!answer.ok) throw upstreamRefusal(routed.server, answer.error);
  const result = isRecord(answer.result) ? answer.result : {};
  if (audit && result.isError === true) audit.toolError = true;
  if (audit && result.resultType === "input_required") audit.inputRequired = true;
  const out = withTaskMeta({ resultType: "complete", ...result }, charge);
  if (task?.kind !== "resume") return out;
  const meta = isRecord(out._meta) ? out._meta : {};
  return { ...out, _meta: { ...meta, [RELATED_TASK]: { taskId: task.taskId } } };
}

/**
 * `tasks/get`, `tasks/result`, `tasks/cancel` (and `tasks/list`, not served): the task is the
 * handle the client presents, opened for this principal on this endpoint; its state is its
 * approval's at the desk. `tasks/result` runs the handle's call through {@link callTool}.
 */
export async function answerTask(call: McpCall, req: StatelessRequest): Promise<Record<string, unknown>> {
  const { ctx, mcp, principal, client } = call;
  const server = call.ingress.server;
  const approvals = mcp.approvals;
  if (!approvals || !tasksServed(mcp, client.era, req.protocolVersion)) throw new GatewayError("mcp_method_not_found", `${req.method} belongs to the tasks of MCP 2025-11-25, which this gateway serves to 2025-11-25 sessions for tool calls that wait for a human approval.`);
  if (req.method === "tasks/list") throw new GatewayError("mcp_method_not_found", "tasks/list is not served: a task here is the handle its caller holds, and the gateway keeps no list of them.");
  ctx.enter("authorize");
  const taskId = req.params.taskId;
  if (typeof taskId !== "string" || taskId === "") throw new GatewayError("invalid_request", `${req.method} needs a taskId.`, { param: "params.taskId" });
  // Forged, tampered, expired, another caller's or another endpoint's: to this caller no such task exists.
  const unknown = () => new GatewayError("invalid_request", "Unknown task: no task of this caller on this endpoint has that taskId (it may have expired).", { param: "params.taskId" });
  const opened = await approvals.tasks.open(taskId, policySubject(call), ctx.clock.now());
  if (!opened.ok || opened.handle.endpoint !== (server ?? "*") || !mcp.servers.has(opened.handle.server)) throw unknown();
  const handle = opened.handle;
  const audit = ctx.record.mcp;
  if (audit) Object.assign(audit, { server: handle.server, target: handle.tool });
  if (req.method === "tasks/result") {
    const name = server === undefined ? `${handle.server}.${handle.tool}` : handle.tool;
    return await callTool(call, { name, arguments: handle.arguments, ...(isRecord(req.params._meta) ? { _meta: req.params._meta } : {}) }, { kind: "resume", taskId, handle });
  }
  ctx.enter("decide");
  const desk = approvals.desk(principal.tenantId);
  if (req.method === "tasks/get") {
    const a = await desk.get(handle.approvalId);
    if (!a) throw unknown();
    return { resultType: "complete", ...taskOf(taskId, handle, a), _meta: approvalMeta(a) };
  }
  const reason = "cancelled by the caller (tasks/cancel)";
  const out = await desk.cancel(handle.approvalId, policySubject(call), reason);
  if (!out.approval) throw unknown();
  if (!out.ok) throw new GatewayError("invalid_request", `The task cannot be cancelled: it is ${taskStatusOf(out.approval).status} (its approval is ${out.approval.state}).`, { param: "params.taskId" });
  ctx.record.events.push(auditEvent("approval.revoked", out.approval, ctx, out.approval.decidedAt ?? ctx.clock.now(), { actor: CALLER_ACTOR, reason }));
  return { resultType: "complete", ...taskOf(taskId, handle, out.approval), _meta: approvalMeta(out.approval) };
}
