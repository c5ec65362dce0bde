/**
 * The A2A task an agent message waiting for a human approval is, in the caller's generation: its
 * state read from the approval at the desk, its id the sealed handle (src/approvals/agent-task-handle.ts).
 * Nothing else is stored for it.
 *
 * `auth-required` (A2A's interrupted state for "the caller must obtain an authorization") is the
 * state whenever the next step is outside the agent: while a human decides, and once approved
 * (the caller then sends a message with this task's id, which sends the held message, once).
 */

import { CALLER_ACTOR, type Approval } from "../approvals/approval-desk.ts";
import type { AgentTaskHandle } from "../approvals/agent-task-handle.ts";
import { APPROVAL_META } from "../approvals/approval-task.ts";
import type { A2aGeneration } from "../protocol/a2a/agent-card.ts";

/** The A2A task states an approval task takes (0.3 names; 1.0 `TASK_STATE_*` of the same). */
export type ApprovalTaskState = "auth-required" | "working" | "completed" | "failed" | "rejected" | "canceled";

const STATE_1: Readonly<Record<ApprovalTaskState, string>> = {
  "auth-required": "TASK_STATE_AUTH_REQUIRED",
  working: "TASK_STATE_WORKING",
  completed: "TASK_STATE_COMPLETED",
  failed: "TASK_STATE_FAILED",
  rejected: "TASK_STATE_REJECTED",
  canceled: "TASK_STATE_CANCELED",
};

const iso = (ms: number) => new Date(ms).toISOString();

/** The task state an approval stands for, and the words that say why. */
export function approvalTaskState(a: Approval, agent: string): { readonly state: ApprovalTaskState; readonly text: string } {
  const why = a.reason ? ` (${a.reason})` : "";
  switch (a.state) {
    case "pending":
      return {
        state: "auth-required",
        text: `Sending this message to agent ${agent} needs a human approval (approval ${a.id}, until ${iso(a.expiresAt)}). Follow it at ${a.statusUrl}; once approved, send a message with this taskId to run it, once.`,
      };
    case "approved":
      return { state: "auth-required", text: `Approved (approval ${a.id}): send a message with this taskId before ${iso(a.expiresAt)} to run it; it runs once.` };
    case "executed":
      if (a.execution === "claimed") return { state: "working", text: `The approved message is being sent to agent ${agent}.` };
      if (a.execution === "succeeded") return { state: "completed", text: `The approved message ran once: agent ${agent}'s answer went to the message that ran it and is not kept.` };
      if (a.execution === "failed") return { state: "failed", text: `The approved message ran once and agent ${agent} answered it with an error.` };
      return { state: "failed", text: "The approved message was sent once and its outcome is unknown: it is held for reconciliation and never sent again." };
    case "denied":
      return { state: "rejected", text: `The approval ${a.id} was denied${why}: the message was not sent.` };
    case "revoked":
      return a.decidedBy === CALLER_ACTOR
        ? { state: "canceled", text: `Canceled by the caller (approval ${a.id} revoked): the message was not sent.` }
        : { state: "rejected", text: `The approval ${a.id} was revoked${why}: the message was not sent.` };
    case "expired":
      return { state: "failed", text: `The approval ${a.id} expired before the message was sent.` };
  }
}

/** The approval a task waits for, as its metadata names it (`sluice.dev/approval`). */
export function approvalTaskMetadata(a: Approval): Record<string, unknown> {
  return { [APPROVAL_META]: { id: a.id, url: a.statusUrl, state: a.state, expiresAt: iso(a.expiresAt) } };
}

/** The Task object (the generation's wire JSON) that the handle `taskId` stands for, its approval being `a`. */
export function approvalTaskOf(taskId: string, handle: AgentTaskHandle, a: Approval, generation: A2aGeneration): Record<string, unknown> {
  const { state, text } = approvalTaskState(a, handle.agent);
  const updated = Math.max(handle.issuedAt, a.createdAt, ...a.history.map((h) => h.at));
  // One status message per approval step: the same step reads as the same message.
  const messageId = `${a.id}.${a.history.length}`;
  if (generation === "0.3") {
    return {
      kind: "task",
      id: taskId,
      contextId: handle.contextId,
      status: { state, message: { kind: "message", messageId, role: "agent", taskId, contextId: handle.contextId, parts: [{ kind: "text", text }] }, timestamp: iso(updated) },
      metadata: approvalTaskMetadata(a),
    };
  }
  return {
    id: taskId,
    contextId: handle.contextId,
    status: { state: STATE_1[state], message: { messageId, role: "ROLE_AGENT", taskId, contextId: handle.contextId, parts: [{ text }] }, timestamp: iso(updated) },
    metadata: approvalTaskMetadata(a),
  };
}

/**
 * The task as a method's result in `generation`: a message's answer and a stream event
 * (`streamResponse`) wrap it in 1.0 (`{task}`); GetTask, CancelTask and every 0.3 answer carry it bare.
 */
export function approvalTaskResult(task: Record<string, unknown>, generation: A2aGeneration, streamResponse: boolean): Record<string, unknown> {
  return generation === "1.0" && streamResponse ? { task } : task;
}
