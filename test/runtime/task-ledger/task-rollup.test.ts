import { describe, expect, it } from "vitest";
import type { AttemptRecord } from "../../../src/context/attempt-record.ts";
import { attempt, modelRecord } from "./task-fixtures.ts";
import type { RequestRecord } from "../../../src/context/request-record.ts";
import type { AuditEvent } from "../../../src/audit/audit-event.ts";
import { auditEventsOf, callOf, type LedgerCall } from "../../../src/task-ledger/call-record.ts";
import { rollupTask } from "../../../src/task-ledger/task-rollup.ts";

let seq = 0;
const ids = () => `evt_${++seq}`;

describe("call records", () => {
  it("counts a failed attempt and its retry, each with the cost its settlement booked", () => {
    const r = modelRecord({ requestId: "req_1" });
    const failed = attempt({ id: "att_1", requestId: "req_1", outcome: "upstream_status", evidence: { class: "known_zero", reason: "rejected_before_processing" }, usage: undefined, charge: { usage: "none", costMicros: 0, currency: "USD" } });
    const ok = attempt({ id: "att_2", requestId: "req_1" });
    const call = callOf(r, [failed, ok])!;
    expect(call).toMatchObject({ callId: "req_1", kind: "model", target: "gpt", key: "k1", sessionId: "s1", turnId: "t1", costMicros: 300, retries: 1, fallbacks: 0 });
    expect(call.attempts).toEqual([
      { attemptId: "att_1", backend: "sim", protocol: "openai-chat", codecVersion: "1", outcome: "upstream_status", usage: "none", usageSource: "unknown", costMicros: 0 },
      { attemptId: "att_2", backend: "sim", protocol: "openai-chat", codecVersion: "1", outcome: "success", usage: "known", usageSource: "reported", costMicros: 300 },
    ]);
  });

  it("records a token count's unbilled attempt as using nothing, at no cost", () => {
    const r = modelRecord({ requestId: "req_count" });
    const call = callOf(r, [attempt({ id: "att_c", requestId: "req_count", usage: undefined, charge: undefined, unbilled: true, evidence: { class: "success", reason: "ok" } })])!;
    expect(call.attempts).toEqual([{ attemptId: "att_c", backend: "sim", protocol: "openai-chat", codecVersion: "1", outcome: "success", usage: "none", usageSource: "unknown", costMicros: 0 }]);
    expect(call.costMicros).toBe(0);
  });

  it("names an attempt of another model a fallback, and never records an unattributed call", () => {
    const r = modelRecord({ requestId: "req_2" });
    const call = callOf(r, [attempt({ id: "a", requestId: "req_2", outcome: "timeout", usage: undefined, charge: { usage: "unknown", costMicros: 0, currency: "USD" } }), attempt({ id: "b", requestId: "req_2", logicalModel: "small" })])!;
    expect(call).toMatchObject({ retries: 0, fallbacks: 1, target: "small" });
    expect(callOf(modelRecord({ requestId: "req_3", attribution: undefined }), [])).toBeUndefined();
    // Refused because the task is another project's: not a call of that task.
    expect(callOf(modelRecord({ requestId: "req_3b", outcome: "error", errorCode: "task_not_yours" }), [])).toBeUndefined();
    expect(callOf(modelRecord({ requestId: "req_4", attribution: { sessionId: "s" } }), [])).toBeUndefined();
  });

  it("records an MCP tool call with its charge, and a denied one with no attempt", () => {
    const mcp = { method: "tools/call", jsonrpcId: 1, protocolVersion: "2026-07-28", server: "tools", target: "search", decision: { allowed: true, rule: "r", policyRevision: "mcp-1", reason: "allowed" }, toolSent: true, charge: { rule: "priced", attemptId: "att_t", micros: 10_000, currency: "USD", priceVersion: "v", settlement: "charged" as const } };
    const call = callOf(modelRecord({ requestId: "req_5", mcp }), [])!;
    expect(call).toMatchObject({ kind: "tool", target: "tools/search", tool: "tools/search", costMicros: 10_000, attempts: [{ attemptId: "att_t", usage: "known", costMicros: 10_000 }] });
    const denied = callOf(modelRecord({ requestId: "req_6", outcome: "error", errorCode: "tool_not_allowed", mcp: { ...mcp, charge: undefined, toolSent: undefined, decision: { allowed: false, rule: undefined, policyRevision: "mcp-1", reason: "no rule" } } }), [])!;
    expect(denied).toMatchObject({ kind: "tool", attempts: [], costMicros: 0, errorCode: "tool_not_allowed" });
    expect(denied.tool).toBeUndefined();
  });
});

