import { newAuditEventId, type AuditEvent, type AuditEventType } from "../audit/audit-event.ts";
import type { Approval } from "./approval-desk.ts";

/** An audit event about one approval (metadata only: digests, never arguments); `call` is the request it happened in. */
export function auditEvent(type: AuditEventType, a: Approval, call: { readonly requestId: string } | undefined, at: number, extra: Partial<AuditEvent> = {}): AuditEvent {
  return {
    id: newAuditEventId(),
    at,
    type,
    tenant: a.principal.tenant,
    subject: a.principal.key,
    taskId: a.taskId,
    callId: call?.requestId,
    // An agent message's target is the skill, as its `agent.executed` event names it.
    target: { kind: a.kind === "agent" ? "skill" : "tool", server: a.server, name: a.tool },
    policyRevision: a.policyRevision,
    approvalId: a.id,
    ...extra,
  };
}
