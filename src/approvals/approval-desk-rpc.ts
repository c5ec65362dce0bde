import type { Approval, ApprovalFacts, ApprovalState, ApproverAction, ClaimOutcome, DecideOutcome, ExecutionEnd, RequestOutcome } from "./approval-desk.ts";
import type { AgentTaskHandleSealer } from "./agent-task-handle.ts";
import type { RequestStateSealer } from "./request-state.ts";
import type { TaskHandleSealer } from "./task-handle.ts";

/** One tenant's approval desk, as the ApprovalDesk Durable Object serves it (its own clock decides). */
export interface ApprovalDeskRpc {
  request(facts: ApprovalFacts, init: { readonly id: string; readonly statusUrl: string; readonly ttlMs: number }): Promise<RequestOutcome>;
  claim(id: string, facts: ApprovalFacts, idempotencyKey: string, nonce?: string): Promise<ClaimOutcome>;
  spend(id: string, nonce: string): Promise<boolean>;
  finish(id: string, execution: ExecutionEnd): Promise<Approval | undefined>;
  get(id: string): Promise<Approval | undefined>;
  list(state?: ApprovalState): Promise<Approval[]>;
  decide(id: string, action: ApproverAction, actor: string, reason: string): Promise<DecideOutcome>;
  cancel(id: string, principal: ApprovalFacts["principal"], reason: string): Promise<DecideOutcome>;
  /** Revokes every live approval of one API key of this tenant (the key was revoked). */
  revokeKey(key: string, actor: string, reason: string): Promise<Approval[]>;
}

/** What approvals need (built once per isolate), for tool calls and agent messages alike; absent: a call that needs approval is refused. */
export interface ApprovalDeps {
  readonly desk: (tenant: string) => ApprovalDeskRpc;
  readonly sealer: RequestStateSealer;
  /** Seals the handles of task-augmented calls (MCP 2025-11-25 tasks), under the same secret. */
  readonly tasks: TaskHandleSealer;
  /** Seals the task ids of A2A messages waiting for approval, under the same secret (a key of their own). */
  readonly agentTasks: AgentTaskHandleSealer;
  readonly ttlMs: number;
  /** The public URL of an approval's status page. */
  readonly statusUrl: (id: string, requestOrigin: string | undefined) => string;
}
