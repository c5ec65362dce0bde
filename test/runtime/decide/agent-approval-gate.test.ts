import { describe, expect, it } from "vitest";
import { callKey } from "../../../src/approvals/approval-desk.ts";
import type { ApprovalDeps, ApprovalDeskRpc } from "../../../src/approvals/approval-desk-rpc.ts";
import { AgentTaskHandleSealer } from "../../../src/approvals/agent-task-handle.ts";
import { RequestStateSealer } from "../../../src/approvals/request-state.ts";
import { TaskHandleSealer } from "../../../src/approvals/task-handle.ts";
import { RequestContext } from "../../../src/context/request-context.ts";
import { agentApprovalFacts, gateAgentMessage, type GatedMessage } from "../../../src/decide/agent-approval-gate.ts";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import { runClaimed } from "../../../src/invoker/approval-claim.ts";
import type { Principal } from "../../../src/publication/principal.ts";
import { approvalTaskOf } from "../../../src/respond/a2a-approval-task.ts";
import { noSettle } from "../support/executor-harness.ts";
import { memoryDesk as memoryDeskOn } from "../support/mcp-harness.ts";

const clock = { now: 1_000 };
const SECRET = "a-secret-of-enough-length";
const memoryDesk = (): ApprovalDeskRpc => memoryDeskOn(() => clock.now);

const skills = [
  { id: "refund", name: "Refund", description: "refunds an order", tags: ["billing"], examples: [], inputModes: undefined, outputModes: undefined },
  { id: "faq", name: "FAQ", description: "answers questions", tags: [], examples: [], inputModes: undefined, outputModes: undefined },
];
const message = { messageId: "m-1", role: "ROLE_USER", parts: [{ text: "refund order 42" }] };

async function setup() {
  const desk = memoryDesk();
  const deps: ApprovalDeps = {
    desk: () => desk,
    sealer: await RequestStateSealer.fromSecret(SECRET),
    tasks: await TaskHandleSealer.fromSecret(SECRET),
    agentTasks: await AgentTaskHandleSealer.fromSecret(SECRET),
    ttlMs: 60_000,
    statusUrl: (id, origin) => `${origin}/approvals/${id}`,
  };
  const context = () => {
    const ctx = new RequestContext({ requestId: `req_${Math.random()}`, receivedAt: 0, clock: { now: () => clock.now }, scheduler: { schedule: () => () => {} }, sink: { attemptFinished: () => {}, requestFinished: () => {} }, waitUntil: () => {}, settle: noSettle, onUndoError: (err) => { throw err; } });
    ctx.record.a2a = { method: "SendMessage", jsonrpcId: 1, generation: "1.0", agent: "helpdesk", skill: "refund" };
    return ctx;
  };
  const msg = (over: Partial<GatedMessage> = {}): GatedMessage => ({
    principal: { tenantId: "acme", keyId: "k1" } as Principal,
    decision: { allowed: true, rule: "risky", policyRevision: "p1", reason: "allowed by rule risky after approval", approval: "required", skill: "refund" },
    agent: "helpdesk",
    skill: "refund",
    skills,
    message,
    origin: "http://127.0.0.1:9",
    ...over,
  });
  return { desk, deps, context, msg };
}

