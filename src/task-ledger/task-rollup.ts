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

/** Per logical model: its calls, and the cost and tokens of its attempts. */
export type ModelTotals = { calls: number; costMicros: number; tokens: { input: number; output: number } };

/**
 * What a task's calls add up to: sums and counts only, so they can be kept as calls arrive (the
 * store keeps them per task, written with each call in one transaction) or summed from a list of
 * calls — the same {@link addCall} either way. Distinct sessions and turns are counted apart.
 */
export interface TaskTotals {
  calls: number;
  attempts: number;
  retries: number;
  fallbacks: number;
  unknownUsageAttempts: number;
  costMicros: number;
  /** The first currency a call named (a task's costs come from one tenant's settlements). */
  currency?: string | undefined;
  tokens: { input: number; output: number };
  byModel: Record<string, ModelTotals>;
  toolCalls: Record<string, number>;
  /** The task's earliest call (by time, then id): what it was charged to names the task's project. */
  first?: { at: number; callId: string; chargeTo?: string | undefined } | undefined;
}

/** Totals of no call. */
export function emptyTotals(): TaskTotals {
  return { calls: 0, attempts: 0, retries: 0, fallbacks: 0, unknownUsageAttempts: 0, costMicros: 0, tokens: { input: 0, output: 0 }, byModel: {}, toolCalls: {} };
}

/** Adds one call (with its attempts) to a task's totals, in place. */
export function addCall(t: TaskTotals, c: LedgerCall): void {
  const model = (name: string) => (t.byModel[name] ??= { calls: 0, costMicros: 0, tokens: { input: 0, output: 0 } });
  t.calls++;
  t.currency ??= c.currency;
  t.attempts += c.attempts.length;
  t.retries += c.retries;
  t.fallbacks += c.fallbacks;
  t.costMicros += c.costMicros;
  if (c.tool !== undefined) t.toolCalls[c.tool] = (t.toolCalls[c.tool] ?? 0) + 1;
  if (c.kind === "model") model(c.target).calls++;
  c.attempts.forEach((a, i) => {
    if (a.usage === "unknown") t.unknownUsageAttempts++;
    const m = c.attemptModels[i];
    if (!m) return;
    const row = model(m.model);
    row.costMicros += a.costMicros;
    row.tokens.input += m.input;
    row.tokens.output += m.output;
    t.tokens.input += m.input;
    t.tokens.output += m.output;
  });
  if (t.first === undefined || c.at < t.first.at || (c.at === t.first.at && c.callId < t.first.callId)) {
    t.first = { at: c.at, callId: c.callId, ...(c.chargeTo !== undefined ? { chargeTo: c.chargeTo } : {}) };
  }
}

/** The distinct sessions and turns of a task (a turn is distinct per session). */
export interface TaskDistinct {
  readonly sessions: number;
  readonly turns: number;
}

/**
 * A task's rollup, summed from its calls (each with its attempts) and its approval events: every
 * figure is a sum or a distinct count over exactly these, so the rollup equals the sums of its
 * attempts by construction.
 */
export function rollupTask(head: TaskHead, calls: readonly LedgerCall[], events: readonly AuditEvent[]): TaskRollup {
  const totals = emptyTotals();
  const sessions = new Set<string>();
  const turns = new Set<string>();
  let { firstSeen, lastSeen } = head;
  for (const c of calls) {
    addCall(totals, c);
    firstSeen = Math.min(firstSeen, c.at);
    lastSeen = Math.max(lastSeen, c.endedAt);
    if (c.sessionId !== undefined) sessions.add(c.sessionId);
    if (c.turnId !== undefined) turns.add(`${c.sessionId ?? ""}\u0000${c.turnId}`);
  }
  return rollupOf({ ...head, firstSeen, lastSeen }, totals, { sessions: sessions.size, turns: turns.size }, events);
}

/**
 * A task's rollup from its totals, its distinct sessions and turns, and its approval events; its
 * first and last seen are the head's (the store keeps them with every call). Time
 * waited is, per approval decided, the time from its request to its decision
 * (`approval.granted|denied|expired` against `approval.requested` of the same id).
 */
export function rollupOf(head: TaskHead, t: TaskTotals, distinct: TaskDistinct, events: readonly AuditEvent[]): TaskRollup {
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
  const project = t.first?.chargeTo;
  return {
    taskId: head.taskId,
    tenant: head.tenant,
    ...(project?.includes("/") ? { project } : {}),
    ...(head.parentTaskId !== undefined ? { parentTaskId: head.parentTaskId } : {}),
    children: [...head.children],
    firstSeen: head.firstSeen,
    lastSeen: head.lastSeen,
    calls: t.calls,
    attempts: t.attempts,
    retries: t.retries,
    fallbacks: t.fallbacks,
    unknownUsageAttempts: t.unknownUsageAttempts,
    costMicros: t.costMicros,
    currency: t.currency ?? DEFAULT_CURRENCY,
    tokens: { ...t.tokens },
    byModel: structuredClone(t.byModel),
    toolCalls: { ...t.toolCalls },
    approvals,
    sessions: distinct.sessions,
    turns: distinct.turns,
    ...(head.outcome ? { outcome: head.outcome } : {}),
  };
}