describe("audit events of a record", () => {
  it("derives the decision and the execution of a tool call, then the record's own events", () => {
    const approval: AuditEvent = { id: "evt_a", at: 1_100, type: "approval.requested", tenant: "demo", subject: "k1", taskId: "task-1", approvalId: "apr_1" };
    const mcp = { method: "tools/call", jsonrpcId: 1, protocolVersion: "2026-07-28", server: "tools", target: "search", decision: { allowed: true, rule: "r", policyRevision: "mcp-1", reason: "allowed" }, toolError: true, toolSent: true, approvalId: "apr_1" };
    const events = auditEventsOf(modelRecord({ requestId: "req_7", mcp, events: [approval] }), [], ids, "attributed");
    expect(events.map((e) => e.type)).toEqual(["decision.allowed", "tool.executed", "approval.requested"]);
    expect(events[1]).toMatchObject({ execution: "failed", usage: "none", target: { kind: "tool", server: "tools", name: "search" }, callId: "req_7", taskId: "task-1", policyRevision: "mcp-1", approvalId: "apr_1" });
    // A server that asked the client for input first: this round is not the call's result.
    expect(auditEventsOf(modelRecord({ requestId: "req_7b", mcp: { ...mcp, toolError: undefined, inputRequired: true } }), [], ids, "attributed")[1]).toMatchObject({ type: "tool.executed", execution: "input_required" });
  });

  it("records no execution for a call that was allowed but never sent (held for approval, refused by budget)", () => {
    const mcp = { method: "tools/call", jsonrpcId: 1, protocolVersion: "2026-07-28", server: "tools", target: "search", decision: { allowed: true, rule: "r", policyRevision: "mcp-1", reason: "allowed" } };
    const held = modelRecord({ requestId: "req_12", outcome: "error", errorCode: "approval_required", mcp });
    expect(auditEventsOf(held, [], ids, "attributed").map((e) => e.type)).toEqual(["decision.allowed"]);
    // Nor is it a tool call of its task.
    expect(callOf(held, [])).toMatchObject({ kind: "tool", attempts: [], tool: undefined });
  });

  it("says a model completed and, apart, that it proposed tool calls", () => {
    const events = auditEventsOf(modelRecord({ requestId: "req_8" }), [attempt({ id: "att_8", requestId: "req_8", stopReason: "tool_use" })], ids, "attributed");
    expect(events.map((e) => e.type)).toEqual(["model.completed", "model.tool_call_proposed"]);
    expect(events[0]).toMatchObject({ attemptId: "att_8", execution: "succeeded", usage: "known", target: { kind: "model", name: "gpt" } });
  });

  it("names each tool a model proposed, one event each, when the attempt recorded them", () => {
    const events = auditEventsOf(modelRecord({ requestId: "req_9" }), [attempt({ id: "att_9", requestId: "req_9", stopReason: "tool_use", toolCallsProposed: ["lookup", "send_mail"] })], ids, "attributed");
    expect(events.map((e) => e.type)).toEqual(["model.completed", "model.tool_call_proposed", "model.tool_call_proposed"]);
    expect(events.slice(1).map((e) => e.target)).toEqual([
      { kind: "tool", name: "lookup" },
      { kind: "tool", name: "send_mail" },
    ]);
  });
});

describe("model completions in the audit trail", () => {
  it("are events for calls that name a task, and for every call only when asked", () => {
    const unattributed = modelRecord({ requestId: "req_10", attribution: undefined });
    const proposing = [attempt({ id: "att_10", requestId: "req_10", stopReason: "tool_use", toolCallsProposed: ["lookup"] })];
    // An unattributed call's completion is on its access line; the tool it proposed is still an event.
    expect(auditEventsOf(unattributed, proposing, ids, "attributed").map((e) => e.type)).toEqual(["model.tool_call_proposed"]);
    expect(auditEventsOf(unattributed, proposing, ids, "all").map((e) => e.type)).toEqual(["model.completed", "model.tool_call_proposed"]);
    expect(auditEventsOf(modelRecord({ requestId: "req_11" }), [attempt({ id: "att_11", requestId: "req_11" })], ids, "attributed")).toMatchObject([{ type: "model.completed", taskId: "task-1", attemptId: "att_11" }]);
  });
});

