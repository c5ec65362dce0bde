/**
 * The A2A kind's approvals: what the turn (a2a-turn.ts) dispatches to when a task id is one of the
 * gateway's own approval tasks, and how a held message is answered and later sent.
 *
 * - decode: a task id the caller presents goes through {@link heldTaskOf}; one that is an approval
 *   task (src/approvals/agent-task-handle.ts) is opened for this caller on this endpoint — forged,
 *   tampered, expired or another caller's: A2A's TaskNotFoundError, as an agent would answer. A
 *   message continuing one becomes the held message again ({@link continuation}); the agent never
 *   sees the approval task's id.
 * - decide: GetTask / CancelTask / SubscribeToTask of an approval task are answered from the desk
 *   ({@link answerHeldTask}); a message's gate (src/decide/agent-approval-gate.ts) either sends it
 *   or answers the approval's task ({@link heldReply}).
 * - invoke: a continuation whose approval is approved is sent under the desk's claim ({@link sendClaimed}).
 */

import { CALLER_ACTOR, type Approval } from "../../approvals/approval-desk.ts";
import type { ApprovalDeps } from "../../approvals/approval-desk-rpc.ts";
import { auditEvent } from "../../approvals/approval-events.ts";
import { fitsAgentTaskHandle, isApprovalTaskId, MAX_HELD_MESSAGE_BYTES, type AgentTaskHandle } from "../../approvals/agent-task-handle.ts";
import { TASK_KEPT_AFTER_MS } from "../../approvals/approval-task.ts";
import type { RequestContext } from "../../context/request-context.ts";
import type { ApprovedCall } from "../../decide/approval-gate.ts";
import { GatewayError } from "../../errors/gateway-error.ts";
import { runClaimed } from "../../invoker/approval-claim.ts";
import type { A2aAnswer } from "../../invoker/a2a-exchange.ts";
import { isRecord } from "../../protocol/fast-guard.ts";
import type { A2aRequest } from "../../protocol/a2a/a2a-request.ts";
import type { A2aGeneration } from "../../protocol/a2a/agent-card.ts";
import { bridgeRequest } from "../../protocol/a2a/bridge.ts";
import type { Principal } from "../../publication/principal.ts";
import { approvalTaskOf, approvalTaskResult, approvalTaskState } from "../../respond/a2a-approval-task.ts";
import type { A2aReply } from "./a2a-api.ts";

/** An approval task the caller presented, opened: its id as the caller holds it, and what it carries. */
export interface HeldTask {
  readonly taskId: string;
  readonly handle: AgentTaskHandle;
}

/** The endpoint a handle is bound to: the agent named in the path, or `*` for the virtual agent. */
export function endpointOf(agent: string | undefined): string {
  return agent ?? "*";
}

/**
 * The task id the caller presented, as the approvals read it: a task method's `params.id`, or a
 * message's `taskId`. The one place an incoming task id is read for approvals (task-id binding of
 * the agents' own ids applies to every id this does not claim).
 */
export function callerTaskIdOf(req: A2aRequest): string | undefined {
  return req.info.kind === "task" || req.info.kind === "message" ? req.a2aTaskId : undefined;
}

/** What an approval task the caller cannot open is answered with: what an agent answers for a task it does not know. */
export function taskNotFound(): GatewayError {
  return new GatewayError("agent_task_not_found", "No task with this id is known to this caller here.", { param: "params.id" });
}

/**
 * The approval task a request presents, opened for `principal` on `endpoint`; undefined when its
 * task id (if any) is not an approval task's.
 *
 * @throws GatewayError agent_task_not_found (forged, tampered, expired, another caller's or another endpoint's; approvals not configured).
 */
export async function heldTaskOf(approvals: ApprovalDeps | undefined, req: A2aRequest, principal: Principal, endpoint: string, now: number): Promise<HeldTask | undefined> {
  const taskId = callerTaskIdOf(req);
  if (!isApprovalTaskId(taskId)) return undefined;
  if (!approvals) throw taskNotFound();
  const opened = await approvals.agentTasks.open(taskId, { tenant: principal.tenantId, key: principal.keyId }, endpoint, now);
  if (!opened.ok) throw taskNotFound();
  return { taskId, handle: opened.handle };
}

const SEND_METHOD: Readonly<Record<A2aGeneration, string>> = { "1.0": "SendMessage", "0.3": "message/send" };

/**
 * A message continuing an approval task, as the held message: the original message (in the
 * caller's generation now), sent with the continuation's own configuration; the continuation's
 * message itself is not sent, and the approval task's id never reaches the agent.
 */
export function continuation(req: A2aRequest, held: HeldTask): A2aRequest {
  const h = held.handle;
  const original = bridgeRequest({ jsonrpc: "2.0", id: req.id, method: SEND_METHOD[h.generation], params: { message: h.message } }, h.generation, req.generation).params;
  // A copy: the request's ids are opened in place, and the handle's message must stay as the caller wrote it (the approval is bound to it).
  const message = structuredClone(isRecord(original) && isRecord(original.message) ? original.message : h.message) as Readonly<Record<string, unknown>>;
  const text = (v: unknown) => (typeof v === "string" && v !== "" ? v : undefined);
  return { ...req, params: { ...req.params, message }, skill: h.skill, tags: undefined, a2aTaskId: text(message.taskId), contextId: text(message.contextId) };
}

