/**
 * The approval gate of A2A messages: the decide phase of a message whose allowing rule says
 * `approval: required`, at the same tenant's approval desk as MCP tool calls (one machinery for
 * both). Such a message is not sent: a pending approval is stored and the caller is answered with
 * an A2A task in `auth-required` (src/respond/a2a-approval-task.ts) whose id carries the message,
 * sealed. Sending a message with that task id continues it: the held message runs once the desk
 * has atomically claimed its approval (the invoke phase, src/invoker/approval-claim.ts), after the
 * budget reservation, so a spent budget refuses it and leaves the approval standing. The policy is
 * asked again on every send.
 */

import { approvalId, sameFacts, type Approval, type ApprovalFacts } from "../approvals/approval-desk.ts";
import type { ApprovalDeps } from "../approvals/approval-desk-rpc.ts";
import { auditEvent } from "../approvals/approval-events.ts";
import type { AuditEventType } from "../audit/audit-event.ts";
import type { A2aDecision } from "../a2a/a2a-policy.ts";
import type { RequestContext } from "../context/request-context.ts";
import { canonicalDigest } from "../digest/canonical-digest.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { AgentSkillView } from "../protocol/a2a/agent-card.ts";
import type { Principal } from "../publication/principal.ts";
import type { ApprovedCall } from "./approval-gate.ts";

/** A message as the gate sees it. */
export interface GatedMessage {
  readonly principal: Principal;
  readonly decision: A2aDecision;
  readonly agent: string;
  /** The skill the message is decided by; undefined: it names none. */
  readonly skill: string | undefined;
  /** The agent's card's skills (the approval covers the skill as it is declared now). */
  readonly skills: readonly AgentSkillView[];
  /** The message as the caller wrote it (for a continuation: the held one). */
  readonly message: Readonly<Record<string, unknown>>;
  /** The origin the request came in on (for the status page's URL). */
  readonly origin: string;
  /** A continuation: the approval its task id names (never a new one). */
  readonly continuing?: { readonly approvalId: string } | undefined;
}

/** What happens next: send it (no approval needed, or claimed at invoke), or answer with the approval's task. */
export type AgentGateResult = { readonly kind: "send"; readonly approved: ApprovedCall | undefined } | { readonly kind: "held"; readonly approval: Approval };

/** The approval's facts for a message: an agent's skill as the tool, the message as the arguments. */
export async function agentApprovalFacts(ctx: RequestContext, m: GatedMessage): Promise<ApprovalFacts> {
  const p = m.principal;
  const declared = m.skill === undefined ? m.skills : m.skills.filter((s) => s.id === m.skill);
  return {
    principal: { tenant: p.tenantId, key: p.keyId, ...(p.chargeTo !== undefined ? { chargeTo: p.chargeTo } : {}) },
    ...(ctx.record.attribution?.taskId !== undefined ? { taskId: ctx.record.attribution.taskId } : {}),
    kind: "agent",
    server: m.agent,
    tool: m.skill ?? "*",
    toolDigest: await canonicalDigest({ agent: m.agent, skills: declared }),
    // The whole message, its id included: a retry of the same message (same messageId) finds the same approval.
    argumentsDigest: await canonicalDigest(m.message),
    policyRevision: m.decision.policyRevision,
    rule: m.decision.rule ?? "",
  };
}

/** Why an approval no longer covers a continuation, in A2A terms. */
export function agentRefusal(a: Approval): GatewayError {
  const why =
    a.state === "executed"
      ? "was already used: an approved message is sent once, and its answer went to the message that sent it (the gateway keeps no answers)"
      : a.state === "denied"
        ? `was denied${a.reason ? ` (${a.reason})` : ""}`
        : a.state === "revoked"
          ? `was revoked${a.reason ? ` (${a.reason})` : ""}`
          : "expired before the message was sent";
  return new GatewayError("approval_refused", `The approval ${a.id} of this message ${why}. Send the message anew to ask for a new approval.`, {
    param: "params.message.taskId",
    details: [{ approvalId: a.id, state: a.state }],
  });
}

function notCovered(): GatewayError {
  return new GatewayError("approval_refused", "The task's approval does not cover this message any more (the policy or the agent's skill changed since): send the message anew to ask for a new approval.", {
    param: "params.message.taskId",
  });
}

/**
 * The approval step of one message; a message whose decision needs no approval passes straight on.
 *
 * @throws GatewayError tool_not_allowed (approvals not configured), approval_refused (a continuation its approval no longer covers).
 */
export async function gateAgentMessage(deps: ApprovalDeps | undefined, ctx: RequestContext, m: GatedMessage): Promise<AgentGateResult> {
  if (m.decision.approval !== "required") {
    // A held message whose rule no longer needs approval still runs only by an approval.
    if (m.continuing) throw new GatewayError("approval_refused", `The policy (${m.decision.policyRevision}) no longer asks an approval for this message: send it anew without this taskId.`, { param: "params.message.taskId" });
    return { kind: "send", approved: undefined };
  }
  if (!deps) throw new GatewayError("tool_not_allowed", `The message to agent ${m.agent} needs a human approval, and approvals are not configured on this gateway (policy ${m.decision.policyRevision}): it was not sent.`, { param: "params.message" });
  const desk = deps.desk(m.principal.tenantId);
  const facts = await agentApprovalFacts(ctx, m);
  const now = ctx.clock.now();
  const event = (type: AuditEventType, a: Approval) => ctx.record.events.push(auditEvent(type, a, ctx, now));
  if (m.continuing) {
    const approval = await desk.get(m.continuing.approvalId);
    if (!approval || !sameFacts(approval, facts)) throw notCovered();
    if (approval.state === "pending") return { kind: "held", approval };
    if (approval.state !== "approved") throw agentRefusal(approval);
    return {
      kind: "send",
      approved: { desk, approvalId: approval.id, facts, nonce: undefined, fromTask: true, expired: (a) => event("approval.expired", a), refuse: (a) => (a && sameFacts(a, facts) ? agentRefusal(a) : notCovered()) },
    };
  }
  const id = approvalId(m.principal.tenantId);
  const out = await desk.request(facts, { id, statusUrl: deps.statusUrl(id, m.origin), ttlMs: deps.ttlMs });
  if (out.expired) event("approval.expired", out.expired);
  if (out.created) event("approval.requested", out.approval);
  return { kind: "held", approval: out.approval };
}
