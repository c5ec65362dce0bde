import { describe, expect, it } from "vitest";
import { auditEventsOf, callOf } from "../../../src/task-ledger/call-record.ts";
import { requestRowOf } from "../../../src/task-ledger/request-log.ts";
import { modelRecord } from "./task-fixtures.ts";

let seq = 0;
const ids = () => `evt_${++seq}`;
const decision = { allowed: true, rule: "callers", policyRevision: "a2a-1", reason: "allowed by rule callers" };
const charge = { rule: "priced", attemptId: "att_a2a", micros: 10_000, currency: "USD", priceVersion: "v1", settlement: "charged" as const };

describe("an A2A call in the call ledger and the audit", () => {
  it("is the task's call of agent/skill, with its charge as its one attempt; the A2A task id is not the business task", () => {
    const r = modelRecord({ requestId: "req_a2a", entrypoint: "a2a/helpdesk", a2a: { method: "SendMessage", jsonrpcId: 1, generation: "1.0", agent: "helpdesk", skill: "triage", a2aTaskId: "agent-task-1", decision, sent: true, charge } });
    const call = callOf(r, [])!;
    expect(call).toMatchObject({ kind: "agent", target: "helpdesk/triage", costMicros: 10_000, currency: "USD", attempts: [{ attemptId: "att_a2a", backend: "helpdesk", usage: "known", costMicros: 10_000 }] });
    expect(call.taskId).toBe(r.attribution!.taskId);
    expect(call.taskId).not.toBe("agent-task-1");
    const events = auditEventsOf(r, [], ids, "attributed");
    expect(events.map((e) => e.type)).toEqual(["decision.allowed", "agent.executed"]);
    expect(events[1]).toMatchObject({ target: { kind: "skill", server: "helpdesk", name: "triage" }, execution: "succeeded", usage: "known", attemptId: "att_a2a", policyRevision: "a2a-1" });
    expect(requestRowOf(r, [])).toMatchObject({ kind: "agent", model: "helpdesk/triage", backend: "helpdesk", attempts: 1, costMicros: 10_000 });
  });

  it("an agent's own JSON-RPC error is a failed execution, passed on as the agent sent it", () => {
    const r = modelRecord({ requestId: "req_err", a2a: { method: "GetTask", jsonrpcId: 2, generation: "1.0", agent: "helpdesk", skill: undefined, decision, sent: true, agentError: -32001 } });
    expect(auditEventsOf(r, [], ids, "attributed").find((e) => e.type === "agent.executed")).toMatchObject({ execution: "failed", usage: "none" });
  });

  it("a denied call has its decision and no execution; a call never sent has no attempt", () => {
    const denied = modelRecord({ requestId: "req_den", outcome: "error", errorCode: "tool_not_allowed", a2a: { method: "message/send", jsonrpcId: "x", generation: "0.3", agent: "helpdesk", skill: undefined, decision: { ...decision, allowed: false, rule: undefined, reason: "no rule allows it" } } });
    expect(auditEventsOf(denied, [], ids, "attributed").map((e) => e.type)).toEqual(["decision.denied"]);
    expect(auditEventsOf(denied, [], ids, "attributed")[0]!.target).toEqual({ kind: "skill", server: "helpdesk", name: "*" });
    expect(callOf(denied, [])).toMatchObject({ kind: "agent", target: "helpdesk/*", attempts: [], costMicros: 0 });
  });
});
