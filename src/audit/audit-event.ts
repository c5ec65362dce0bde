/**
 * The one audit event schema: every decision (allow, deny, approval requested, granted, denied,
 * expired, revoked) and every execution result, for model and tool traffic alike. A model
 * proposing a tool call and a tool being executed are different event types. Metadata only:
 * arguments and content never appear here (their digests may).
 */

/** What happened. */
export type AuditEventType =
  | "decision.allowed"
  | "decision.denied"
  | "approval.requested"
  | "approval.granted"
  | "approval.denied"
  | "approval.expired"
  | "approval.revoked"
  | "tool.executed"
  | "agent.executed"
  | "model.completed"
  | "model.tool_call_proposed"
  | "content.redacted"
  | "content.blocked";

/** One audit event. */
export interface AuditEvent {
  /** Unique, minted by the gateway. */
  readonly id: string;
  /** Epoch ms. */
  readonly at: number;
  readonly type: AuditEventType;
  /** The principal the event is about: its tenant and key (or token subject). */
  readonly tenant: string;
  readonly subject: string;
  /** The caller's task, when the call was attributed. */
  readonly taskId?: string | undefined;
  /** The call (the gateway's request id) and, for an execution, its attempt. */
  readonly callId?: string | undefined;
  readonly attemptId?: string | undefined;
  /** What the call reached: a model, an MCP server's tool, or an A2A agent's skill (`server` the agent, `name` the skill or `*`). */
  readonly target?: { readonly kind: "model" | "tool" | "prompt" | "resource" | "skill"; readonly server?: string | undefined; readonly name: string } | undefined;
  readonly policyRevision?: string | undefined;
  readonly approvalId?: string | undefined;
  /** The decision, with the rule that made it and why. */
  readonly decision?: { readonly allowed: boolean; readonly rule?: string | undefined; readonly reason: string } | undefined;
  /**
   * How an execution ended: its result is known, it failed, it may or may not have run, it was
   * proven not sent, or the server asked the client for input first (the call goes on in the
   * client's next request, which is an execution of its own).
   */
  readonly execution?: "succeeded" | "failed" | "unknown" | "not_executed" | "input_required" | undefined;
  /** Whether its usage (the bill) is known, held for reconciliation, or none applies. */
  readonly usage?: "known" | "unknown" | "none" | undefined;
  /** Who acted, for events an operator caused (an approver's id), and their reason. */
  readonly actor?: string | undefined;
  readonly reason?: string | undefined;
}

/** Mints an audit event id (`evt_` and 32 hex digits): every event, whoever records it, has one of these. */
export function newAuditEventId(): string {
  return `evt_${crypto.randomUUID().replaceAll("-", "")}`;
}