describe("task rollups", () => {
  it("name the project the task is bound to: its first call's", () => {
    const head = { taskId: "P", tenant: "demo", children: [], firstSeen: 100, lastSeen: 300 };
    const call = (requestId: string, chargeTo: string | undefined, at: number) => callOf(modelRecord({ requestId, chargeTo, receivedAt: at }), [attempt({ id: `a_${requestId}`, requestId })])!;
    expect(rollupTask(head, [call("p1", "platform/agents", 100), call("p2", "platform/other", 200)], []).project).toBe("platform/agents");
    // Charged to a team only, or to nothing: no project.
    expect(rollupTask(head, [call("p3", "platform", 100)], []).project).toBeUndefined();
    expect(rollupTask(head, [call("p4", undefined, 100)], []).project).toBeUndefined();
  });

  it("equal the sums of their calls' attempts, with distinct sessions and turns and the time approvals waited", () => {
    const calls: LedgerCall[] = [];
    const add = (requestId: string, attribution: RequestRecord["attribution"], attempts: AttemptRecord[], at: number) => calls.push(callOf(modelRecord({ requestId, attribution, receivedAt: at, endedAt: at + 10 }), attempts)!);
    add("r1", { taskId: "T", sessionId: "s1", turnId: "t1" }, [attempt({ id: "a1", requestId: "r1", outcome: "timeout", usage: undefined, charge: { usage: "unknown", costMicros: 0, currency: "USD" } }), attempt({ id: "a2", requestId: "r1" })], 100);
    add("r2", { taskId: "T", sessionId: "s1", turnId: "t2" }, [attempt({ id: "a3", requestId: "r2", logicalModel: "small", usage: { inputTokens: 7, outputTokens: 3, source: "provider" }, charge: { usage: "known", costMicros: 40, currency: "USD" } })], 200);
    add("r3", { taskId: "T", sessionId: "s2", turnId: "t1" }, [attempt({ id: "a4", requestId: "r3" })], 300);
    const tool = { method: "tools/call", jsonrpcId: 1, protocolVersion: "2026-07-28", server: "tools", target: "search", decision: { allowed: true, rule: "r", policyRevision: "p", reason: "ok" }, toolSent: true, charge: { rule: "x", attemptId: "at", micros: 1_000, currency: "USD", priceVersion: undefined, settlement: "charged" as const } };
    calls.push(callOf(modelRecord({ requestId: "r4", mcp: tool, attribution: { taskId: "T", sessionId: "s2", turnId: "t1" }, receivedAt: 400, endedAt: 450 }), [])!);
    const events: AuditEvent[] = [
      { id: "e1", at: 1_000, type: "approval.requested", tenant: "demo", subject: "k1", taskId: "T", approvalId: "ap1" },
      { id: "e2", at: 4_000, type: "approval.granted", tenant: "demo", subject: "k1", taskId: "T", approvalId: "ap1" },
      { id: "e3", at: 5_000, type: "approval.requested", tenant: "demo", subject: "k1", taskId: "T", approvalId: "ap2" },
      { id: "e4", at: 5_500, type: "approval.denied", tenant: "demo", subject: "k1", taskId: "T", approvalId: "ap2" },
    ];
    const r = rollupTask({ taskId: "T", tenant: "demo", children: ["T.child"], firstSeen: 100, lastSeen: 450 }, calls, events);
    const attempts = calls.flatMap((c) => c.attempts);
    expect(r).toMatchObject({
      calls: 4,
      attempts: attempts.length,
      retries: 1,
      fallbacks: 0,
      unknownUsageAttempts: 1,
      costMicros: attempts.reduce((n, a) => n + a.costMicros, 0),
      currency: "USD",
      // The timed-out attempt reported no usage: it adds no tokens (and counts as unknown).
      tokens: { input: 10 + 7 + 10, output: 5 + 3 + 5 },
      byModel: { gpt: { calls: 2, costMicros: 600, tokens: { input: 20, output: 10 } }, small: { calls: 1, costMicros: 40, tokens: { input: 7, output: 3 } } },
      toolCalls: { "tools/search": 1 },
      approvals: { requested: 2, granted: 1, denied: 1, expired: 0, waitedMs: 3_000 + 500 },
      sessions: 2,
      turns: 3,
      children: ["T.child"],
      firstSeen: 100,
      lastSeen: 450,
    });
    expect(r.costMicros).toBe(300 + 40 + 300 + 1_000);
  });
});
