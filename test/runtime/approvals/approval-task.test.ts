import { describe, expect, it } from "vitest";
import { CALLER_ACTOR, type Approval } from "../../../src/approvals/approval-desk.ts";
import { taskOf, taskStatusOf, TASK_POLL_INTERVAL_MS } from "../../../src/approvals/approval-task.ts";
import type { TaskHandle } from "../../../src/approvals/task-handle.ts";

const approval: Approval = {
  id: "ap_YWNtZQ_0123456789abcdef0123456789abcdef",
  tenant: "acme",
  state: "pending",
  principal: { tenant: "acme", key: "k1" },
  server: "files",
  tool: "delete",
  toolDigest: "sha256:t",
  argumentsDigest: "sha256:a",
  policyRevision: "p1",
  rule: "risky",
  createdAt: 1_000,
  expiresAt: 61_000,
  statusUrl: "http://127.0.0.1/approvals/ap_YWNtZQ_0123456789abcdef0123456789abcdef",
  usedNonces: [],
  history: [{ at: 1_000, event: "requested" }],
};
const handle: TaskHandle = { approvalId: approval.id, tenant: "acme", key: "k1", endpoint: "files", server: "files", tool: "delete", arguments: {}, issuedAt: 1_000, expiresAt: 61_000 + 3_600_000 };

describe("the MCP task an approval stands for", () => {
  it("maps every approval state to a task status", () => {
    const as = (over: Partial<Approval>) => taskStatusOf({ ...approval, ...over }).status;
    expect(as({})).toBe("input_required");
    // Approved: the client's tasks/result is the next step (it runs the call), so still input_required.
    expect(as({ state: "approved" })).toBe("input_required");
    expect(as({ state: "executed", execution: "claimed" })).toBe("working");
    expect(as({ state: "executed", execution: "succeeded" })).toBe("completed");
    expect(as({ state: "executed", execution: "failed" })).toBe("failed");
    expect(as({ state: "executed", execution: "unknown" })).toBe("failed");
    expect(as({ state: "denied", reason: "no" })).toBe("failed");
    expect(as({ state: "expired" })).toBe("failed");
    expect(as({ state: "revoked", decidedBy: "approver" })).toBe("failed");
    expect(as({ state: "revoked", decidedBy: CALLER_ACTOR })).toBe("cancelled");
  });

  it("is a Task of the wire: the handle's lifetime as ttl, ISO times, the page in the message, a poll interval until it is over", () => {
    const t = taskOf("t1.x.y", handle, approval);
    expect(t).toEqual({ taskId: "t1.x.y", status: "input_required", ttl: 60_000 + 3_600_000, createdAt: new Date(1_000).toISOString(), lastUpdatedAt: new Date(1_000).toISOString(), pollInterval: TASK_POLL_INTERVAL_MS, statusMessage: expect.stringContaining(approval.statusUrl) });
    const denied = taskOf("t1.x.y", handle, { ...approval, state: "denied", reason: "too risky", history: [...approval.history, { at: 5_000, event: "denied", actor: "approver", reason: "too risky" }] });
    expect(denied).toMatchObject({ status: "failed", lastUpdatedAt: new Date(5_000).toISOString(), statusMessage: expect.stringContaining("too risky") });
    expect(denied).not.toHaveProperty("pollInterval");
  });
});
