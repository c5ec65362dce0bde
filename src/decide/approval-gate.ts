/**
 * The approval gate: the decide phase of an MCP tool call, between the policy's decision
 * (authorize) and the execution (invoke). A call
 * whose allowing rule says `approval: required` is not executed: a pending approval is stored at
 * the tenant's approval desk and the client is told where a human decides (a URL), in its era's
 * terms — an `input_required` result with a URL elicitation and a sealed `requestState` (2026-07-28),
 * or the error -32042 URLElicitationRequired (2025 era). The connection is not held.
 *
 * The client's retry is re-admitted from scratch (identity and policy were checked again by the
 * caller before this runs), the approval found by its sealed state or by the same call's facts,
 * and executed only once the desk has atomically claimed it: a concurrent or repeated retry finds
 * it `executed` and is refused. The claim is the invoke phase's (src/invoker/approval-claim.ts),
 * after the budget reservation, so a budget spent in the meantime refuses the call and leaves the
 * approval standing.
 */

import { approvalId, sameFacts, type Approval, type ApprovalFacts } from "../approvals/approval-desk.ts";
import type { ApprovalDeps, ApprovalDeskRpc } from "../approvals/approval-desk-rpc.ts";
import { refusal, refusedReplay } from "../approvals/approval-refusals.ts";
import { auditEvent } from "../approvals/approval-events.ts";
import { factsDigest } from "../approvals/request-state.ts";
import type { AuditEvent, AuditEventType } from "../audit/audit-event.ts";
import type { RequestContext } from "../context/request-context.ts";
import { canonicalDigest } from "../digest/canonical-digest.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { McpEra } from "../mcp/bridging.ts";
import type { PolicyDecision } from "../mcp/tool-policy.ts";
import { isRecord } from "../protocol/fast-guard.ts";
import type { Principal } from "../publication/principal.ts";

/** The call as the gate sees it. */
export interface GatedCall {
  readonly principal: Principal;
  readonly era: McpEra;
  readonly decision: PolicyDecision;
  readonly server: string;
  readonly tool: string;
  readonly args: unknown;
  /** The caller's params (a 2026 retry's `requestState` is read from there). */
  readonly params: Readonly<Record<string, unknown>>;
  /** The tool's listed definition, read from the server (undefined when it is not listed). */
  readonly toolDefinition: () => Promise<unknown>;
  /** The origin the request came in on (for the status page's URL), read only when an approval is opened. */
  readonly origin?: (() => string) | undefined;
  /** The client capabilities the call declared (a 2026-07-28 client's, per request). */
  readonly clientCapabilities?: Readonly<Record<string, unknown>> | undefined;
  /**
   * A task-augmented call (MCP 2025-11-25 tasks): `create` when the client asked for a task (it
   * is answered with the approval to make a task of, pending or approved, instead of -32042 or
   * the execution); `resume` when it comes from a task's handle (`tasks/result`): the approval is
   * the one the handle names, never a new one.
   */
  readonly task?: { readonly kind: "create" } | { readonly kind: "resume"; readonly approvalId: string } | undefined;
}

/** An approved call, as the invoke phase claims it. */
export interface ApprovedCall {
  readonly desk: ApprovalDeskRpc;
  readonly approvalId: string;
  /** What the approval is bound to: the claim is refused when the call's facts differ. */
  readonly facts: ApprovalFacts;
  /** A 2026 retry's single-use nonce (from its sealed requestState). */
  readonly nonce: string | undefined;
  /** The call comes from a task's handle (`tasks/result`): its refusals say so. */
  readonly fromTask: boolean;
  /** Records that the approval expired when the claim found it so (an `approval.expired` event). */
  readonly expired: (a: Approval) => void;
  /** The refusal of a claim that was not granted, in the caller's protocol's terms; absent: a tool call's. */
  readonly refuse?: ((a: Approval | undefined) => GatewayError) | undefined;
}

/** What happens next: answer now (a pending approval), or go on to run the call. */
export type GateResult =
  | { readonly kind: "answer"; readonly result: Record<string, unknown> }
  /** A task-augmented call's approval, pending or approved: the caller answers with a task handle. */
  | { readonly kind: "task"; readonly approval: Approval }
  | {
      readonly kind: "execute";
      /**
       * The approval the call runs under, when its rule requires one: the invoke phase claims it
       * right before the call is sent (src/invoker/approval-claim.ts).
       */
      readonly approved: ApprovedCall | undefined;
      /** The params forwarded upstream without what belonged to the gateway's own approval round. */
      readonly upstreamParams: (forwarded: Record<string, unknown>) => Record<string, unknown>;
    };

const NO_APPROVAL: GateResult = { kind: "execute", approved: undefined, upstreamParams: (p) => p };

/** The key of the approval's input request (and of the client's answer to it). */
const INPUT_KEY = "approval";

/**
 * The gateway's sealed state and the client's answer to the approval's URL elicitation are the
 * gateway's, not the server's: they never go upstream.
 */
function withoutApprovalRound(forwarded: Record<string, unknown>): Record<string, unknown> {
  const { requestState, inputResponses, ...rest } = forwarded;
  const out: Record<string, unknown> = { ...rest };
  if (typeof requestState === "string" && !requestState.startsWith("a1.")) out.requestState = requestState;
  if (isRecord(inputResponses)) {
    const { [INPUT_KEY]: _ours, ...theirs } = inputResponses;
    if (Object.keys(theirs).length > 0) out.inputResponses = theirs;
  }
  return out;
}

/**
 * The approval step of one tool call; a call whose decision needs no approval passes straight on.
 */
