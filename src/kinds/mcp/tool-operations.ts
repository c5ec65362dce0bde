/**
 * The MCP kind's tool calls, and the 2025-11-25 tasks that wrap the ones waiting for a human: a
 * `tools/call` through authorize (the policy on the parsed body, and the server a virtual name
 * reaches), decide (the approval gate), reserve (the tool's price), admit and invoke (the claim of
 * its approval, then the call); a task is the sealed handle of a call waiting for its approval —
 * `tasks/get` and `tasks/cancel` read and end the approval in decide, `tasks/result` runs the
 * handle's call as this module's tool call, re-admitted like any retry.
 */

import { approvalMeta, TASK_KEPT_AFTER_MS, taskOf } from "../../approvals/approval-task.ts";
import { fitsTaskHandle, type TaskHandle } from "../../approvals/task-handle.ts";
import { authorizeTask, authorizeToolCall, type RoutedCall } from "../../auth/mcp-authorize.ts";
import { gateToolCall, type GateResult } from "../../decide/approval-gate.ts";
import { cancelTask, readTask } from "../../decide/approval-tasks.ts";
import { GatewayError } from "../../errors/gateway-error.ts";
import { runClaimed } from "../../invoker/approval-claim.ts";
import { forwardedParams, invokeUpstream, listTools, serverHealth } from "../../invoker/mcp-exchange.ts";
import { tasksServed } from "../../mcp/task-support.ts";
import { upstreamRefusal } from "../../mcp/upstream-errors.ts";
import { isRecord } from "../../protocol/fast-guard.ts";
import type { StatelessRequest } from "../../protocol/mcp/stateless-request.ts";
import { reserveToolCall, type ToolCallTrack } from "../../reserve/tool-charge.ts";
import { toolCallResult } from "../../respond/mcp-result.ts";
import type { Subject } from "../../signals/subject.ts";
import type { McpCall } from "./mcp-call.ts";
import type { McpOperation } from "./mcp-operation.ts";

/** Where a call comes from: the client's `tools/call` (a plain call, or a task asked for), or a task's handle (`tasks/result`). */
type CallSource =
  | { readonly kind: "call"; readonly params: Readonly<Record<string, unknown>>; readonly asTask: boolean }
  | { readonly kind: "task"; readonly taskId: unknown; readonly meta: unknown };

/** Whether this request's client is served tasks. */
function tasks(call: McpCall, req: StatelessRequest): boolean {
  return tasksServed(call.mcp.approvals !== undefined, call.client.era, req.protocolVersion);
}

/** `tools/call` as the client sent it: task-augmented where tasks are served, else a plain call. */
export function toolCall(call: McpCall, req: StatelessRequest): McpOperation {
  const task = req.params.task;
  // A task-augmented call (`params.task`) exists only where tasks are served; elsewhere the field is not the revision's.
  if (task === undefined || !tasks(call, req)) return callOperation(call, { kind: "call", params: req.params, asTask: false });
  if (!isRecord(task)) throw new GatewayError("invalid_request", "params.task must be an object ({ ttl? }).", { param: "params.task" });
  return callOperation(call, { kind: "call", params: req.params, asTask: true });
}

/**
 * `tasks/get`, `tasks/result`, `tasks/cancel` (and `tasks/list`, not served): the task is the
 * handle the client presents, opened for this caller on this endpoint by authorize; its state is
 * its approval's at the desk.
 */
export function taskRequest(call: McpCall, req: StatelessRequest): McpOperation {
  const approvals = call.mcp.approvals;
  if (!approvals || !tasks(call, req)) throw new GatewayError("mcp_method_not_found", `${req.method} belongs to the tasks of MCP 2025-11-25, which this gateway serves to 2025-11-25 sessions for tool calls that wait for a human approval.`);
  if (req.method === "tasks/list") throw new GatewayError("mcp_method_not_found", "tasks/list is not served: a task here is the handle its caller holds, and the gateway keeps no list of them.");
  if (req.method === "tasks/result") return callOperation(call, { kind: "task", taskId: req.params.taskId, meta: req.params._meta });
  let opened: { readonly taskId: string; readonly handle: TaskHandle } | undefined;
  let answer: Record<string, unknown> = {};
  return {
    authorize: async () => {
      opened = await authorizeTask(call.authorization, approvals.tasks, req.method, req.params.taskId, call.ctx.clock.now());
    },
    decide: async () => {
      const desk = approvals.desk(call.principal.tenantId);
      const { taskId, handle } = opened!;
      answer = req.method === "tasks/get" ? await readTask(desk, taskId, handle) : await cancelTask(desk, taskId, handle, call.authorization.caller, call.ctx);
      return answer;
    },
    admissionServer: () => opened!.handle.server,
    invoke: async () => {},
    result: () => answer,
  };
}

