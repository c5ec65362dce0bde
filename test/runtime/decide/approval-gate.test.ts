import { describe, expect, it } from "vitest";
import type { ApprovalDeps, ApprovalDeskRpc } from "../../../src/approvals/approval-desk-rpc.ts";
import { gateToolCall, type GatedCall } from "../../../src/decide/approval-gate.ts";
import { runClaimed } from "../../../src/invoker/approval-claim.ts";
import { RequestStateSealer } from "../../../src/approvals/request-state.ts";
import { TaskHandleSealer } from "../../../src/approvals/task-handle.ts";
import { AgentTaskHandleSealer } from "../../../src/approvals/agent-task-handle.ts";
import { RequestContext } from "../../../src/context/request-context.ts";
import { noSettle } from "../support/executor-harness.ts";
import { memoryDesk as memoryDeskOn } from "../support/mcp-harness.ts";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import type { Principal } from "../../../src/publication/principal.ts";

const clock = { now: 1_000 };

/** The desk's logic behind the RPC shape, with the test's clock (the Durable Object uses its own). */
const memoryDesk = (): ApprovalDeskRpc => memoryDeskOn(() => clock.now);

async function setup() {
  const desk = memoryDesk();
  const deps: ApprovalDeps = { desk: () => desk, sealer: await RequestStateSealer.fromSecret("a-secret-of-enough-length"), tasks: await TaskHandleSealer.fromSecret("a-secret-of-enough-length"), agentTasks: await AgentTaskHandleSealer.fromSecret("a-secret-of-enough-length"), ttlMs: 60_000, statusUrl: (id, origin) => `${origin}/approvals/${id}` };
  const context = (taskId?: string) => {
    const ctx = new RequestContext({ requestId: `req_${Math.random()}`, receivedAt: 0, clock: { now: () => clock.now }, scheduler: { schedule: () => () => {} }, sink: { attemptFinished: () => {}, requestFinished: () => {} }, waitUntil: () => {}, settle: noSettle, onUndoError: (err) => { throw err; } });
    if (taskId) ctx.record.attribution = { taskId, sessionId: undefined, turnId: undefined, parentTaskId: undefined };
    ctx.record.mcp = { method: "tools/call", jsonrpcId: 1, protocolVersion: "2025-11-25" };
    return ctx;
  };
  const call = (over: Partial<GatedCall> = {}): GatedCall => ({
    principal: { tenantId: "acme", keyId: "k1" } as Principal,
    era: "stateful",
    decision: { allowed: true, rule: "risky", policyRevision: "p1", reason: "allowed by rule risky after approval", approval: "required" },
    server: "files",
    tool: "delete",
    args: { path: "/tmp/x" },
    params: {},
    toolDefinition: async () => ({ name: "delete", inputSchema: { type: "object" } }),
    origin: () => "http://127.0.0.1:9",
    ...over,
  });
  return { desk, deps, context, call };
}