export async function gateToolCall(deps: ApprovalDeps | undefined, ctx: RequestContext, call: GatedCall): Promise<GateResult> {
  if (call.decision.approval !== "required") {
    // A task's call that no longer needs approval (the policy changed) still runs only by an approval.
    if (call.task?.kind === "resume") throw new GatewayError("approval_refused", `The policy (${call.decision.policyRevision}) no longer asks an approval for this call: call the tool again without a task.`, { param: "params.taskId" });
    return NO_APPROVAL;
  }
  if (!deps) throw new GatewayError("tool_not_allowed", `The tool call needs an approval, and approvals are not configured on this gateway (policy ${call.decision.policyRevision}).`, { param: "params.name" });
  const desk = deps.desk(call.principal.tenantId);
  const facts: ApprovalFacts = {
    principal: { tenant: call.principal.tenantId, key: call.principal.keyId, ...(call.principal.chargeTo !== undefined ? { chargeTo: call.principal.chargeTo } : {}) },
    ...(ctx.record.attribution?.taskId !== undefined ? { taskId: ctx.record.attribution.taskId } : {}),
    server: call.server,
    tool: call.tool,
    toolDigest: await canonicalDigest((await call.toolDefinition()) ?? { server: call.server, name: call.tool, listed: false }),
    argumentsDigest: await canonicalDigest(call.args ?? {}),
    policyRevision: call.decision.policyRevision,
    rule: call.decision.rule ?? "",
  };
  const now = ctx.clock.now();
  const event = (type: AuditEventType, a: Approval, extra: Partial<AuditEvent> = {}) => ctx.record.events.push(auditEvent(type, a, ctx, now, extra));

  let approval: Approval | undefined;
  let nonce: string | undefined;
  const presented = call.era === "stateless" ? call.params.requestState : undefined;
  if (typeof presented === "string" && presented.startsWith("a1.")) {
    const opened = await deps.sealer.open(presented, facts, now);
    // A state for other facts (the arguments changed): that approval does not cover this call,
    // which asks for its own below. Anything else that fails is a forged or stale state.
    if (!opened.ok && opened.why !== "wrong_facts") throw new GatewayError("invalid_request", `The requestState is not valid (${opened.why}): call the tool again without it.`, { param: "params.requestState" });
    if (opened.ok) {
      approval = await desk.get(opened.payload.approvalId);
      nonce = opened.payload.nonce;
      if (!approval) throw new GatewayError("invalid_request", "The requestState names no approval: call the tool again without it.", { param: "params.requestState" });
    }
  }
  if (call.task?.kind === "resume") {
    approval = await desk.get(call.task.approvalId);
    // The approval covers the call only while its facts (policy rule and revision, tool definition) hold.
    if (!approval || !sameFacts(approval, facts)) throw new GatewayError("approval_refused", "The task's approval does not cover this call any more (the policy or the tool changed): call the tool again to ask for a new one.", { param: "params.taskId" });
  }
  if (!approval) {
    // A 2026-07-28 client is sent to the approval's page by URL elicitation: one that did not
    // declare it could not follow, so it is told what it lacks before an approval is opened.
    if (call.era === "stateless" && !declaresUrlElicitation(call.clientCapabilities)) {
      throw new GatewayError("mcp_missing_capability", "This tool call needs a human approval, which the gateway asks for by URL elicitation: declare the elicitation capability with url mode.", {
        details: [{ requiredCapabilities: { elicitation: { url: {} } } }],
      });
    }
    const id = approvalId(call.principal.tenantId);
    const out = await desk.request(facts, { id, statusUrl: deps.statusUrl(id, call.origin?.()), ttlMs: deps.ttlMs });
    if (out.expired) event("approval.expired", out.expired);
    approval = out.approval;
    if (out.created) event("approval.requested", approval);
  }
  if (call.task?.kind === "create" && (approval.state === "pending" || approval.state === "approved")) return { kind: "task", approval };
  if (approval.state === "pending") {
    if (nonce !== undefined && !(await desk.spend(approval.id, nonce))) throw refusedReplay();
    return { kind: "answer", result: await pendingAnswer(deps, call, approval, facts) };
  }
  if (approval.state !== "approved") {
    if (nonce !== undefined) await desk.spend(approval.id, nonce);
    throw refusal(approval, call.task?.kind === "resume");
  }
  return {
    kind: "execute",
    upstreamParams: withoutApprovalRound,
    approved: { desk, approvalId: approval.id, facts, nonce, fromTask: call.task?.kind === "resume", expired: (a) => event("approval.expired", a) },
  };
}

async function pendingAnswer(deps: ApprovalDeps, call: GatedCall, approval: Approval, facts: ApprovalFacts): Promise<Record<string, unknown>> {
  const url = approval.statusUrl;
  const message = `Calling ${call.server}/${call.tool} needs a human approval (approval ${approval.id}, until ${new Date(approval.expiresAt).toISOString()}). Open the link to follow it, then try again.`;
  if (call.era === "stateful") {
    throw new GatewayError("approval_required", message, { details: [{ elicitations: [{ mode: "url", elicitationId: approval.id, url, message }] }] });
  }
  const requestState = await deps.sealer.seal({ approvalId: approval.id, facts: await factsDigest(facts), nonce: crypto.randomUUID(), expiresAt: approval.expiresAt });
  return {
    resultType: "input_required",
    inputRequests: { [INPUT_KEY]: { method: "elicitation/create", params: { mode: "url", elicitationId: approval.id, message, url } } },
    requestState,
  };
}

/** Whether declared client capabilities include URL-mode elicitation. */
function declaresUrlElicitation(caps: Readonly<Record<string, unknown>> | undefined): boolean {
  const e = caps?.elicitation;
  return typeof e === "object" && e !== null && typeof (e as Record<string, unknown>).url === "object" && (e as Record<string, unknown>).url !== null;
}
