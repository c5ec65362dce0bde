/**
 * The MCP task (2025-11-25 tasks) that a task-augmented tool call waiting for approval is, read
 * from its approval at the desk: the handle says which call and which approval, the desk says
 * where it stands. Nothing else is stored for it.
 *
 * `input_required` is the status whenever the next step is the client's `tasks/result`: while a
 * human decides (that call then answers -32042 with the approval's page) and once approved (that
 * call runs the tool, once). A gateway that keeps no results can run the call only inside the
 * request that delivers its result, so `working` would leave a client that waits for a terminal
 * status polling forever; it is used only while a claimed call runs.
 */

import { CALLER_ACTOR, type Approval } from "./approval-desk.ts";
import type { TaskHandle } from "./task-handle.ts";

/** `_meta` key relating a message to a task (MCP 2025-11-25). */
export const RELATED_TASK = "io.modelcontextprotocol/related-task";
/** `_meta` key of the approval a task waits for: its id, status page and state. */
export const APPROVAL_META = "sluice.dev/approval";
/** How often a client is asked to poll `tasks/get` while the task is not over. */
export const TASK_POLL_INTERVAL_MS = 5_000;
/** How long after its approval's expiry a handle still opens, so that how the task ended can be read. */
export const TASK_KEPT_AFTER_MS = 60 * 60_000;

/** A task's status (MCP 2025-11-25). */
export type TaskStatus = "working" | "input_required" | "completed" | "failed" | "cancelled";

/** The Task object of the wire (`CreateTaskResult.task`, and the fields of `tasks/get` and `tasks/cancel` results). */
export interface McpTask {
  readonly taskId: string;
  readonly status: TaskStatus;
  /** Ms from creation the task is kept (the handle's lifetime). */
  readonly ttl: number;
  readonly createdAt: string;
  readonly lastUpdatedAt: string;
  readonly pollInterval?: number | undefined;
  readonly statusMessage: string;
}

const iso = (ms: number) => new Date(ms).toISOString();

/** The status of the task an approval stands for, and the words that say why. */
export function taskStatusOf(a: Approval): { readonly status: TaskStatus; readonly message: string } {
  const why = a.reason ? ` (${a.reason})` : "";
  switch (a.state) {
    case "pending":
      return { status: "input_required", message: `Calling ${a.server}/${a.tool} waits for a human approval (approval ${a.id}, until ${iso(a.expiresAt)}): ${a.statusUrl}` };
    case "approved":
      return { status: "input_required", message: `Approved (approval ${a.id}): call tasks/result before ${iso(a.expiresAt)} to run the call; it runs once.` };
    case "executed":
      if (a.execution === "claimed") return { status: "working", message: `The approved call of ${a.server}/${a.tool} is running.` };
      if (a.execution === "succeeded") return { status: "completed", message: "The call ran once; its result went to the tasks/result that ran it and is not kept." };
      if (a.execution === "failed") return { status: "failed", message: `The call ran once and ${a.server} answered it with an error.` };
      return { status: "failed", message: "The call was sent once and its outcome is unknown: it is held for reconciliation and never retried." };
    case "denied":
      return { status: "failed", message: `The approval ${a.id} was denied${why}.` };
    case "revoked":
      return a.decidedBy === CALLER_ACTOR ? { status: "cancelled", message: `Cancelled by the caller (approval ${a.id} revoked).` } : { status: "failed", message: `The approval ${a.id} was revoked${why}.` };
    case "expired":
      return { status: "failed", message: `The approval ${a.id} expired before the call ran.` };
  }
}

/** The Task the handle `taskId` stands for, its approval being `a`. */
export function taskOf(taskId: string, handle: TaskHandle, a: Approval): McpTask {
  const { status, message } = taskStatusOf(a);
  const updated = Math.max(handle.issuedAt, a.createdAt, ...a.history.map((h) => h.at));
  const over = status === "completed" || status === "failed" || status === "cancelled";
  return {
    taskId,
    status,
    ttl: handle.expiresAt - handle.issuedAt,
    createdAt: iso(handle.issuedAt),
    lastUpdatedAt: iso(updated),
    ...(over ? {} : { pollInterval: TASK_POLL_INTERVAL_MS }),
    statusMessage: message,
  };
}

/** The `_meta` naming the approval a task waits for. */
export function approvalMeta(a: Approval): Record<string, unknown> {
  return { [APPROVAL_META]: { id: a.id, url: a.statusUrl, state: a.state } };
}