describe("gateToolCall", () => {
  it("passes a call that needs no approval straight on", async () => {
    const { deps, context, call } = await setup();
    const gate = await gateToolCall(deps, context(), call({ decision: { allowed: true, rule: "plain", policyRevision: "p1", reason: "allowed" } }));
    expect(gate.kind).toBe("execute");
  });

  it("refuses a call that needs approval when approvals are not configured", async () => {
    const { context, call } = await setup();
    await expect(gateToolCall(undefined, context(), call())).rejects.toMatchObject({ code: "tool_not_allowed" });
  });

  it("2025 era: approval_required with the URL elicitation, and the approval.requested event on the record", async () => {
    const { deps, context, call } = await setup();
    const ctx = context("task-9");
    const err = await gateToolCall(deps, ctx, call()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GatewayError);
    const e = err as GatewayError;
    expect(e.code).toBe("approval_required");
    const elicitation = (e.details![0] as { elicitations: { mode: string; elicitationId: string; url: string }[] }).elicitations[0]!;
    expect(elicitation.url).toBe(`http://127.0.0.1:9/approvals/${elicitation.elicitationId}`);
    expect(ctx.record.events).toMatchObject([{ type: "approval.requested", tenant: "acme", subject: "k1", taskId: "task-9", approvalId: elicitation.elicitationId, policyRevision: "p1", target: { kind: "tool", server: "files", name: "delete" } }]);
    // Metadata only: the arguments never reach the event.
    expect(JSON.stringify(ctx.record.events)).not.toContain("/tmp/x");
  });

  it("2026 era: a client that did not declare URL elicitation is told so, and no approval is opened for it", async () => {
    const { desk, deps, context, call } = await setup();
    await expect(gateToolCall(deps, context(), call({ era: "stateless", clientCapabilities: { elicitation: { form: {} } } }))).rejects.toMatchObject({ code: "mcp_missing_capability" });
    expect(await desk.list()).toEqual([]);
  });

  it("2026 era: input_required, then the approved retry with its state runs once under its approval", async () => {
    const { desk, deps, context, call } = await setup();
    const urlCapable = { elicitation: { url: {} } };
    const first = await gateToolCall(deps, context(), call({ era: "stateless", clientCapabilities: urlCapable }));
    if (first.kind !== "answer") throw new Error("expected an answer");
    expect(first.result).toMatchObject({ resultType: "input_required", inputRequests: { approval: { method: "elicitation/create", params: { mode: "url" } } } });
    const id = (first.result.inputRequests as { approval: { params: { elicitationId: string } } }).approval.params.elicitationId;
    await desk.decide(id, "approve", "alice", "ok");
    const ctx = context();
    const retry = await gateToolCall(deps, ctx, call({ era: "stateless", clientCapabilities: urlCapable, params: { requestState: first.result.requestState } }));
    if (retry.kind !== "execute") throw new Error("expected execution");
    let runs = 0;
    await runClaimed(ctx, retry.approved, async () => (runs++, { ok: true }));
    expect(runs).toBe(1);
    // The request's own tool.executed event (derived from its record) names the approval.
    expect(ctx.record.mcp?.approvalId).toBe(id);
    expect(ctx.record.events).toEqual([]);
    expect(await desk.get(id)).toMatchObject({ state: "executed", execution: "succeeded" });
  });

  it("a server's input_required hands the claim back, so the round bringing the input runs under the same approval", async () => {
    const { desk, deps, context, call } = await setup();
    const err = (await gateToolCall(deps, context(), call({ era: "stateful" })).catch((e: unknown) => e)) as GatewayError;
    const id = (err.details![0] as { elicitations: { elicitationId: string }[] }).elicitations[0]!.elicitationId;
    await desk.decide(id, "approve", "alice", "ok");
    const firstCtx = context();
    const first = await gateToolCall(deps, firstCtx, call());
    if (first.kind !== "execute") throw new Error("expected execution");
    await runClaimed(firstCtx, first.approved, async () => ({ ok: true, result: { resultType: "input_required", inputRequests: { confirm: { method: "elicitation/create" } } } }));
    // Handed back before the client was answered: the approval is approved again, not used.
    const handedBack = await desk.get(id);
    expect(handedBack).toMatchObject({ state: "approved" });
    expect(handedBack!.execution).toBeUndefined();
    const secondCtx = context();
    const second = await gateToolCall(deps, secondCtx, call({ params: { inputResponses: { confirm: { action: "accept" } } } }));
    if (second.kind !== "execute") throw new Error("expected execution");
    await runClaimed(secondCtx, second.approved, async () => ({ ok: true, result: { content: [] } }));
    const used = await desk.get(id);
    expect(used).toMatchObject({ state: "executed", execution: "succeeded" });
    expect(used!.history.map((h) => h.execution ?? h.event)).toEqual(["requested", "granted", "executed", "input_required", "executed", "succeeded"]);
    // Used now: a third call is refused.
    await expect(gateToolCall(deps, context(), call())).rejects.toMatchObject({ code: "approval_refused", message: expect.stringMatching(/already used/) });
  });

  it("an execution that throws is recorded as unknown, for reconciliation", async () => {
    const { desk, deps, context, call } = await setup();
    const err = (await gateToolCall(deps, context(), call()).catch((e: unknown) => e)) as GatewayError;
    const id = (err.details![0] as { elicitations: { elicitationId: string }[] }).elicitations[0]!.elicitationId;
    await desk.decide(id, "approve", "alice", "ok");
    const ctx = context();
    const gate = await gateToolCall(deps, ctx, call());
    if (gate.kind !== "execute") throw new Error("expected execution");
    await expect(
      runClaimed(ctx, gate.approved, async (sent) => {
        sent();
        throw new Error("connection cut");
      }),
    ).rejects.toThrow("connection cut");
    // The claim is the request's: its terminal (which the runner runs on the failure) tells the desk.
    expect(await desk.get(id)).toMatchObject({ state: "executed", execution: "claimed" });
    ctx.finish({ kind: "failed", error: new GatewayError("upstream_error", "The connection was cut.") });
    expect(await desk.get(id)).toMatchObject({ state: "executed", execution: "unknown" });
  });

  it("a claim whose call was never sent goes back: the approval stands for the retry", async () => {
    const { desk, deps, context, call } = await setup();
    const err = (await gateToolCall(deps, context(), call()).catch((e: unknown) => e)) as GatewayError;
    const id = (err.details![0] as { elicitations: { elicitationId: string }[] }).elicitations[0]!.elicitationId;
    await desk.decide(id, "approve", "alice", "ok");
    const ctx = context();
    const gate = await gateToolCall(deps, ctx, call());
    if (gate.kind !== "execute") throw new Error("expected execution");
    await expect(runClaimed(ctx, gate.approved, async () => Promise.reject(new Error("no session upstream")))).rejects.toThrow("no session upstream");
    ctx.finish({ kind: "failed", error: new GatewayError("upstream_unreachable", "The server could not be reached.") });
    const back = await desk.get(id);
    expect(back).toMatchObject({ state: "approved" });
    expect(back!.history.map((h) => h.execution ?? h.event)).toEqual(["requested", "granted", "executed", "not_sent"]);
    // And a request that was stopped before it claims leaves it alone.
    const stopped = context();
    stopped.abort("client_disconnected");
    const again = await gateToolCall(deps, context(), call());
    if (again.kind !== "execute") throw new Error("expected execution");
    await expect(runClaimed(stopped, again.approved, async () => ({ ok: true }))).rejects.toMatchObject({ code: "client_closed" });
    expect(await desk.get(id)).toMatchObject({ state: "approved" });
  });

  it("an expired approval is refused and recorded as approval.expired", async () => {
    const { deps, context, call } = await setup();
    await gateToolCall(deps, context(), call()).catch(() => undefined);
    clock.now += 60_000;
    const ctx = context();
    await expect(gateToolCall(deps, ctx, call())).rejects.toMatchObject({ code: "approval_refused", message: expect.stringMatching(/expired/) });
    expect(ctx.record.events.map((e) => e.type)).toEqual(["approval.expired"]);
  });

  it("tasks: a task-augmented call is answered with its approval to make a task of, pending or already approved", async () => {
    const { desk, deps, context, call } = await setup();
    const ctx = context();
    const created = await gateToolCall(deps, ctx, call({ task: { kind: "create" } }));
    if (created.kind !== "task") throw new Error("expected a task");
    expect(created.approval).toMatchObject({ state: "pending", server: "files", tool: "delete" });
    expect(ctx.record.events.map((e) => e.type)).toEqual(["approval.requested"]);
    await desk.decide(created.approval.id, "approve", "alice", "ok");
    // The same call asked again as a task finds the same approval, now approved: nothing runs yet.
    const again = await gateToolCall(deps, context(), call({ task: { kind: "create" } }));
    expect(again).toMatchObject({ kind: "task", approval: { id: created.approval.id, state: "approved" } });
  });

  it("tasks: a task's tasks/result is -32042 while pending, runs once when approved, and is refused once used", async () => {
    const { desk, deps, context, call } = await setup();
    const created = await gateToolCall(deps, context(), call({ task: { kind: "create" } }));
    if (created.kind !== "task") throw new Error("expected a task");
    const resume = { task: { kind: "resume" as const, approvalId: created.approval.id } };
    await expect(gateToolCall(deps, context(), call(resume))).rejects.toMatchObject({ code: "approval_required" });
    await desk.decide(created.approval.id, "approve", "alice", "ok");
    const resumeCtx = context();
    const gate = await gateToolCall(deps, resumeCtx, call(resume));
    if (gate.kind !== "execute") throw new Error("expected execution");
    let runs = 0;
    await runClaimed(resumeCtx, gate.approved, async () => (runs++, { ok: true }));
    expect(runs).toBe(1);
    await expect(gateToolCall(deps, context(), call(resume))).rejects.toMatchObject({ code: "approval_refused", message: expect.stringMatching(/keeps no results/) });
    // Never a new approval for the task's call: the desk still has the one.
    expect(await desk.list()).toHaveLength(1);
  });

  it("tasks: the handle's approval covers the call only while policy and tool are unchanged", async () => {
    const { desk, deps, context, call } = await setup();
    const created = await gateToolCall(deps, context(), call({ task: { kind: "create" } }));
    if (created.kind !== "task") throw new Error("expected a task");
    await desk.decide(created.approval.id, "approve", "alice", "ok");
    const resume = { task: { kind: "resume" as const, approvalId: created.approval.id } };
    const changedPolicy = { allowed: true, rule: "risky", policyRevision: "p2", reason: "allowed by rule risky after approval", approval: "required" as const };
    await expect(gateToolCall(deps, context(), call({ ...resume, decision: changedPolicy }))).rejects.toMatchObject({ code: "approval_refused" });
    await expect(gateToolCall(deps, context(), call({ ...resume, toolDefinition: async () => ({ name: "delete", inputSchema: { type: "object", properties: { force: {} } } }) }))).rejects.toMatchObject({ code: "approval_refused" });
    await expect(gateToolCall(deps, context(), call({ ...resume, decision: { allowed: true, rule: "plain", policyRevision: "p2", reason: "allowed" } }))).rejects.toMatchObject({ code: "approval_refused" });
    await expect(gateToolCall(deps, context(), call({ task: { kind: "resume", approvalId: "ap_YWNtZQ_00000000000000000000000000000000" } }))).rejects.toMatchObject({ code: "approval_refused" });
    expect(await desk.get(created.approval.id)).toMatchObject({ state: "approved" });
  });
});
