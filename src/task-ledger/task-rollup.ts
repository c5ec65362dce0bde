import type { AuditEvent } from "../audit/audit-event.ts";
import type { LedgerCall } from "./call-record.ts";

/** A verifier's outcome of a task: attached by an authorized verifier, never inferred by the gateway. */
export interface TaskOutcome {
  readonly status: string;
  /** A reference to the evidence (a URL, a report id), not the evidence itself. */
  readonly evidence: string;
  readonly at: number;
  readonly verifier: string;
}

/** One task's totals (the console renders this shape). */
export interface TaskRollup {
  readonly taskId: string;
  readonly tenant: string;
  /** The project the task is bound to (`team/project`, its first call's), when it has one. */
  readonly project?: string | undefined;
  readonly parentTaskId?: string | undefined;
  readonly children: string[];
  readonly firstSeen: number;
  readonly lastSeen: number;
  readonly calls: number;
  readonly attempts: number;
  readonly retries: number;
  readonly fallbacks: number;
  readonly unknownUsageAttempts: number;
  readonly costMicros: number;
  readonly currency: string;
  readonly tokens: { input: number; output: number };
  readonly byModel: Record<string, { calls: number; costMicros: number; tokens: { input: number; output: number } }>;
  readonly toolCalls: Record<string, number>;
  readonly approvals: { requested: number; granted: number; denied: number; expired: number; waitedMs: number };
  readonly sessions: number;
  readonly turns: number;
  readonly outcome?: TaskOutcome | undefined;
}

/** What the store knows of a task beside its calls. */
export interface TaskHead {
  readonly taskId: string;
  readonly tenant: string;
  readonly parentTaskId?: string | undefined;
  readonly children: readonly string[];
  readonly firstSeen: number;
  readonly lastSeen: number;
  readonly outcome?: TaskOutcome | undefined;
}

/** The currency a task's costs are in when none of its calls named one (an unpriced task costs 0 in it). */
export const DEFAULT_CURRENCY = "USD";

/**
 * A task's rollup, summed from its calls (each with its attempts) and its approval events: every
 * figure is a sum or a distinct count over exactly these, so the rollup equals the sums of its
 * attempts by construction. Time waited is, per approval decided, the time from its request to
 * its decision (`approval.granted|denied|expired` against `approval.requested` of the same id).
 */
export function rollupTask(head: TaskHead, calls: readonly LedgerCall[], events: readonly AuditEvent[]): TaskRollup {
  const tokens = { input: 0, output: 0 };
  const byModel: Record<string, { calls: number; costMicros: number; tokens: { input: number; output: number } }> = {};
  const toolCalls: Record<string, number> = {};
  const sessions = new Set<string>();
  const turns = new Set<string>();
  let attempts = 0;
  let retries = 0;
  let fallbacks = 0;
  let unknown = 0;
  let cost = 0;
  let currency: string | undefined;
  let firstSeen = head.firstSeen;
  let lastSeen = head.lastSeen;
  const model = (name: string) => (byModel[name] ??= { calls: 0, costMicros: 0, tokens: { input: 0, output: 0 } });
  for (const c of calls) {
    firstSeen = Math.min(firstSeen, c.at);
    lastSeen = Math.max(lastSeen, c.endedAt);
    currency ??= c.currency;
    attempts += c.attempts.length;
    retries += c.retries;
    fallbacks += c.fallbacks;
    cost += c.costMicros;
    if (c.sessionId !== undefined) sessions.add(c.sessionId);
    if (c.turnId !== undefined) turns.add(`${c.sessionId ?? ""}\u0000${c.turnId}`);
    if (c.tool !== undefined) toolCalls[c.tool] = (toolCalls[c.tool] ?? 0) + 1;
    if (c.kind === "model") model(c.target).calls++;
    c.attempts.forEach((a, i) => {
      if (a.usage === "unknown") unknown++;
      const m = c.attemptModels[i];
      if (!m) return;
      const row = model(m.model);
      row.costMicros += a.costMicros;
      row.tokens.input += m.input;
      row.tokens.output += m.output;
      tokens.input += m.input;
      tokens.output += m.output;
    });
  }
  const approvals = { requested: 0, granted: 0, denied: 0, expired: 0, waitedMs: 0 };
  const requestedAt = new Map<string, number>();
  for (const e of [...events].sort((a, b) => a.at - b.at)) {
    if (e.type === "approval.requested") {
      approvals.requested++;
      if (e.approvalId !== undefined) requestedAt.set(e.approvalId, e.at);
      continue;
    }
    if (e.type !== "approval.granted" && e.type !== "approval.denied" && e.type !== "approval.expired") continue;
    approvals[e.type === "approval.granted" ? "granted" : e.type === "approval.denied" ? "denied" : "expired"]++;
    const since = e.approvalId === undefined ? undefined : requestedAt.get(e.approvalId);
    if (since !== undefined) {
      approvals.waitedMs += Math.max(0, e.at - since);
      // One wait per approval, however many events name its decision.
      requestedAt.delete(e.approvalId!);
    }
  }
  // The task is bound to the project of its first call (src/tasks); its calls name what they were charged to.
  const project = calls[0]?.chargeTo;
  return {
    taskId: head.taskId,
    tenant: head.tenant,
    ...(project?.includes("/") ? { project } : {}),
    ...(head.parentTaskId !== undefined ? { parentTaskId: head.parentTaskId } : {}),
    children: [...head.children],
    firstSeen,
    lastSeen,
    calls: calls.length,
    attempts,
    retries,
    fallbacks,
    unknownUsageAttempts: unknown,
    costMicros: cost,
    currency: currency ?? DEFAULT_CURRENCY,
    tokens,
    byModel,
    toolCalls,
    approvals,
    sessions: sessions.size,
    turns: turns.size,
    ...(head.outcome ? { outcome: head.outcome } : {}),
  };
}