/** A JSON-RPC answer, or a stream of one event that ends (an approval task is in an interrupted or final state). */
function reply(req: A2aRequest, result: Record<string, unknown>): A2aReply {
  const body = { jsonrpc: "2.0", id: req.id, result };
  if (!req.info.streaming) return { kind: "json", body };
  const frame = new TextEncoder().encode(`data: ${JSON.stringify(body)}\n\n`);
  return {
    kind: "stream",
    body: new ReadableStream<Uint8Array>({
      start: (controller) => {
        controller.enqueue(frame);
        controller.close();
      },
    }),
  };
}

/** The approval task's answer to `req`, in its generation. */
function taskReply(req: A2aRequest, held: HeldTask, a: Approval): A2aReply {
  const task = approvalTaskOf(held.taskId, held.handle, a, req.generation);
  return reply(req, approvalTaskResult(task, req.generation, req.info.kind === "message" || req.info.streaming));
}

/**
 * The answer to a message held for approval: its approval's task. A new message gets a new handle
 * carrying it; a continuation still pending gets the one it presented.
 *
 * @throws GatewayError request_too_large (the message is larger than a task id carries).
 */
export async function heldReply(deps: ApprovalDeps, ctx: RequestContext, req: A2aRequest, principal: Principal, endpoint: string, agent: string, skill: string | undefined, approval: Approval, presented: HeldTask | undefined): Promise<A2aReply> {
  const record = ctx.record.a2a;
  if (record) record.approvalId = approval.id;
  if (presented) return taskReply(req, presented, approval);
  const message = req.params.message as Readonly<Record<string, unknown>>;
  const contextId = typeof message.contextId === "string" && message.contextId !== "" ? message.contextId : crypto.randomUUID();
  const handle: AgentTaskHandle = {
    approvalId: approval.id,
    tenant: principal.tenantId,
    key: principal.keyId,
    endpoint,
    agent,
    skill,
    generation: req.generation,
    message,
    contextId,
    issuedAt: ctx.clock.now(),
    expiresAt: approval.expiresAt + TASK_KEPT_AFTER_MS,
  };
  const taskId = await deps.agentTasks.seal(handle);
  if (taskId === undefined) throw tooLarge();
  return taskReply(req, { taskId, handle }, approval);
}

/** A message that needs approval is carried in its task's id: one too large for that is refused before the desk is asked. */
export function checkHoldable(message: unknown): void {
  if (!fitsAgentTaskHandle(message)) throw tooLarge();
}

function tooLarge(): GatewayError {
  return new GatewayError("request_too_large", `This message needs a human approval, and a message waiting for one is carried in its task's id, which holds at most ${MAX_HELD_MESSAGE_BYTES / 1024} KiB of message: send a smaller one (a file by URL rather than inline).`, {
    param: "params.message",
  });
}

/**
 * GetTask, CancelTask and SubscribeToTask (0.3: tasks/get, tasks/cancel, tasks/resubscribe) of an
 * approval task: read from the desk, or cancelled there by the caller (audited as the caller's,
 * not an approver's).
 *
 * @throws GatewayError agent_task_not_found (the approval is no longer kept), agent_task_not_cancelable (it already ended).
 */
export async function answerHeldTask(deps: ApprovalDeps, ctx: RequestContext, req: A2aRequest, held: HeldTask): Promise<A2aReply> {
  const desk = deps.desk(held.handle.tenant);
  const record = ctx.record.a2a;
  if (record) record.approvalId = held.handle.approvalId;
  if (req.method !== "CancelTask" && req.method !== "tasks/cancel") {
    const a = await desk.get(held.handle.approvalId);
    if (!a) throw taskNotFound();
    return taskReply(req, held, a);
  }
  const reason = `cancelled by the caller (${req.method})`;
  const out = await desk.cancel(held.handle.approvalId, { tenant: held.handle.tenant, key: held.handle.key }, reason);
  if (!out.approval) throw taskNotFound();
  if (!out.ok) throw new GatewayError("agent_task_not_cancelable", `The task cannot be canceled: it is ${approvalTaskState(out.approval, held.handle.agent).state} (its approval is ${out.approval.state}).`, { param: "params.id" });
  ctx.record.events.push(auditEvent("approval.revoked", out.approval, ctx, out.approval.decidedAt ?? ctx.clock.now(), { actor: CALLER_ACTOR, reason }));
  return taskReply(req, held, out.approval);
}

/**
 * Sends an approved message under the desk's claim (one of any number of concurrent continuations
 * is granted); without an approval it is just sent. The agent's JSON-RPC error is a failed
 * execution; a stream that opened is one that runs.
 */
export async function sendClaimed(ctx: RequestContext, approved: ApprovedCall | undefined, send: (sent: () => void) => Promise<A2aAnswer>): Promise<A2aAnswer> {
  if (approved === undefined) return await send(() => {});
  const out = await runClaimed(ctx, approved, async (sent) => {
    const answer = await send(sent);
    return { ok: answer.kind === "stream" || answer.errorCode === undefined, answer };
  });
  return out.answer;
}