describe("gateAgentMessage", () => {
  it("sends a message that needs no approval straight on, and refuses one that does where approvals are not configured", async () => {
    const { deps, context, msg } = await setup();
    expect(await gateAgentMessage(deps, context(), msg({ decision: { allowed: true, rule: "plain", policyRevision: "p1", reason: "allowed", skill: "refund" } }))).toEqual({ kind: "send", approved: undefined });
    await expect(gateAgentMessage(undefined, context(), msg())).rejects.toMatchObject({ code: "tool_not_allowed" });
  });

  it("holds a message that needs approval: an agent approval at the tool calls' desk, and approval.requested naming the skill", async () => {
    const { desk, deps, context, msg } = await setup();
    const ctx = context();
    const out = await gateAgentMessage(deps, ctx, msg());
    if (out.kind !== "held") throw new Error("expected the message held");
    expect(out.approval).toMatchObject({ state: "pending", kind: "agent", server: "helpdesk", tool: "refund", rule: "risky", policyRevision: "p1", statusUrl: `http://127.0.0.1:9/approvals/${out.approval.id}` });
    expect(await desk.list("pending")).toHaveLength(1);
    expect(ctx.record.events).toMatchObject([{ type: "approval.requested", approvalId: out.approval.id, target: { kind: "skill", server: "helpdesk", name: "refund" } }]);
    // Metadata only: the message's text is in no event.
    expect(JSON.stringify(ctx.record.events)).not.toContain("order 42");
    // The same message again (a retry: same messageId) finds the same approval; another message asks its own.
    const again = await gateAgentMessage(deps, context(), msg());
    expect(again).toMatchObject({ kind: "held", approval: { id: out.approval.id } });
    const other = await gateAgentMessage(deps, context(), msg({ message: { ...message, messageId: "m-2" } }));
    expect(other.kind === "held" && other.approval.id).not.toBe(out.approval.id);
  });

  it("binds an agent approval to the agent, the skill as declared, the message and the rule — and leaves a tool call's facts as they were", async () => {
    const { context, msg } = await setup();
    const ctx = context();
    const base = await agentApprovalFacts(ctx, msg());
    expect(base).toMatchObject({ kind: "agent", server: "helpdesk", tool: "refund", rule: "risky", principal: { tenant: "acme", key: "k1" } });
    expect((await agentApprovalFacts(ctx, msg({ skill: undefined }))).tool).toBe("*");
    expect((await agentApprovalFacts(ctx, msg({ skills: [{ ...skills[0]!, description: "refunds anything" }] }))).toolDigest).not.toBe(base.toolDigest);
    // Another skill's description changing does not touch this skill's approval.
    expect((await agentApprovalFacts(ctx, msg({ skills: [skills[0]!, { ...skills[1]!, description: "x" }] }))).toolDigest).toBe(base.toolDigest);
    expect((await agentApprovalFacts(ctx, msg({ message: { ...message, parts: [{ text: "refund order 43" }] } }))).argumentsDigest).not.toBe(base.argumentsDigest);
    // A tool call's lookup key is what it was before agents had approvals; an agent's is its own.
    const { kind: _kind, ...asTool } = base;
    expect(callKey(asTool)).toBe(JSON.stringify(["acme", "k1", null, "helpdesk", "refund", base.argumentsDigest]));
    expect(callKey(base)).not.toBe(callKey(asTool));
  });

  it("continues a held message: pending is held again; approved is sent once under its claim; a second continuation is refused", async () => {
    const { desk, deps, context, msg } = await setup();
    const held = await gateAgentMessage(deps, context(), msg());
    if (held.kind !== "held") throw new Error("expected the message held");
    const id = held.approval.id;
    expect(await gateAgentMessage(deps, context(), msg({ continuing: { approvalId: id } }))).toMatchObject({ kind: "held", approval: { id, state: "pending" } });
    await desk.decide(id, "approve", "alice", "ok");
    const ctx = context();
    const go = await gateAgentMessage(deps, ctx, msg({ continuing: { approvalId: id } }));
    if (go.kind !== "send" || !go.approved) throw new Error("expected an approved send");
    let sent = 0;
    await runClaimed(ctx, go.approved, async (onSent) => (onSent(), sent++, { ok: true }));
    expect(sent).toBe(1);
    expect(ctx.record.a2a?.approvalId).toBe(id);
    expect(await desk.get(id)).toMatchObject({ state: "executed", execution: "succeeded" });
    const second = await gateAgentMessage(deps, context(), msg({ continuing: { approvalId: id } })).catch((e: unknown) => e);
    expect(second).toBeInstanceOf(GatewayError);
    expect(second).toMatchObject({ code: "approval_refused", param: "params.message.taskId", message: expect.stringMatching(/already used/) });
  });

  it("of two concurrent continuations of an approved message, one is sent; the other is refused in A2A terms", async () => {
    const { desk, deps, context, msg } = await setup();
    const held = await gateAgentMessage(deps, context(), msg());
    if (held.kind !== "held") throw new Error("expected the message held");
    await desk.decide(held.approval.id, "approve", "alice", "ok");
    const [a, b] = [context(), context()];
    const ga = await gateAgentMessage(deps, a, msg({ continuing: { approvalId: held.approval.id } }));
    const gb = await gateAgentMessage(deps, b, msg({ continuing: { approvalId: held.approval.id } }));
    if (ga.kind !== "send" || gb.kind !== "send") throw new Error("expected both to pass the gate");
    await runClaimed(a, ga.approved, async () => ({ ok: true }));
    await expect(runClaimed(b, gb.approved, async () => ({ ok: true }))).rejects.toMatchObject({ code: "approval_refused", param: "params.message.taskId" });
  });

  it("re-asks the policy on every send: a continuation whose rule no longer requires approval, or whose message or skill changed, is refused", async () => {
    const { desk, deps, context, msg } = await setup();
    const held = await gateAgentMessage(deps, context(), msg());
    if (held.kind !== "held") throw new Error("expected the message held");
    await desk.decide(held.approval.id, "approve", "alice", "ok");
    const continuing = { approvalId: held.approval.id };
    await expect(gateAgentMessage(deps, context(), msg({ continuing, decision: { allowed: true, rule: "plain", policyRevision: "p2", reason: "allowed", skill: "refund" } }))).rejects.toMatchObject({ code: "approval_refused" });
    await expect(gateAgentMessage(deps, context(), msg({ continuing, decision: { allowed: true, rule: "risky", policyRevision: "p2", reason: "allowed", approval: "required", skill: "refund" } }))).rejects.toMatchObject({ code: "approval_refused" });
    await expect(gateAgentMessage(deps, context(), msg({ continuing, skills: [{ ...skills[0]!, description: "changed" }] }))).rejects.toMatchObject({ code: "approval_refused" });
    // Nothing was claimed: the approval still stands for the unchanged message.
    expect(await desk.get(held.approval.id)).toMatchObject({ state: "approved" });
  });

  it("reads the approval task in each generation, from pending to rejected", async () => {
    const { desk, deps, context, msg } = await setup();
    const held = await gateAgentMessage(deps, context(), msg());
    if (held.kind !== "held") throw new Error("expected the message held");
    const handle = { approvalId: held.approval.id, tenant: "acme", key: "k1", endpoint: "helpdesk", agent: "helpdesk", skill: "refund", generation: "1.0" as const, message, contextId: "ctx-1", issuedAt: 1_000, expiresAt: 100_000 };
    const v1 = approvalTaskOf("ga1.x.y", handle, held.approval, "1.0") as any;
    expect(v1).toMatchObject({ id: "ga1.x.y", contextId: "ctx-1", status: { state: "TASK_STATE_AUTH_REQUIRED", message: { role: "ROLE_AGENT" } }, metadata: { "sluice.dev/approval": { id: held.approval.id, url: held.approval.statusUrl, state: "pending" } } });
    expect(v1.status.message.parts[0].text).toContain(held.approval.statusUrl);
    const v03 = approvalTaskOf("ga1.x.y", handle, held.approval, "0.3") as any;
    expect(v03).toMatchObject({ kind: "task", status: { state: "auth-required", message: { kind: "message", role: "agent" } } });
    const denied = (await desk.decide(held.approval.id, "deny", "alice", "too risky")) as { approval: NonNullable<Awaited<ReturnType<ApprovalDeskRpc["get"]>>> };
    expect((approvalTaskOf("ga1.x.y", handle, denied.approval, "1.0") as any).status.state).toBe("TASK_STATE_REJECTED");
    expect((approvalTaskOf("ga1.x.y", handle, denied.approval, "0.3") as any).status.state).toBe("rejected");
  });
});