/**
 * One tool call: authorize (the policy on the parsed body), decide (the approval gate), reserve,
 * admit, invoke. A task-augmented call is answered with a task handle when it waits for approval;
 * a task's `tasks/result` comes here with the call its handle carries, so it is re-admitted like
 * any retry and runs at most once.
 */
function callOperation(call: McpCall, source: CallSource): McpOperation {
  const { ctx, mcp, principal, client } = call;
  const endpoint = call.ingress.server;
  let params: Readonly<Record<string, unknown>> = source.kind === "call" ? source.params : {};
  let resumed: { readonly taskId: string; readonly handle: TaskHandle } | undefined;
  let routed: RoutedCall | undefined;
  let args: unknown;
  let gate: Extract<GateResult, { kind: "execute" }> | undefined;
  let charge: ToolCallTrack | undefined;
  let result: Record<string, unknown> = {};
  return {
    authorize: async () => {
      if (source.kind === "task") {
        // Forged, tampered, expired, another caller's or another endpoint's: no such task.
        resumed = await authorizeTask(call.authorization, mcp.approvals!.tasks, "tasks/result", source.taskId, ctx.clock.now());
        const h = resumed.handle;
        params = { name: endpoint === undefined ? `${h.server}.${h.tool}` : h.tool, arguments: h.arguments, ...(isRecord(source.meta) ? { _meta: source.meta } : {}) };
      }
      args = params.arguments;
      // Decided on the parsed body: the policy never reads the Mcp-Name header.
      routed = authorizeToolCall(call.authorization, params.name as string, args);
    },
    subject: (): Subject | undefined => (routed ? { kind: "tool_call", server: routed.server, tool: routed.name, arguments: isRecord(args) ? args : {} } : undefined),
    amend: (subject) => {
      if (subject.kind === "tool_call") args = subject.arguments;
    },
    decide: async () => {
      const r = routed!;
      let asTask = source.kind === "call" && source.asTask;
      if (asTask && r.decision.approval !== "required") {
        throw new GatewayError("mcp_method_not_found", `Tool ${JSON.stringify((params.name as string).slice(0, 128))} cannot be called as a task through this gateway: only a call that waits for a human approval is made a task here. Call it without params.task.`);
      }
      // A call too large to carry in a handle is answered as a 2025-era call is (-32042, then the same call again).
      if (asTask && !fitsTaskHandle(args)) asTask = false;
      // A call whose rule requires approval is answered here (pending) or re-admitted.
      const toolDefinition = async () => {
        const listed = await listTools(call.exchange, r.server, false);
        return listed.ok ? listed.tools.find((t) => t.name === r.name) : undefined;
      };
      const out = await gateToolCall(mcp.approvals, ctx, {
        principal,
        era: client.era,
        decision: r.decision,
        server: r.server,
        tool: r.name,
        args,
        params,
        toolDefinition,
        origin: call.ingress.origin,
        clientCapabilities: client.capabilities,
        task: asTask ? { kind: "create" } : resumed ? { kind: "resume", approvalId: resumed.handle.approvalId } : undefined,
      });
      if (out.kind === "answer") return out.result;
      if (out.kind === "task") {
        // The handle is the task: the call itself, sealed; the desk keeps only the approval.
        const a = out.approval;
        const handle: TaskHandle = { approvalId: a.id, tenant: principal.tenantId, key: principal.keyId, endpoint: endpoint ?? "*", server: r.server, tool: r.name, arguments: args ?? {}, issuedAt: ctx.clock.now(), expiresAt: a.expiresAt + TASK_KEPT_AFTER_MS };
        const taskId = (await mcp.approvals!.tasks.seal(handle))!;
        return { resultType: "complete", task: taskOf(taskId, handle, a), _meta: approvalMeta(a) };
      }
      gate = out;
      return undefined;
    },
    reserve: async () => {
      charge = await reserveToolCall(call.deps.reserve, call.deps.publication, mcp.prices, ctx, principal, routed!);
    },
    admissionServer: () => routed!.server,
    invoke: async () => {
      const r = routed!;
      const audit = ctx.record.mcp;
      // A call asked for by name is sent whatever the probes say (they can be wrong); it starts them.
      serverHealth(call.exchange, r.server);
      const answer = await runClaimed(ctx, gate!.approved, (claimSent) => {
        if (audit) audit.toolSent = true;
        const evidence = { onSent: () => (claimSent(), charge?.onSent()), ...(charge ? { onEvidence: charge.onEvidence } : {}) };
        return invokeUpstream(call.exchange, r.server, "tools/call", { name: r.name, arguments: args ?? {}, ...gate!.upstreamParams(forwardedParams(params)) }, evidence);
      });
      if (!answer.ok) throw upstreamRefusal(r.server, answer.error);
      result = isRecord(answer.result) ? answer.result : {};
      if (audit && result.isError === true) audit.toolError = true;
      if (audit && result.resultType === "input_required") audit.inputRequired = true;
    },
    result: () => toolCallResult(result, charge, resumed?.taskId),
  };
}
