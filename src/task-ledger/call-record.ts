import { usageSourceOf, type AttemptRecord, type UsageSourceLabel } from "../context/attempt-record.ts";
import type { A2aRecord, LooperRecord, RequestRecord } from "../context/request-record.ts";
import type { McpCharge } from "../context/debt.ts";
import type { AuditEvent } from "../audit/audit-event.ts";
import type { Workload } from "../attribution/workload.ts";

/** Whether an attempt's bill is known, held for reconciliation, or none applies (nothing was done). */
export type UsageStatus = "known" | "unknown" | "none";

/** One attempt of a call, as the call ledger lists it. */
export interface CallAttempt {
  readonly attemptId: string;
  readonly backend?: string | undefined;
  readonly outcome: string;
  readonly usage: UsageStatus;
  /** A model attempt: its backend's protocol, the codec version that read the answer, and where its usage came from. */
  readonly protocol?: string | undefined;
  readonly codecVersion?: string | undefined;
  readonly usageSource?: UsageSourceLabel | undefined;
  /** What the settlement booked for it (integer micro-units); 0 when nothing or an unknown amount was booked. */
  readonly costMicros: number;
}

/** One call (one request to the gateway) as the admin API shows it (the console renders this shape). */
export interface CallRecord {
  readonly callId: string;
  readonly at: number;
  readonly endedAt: number;
  readonly kind: "model" | "tool" | "mcp" | "agent";
  readonly key: string;
  /** The team or `team/project` the caller was charged to, when it names one. */
  readonly chargeTo?: string | undefined;
  readonly sessionId?: string | undefined;
  readonly turnId?: string | undefined;
  /** The agent instance and end user behind the call (trusted metadata), when the gateway is told. */
  readonly workload?: Workload | undefined;
  /** The logical model, or `server/tool` (an MCP method other than a tool call: `server/method`), or `agent/skill` (an A2A call: `*` for no skill named). */
  readonly target: string;
  readonly outcome: "success" | "error" | "cancelled";
  readonly errorCode?: string | undefined;
  readonly costMicros: number;
  readonly attempts: readonly CallAttempt[];
  /** The decision that routed a model call (`default` when none held); the access line has its evidence. */
  readonly decision?: string | undefined;
  /** The request this call was made inside (a Looper step), when it was. */
  readonly parentCallId?: string | undefined;
  /** A Looper run's steps (each also a call of its own, with its cost): model, score, accepted. */
  readonly looper?: LooperRecord | undefined;
  /** A model call answered from the response cache: how it matched, the cosine (1 when exact) and the entry's age; it has no attempts. */
  readonly cache?: { readonly hit: "exact" | "semantic"; readonly similarity: number; readonly ageMs: number } | undefined;
}

/**
 * What the store keeps of one call beyond its public shape: the task it belongs to and the
 * figures its task's rollup sums (per attempt: the model and tokens; per call: retries, fallbacks).
 */
export interface LedgerCall extends CallRecord {
  readonly tenant: string;
  readonly taskId: string;
  readonly parentTaskId?: string | undefined;
  readonly currency?: string | undefined;
  /** Per attempt, in order: the logical model and the tokens the provider reported (model calls only). */
  readonly attemptModels: readonly { readonly model: string; readonly input: number; readonly output: number }[];
  readonly retries: number;
  readonly fallbacks: number;
  /** The tool a tool call reached (`server/tool`), when the policy let it run. */
  readonly tool?: string | undefined;
}

/** The usage status of a model attempt, from what its settlement booked (or its evidence, when nothing was reserved). */
function modelUsage(a: Readonly<AttemptRecord>): UsageStatus {
  if (a.charge) return a.charge.usage;
  if (a.unbilled || a.evidence?.class === "known_zero" || a.evidence?.class === "client_error") return "none";
  return a.usage?.source === "provider" ? "known" : "unknown";
}

/**
 * The call ledger's record of one finished request, or undefined when it is not a task's call (no
 * tenant, or no task id: unattributed calls are counted nowhere, never given an invented task).
 * Costs are the settlement's (the attempt's `charge`, an MCP call's `charge`), never recomputed.
 * A call refused because the task is not the caller's is not one of the task's calls: it would
 * count in another project's rollup (its access line keeps it).
 */
export function callOf(r: Readonly<RequestRecord>, attempts: readonly Readonly<AttemptRecord>[]): LedgerCall | undefined {
  const taskId = r.attribution?.taskId;
  if (r.tenant === undefined || taskId === undefined || r.errorCode === "task_not_yours") return undefined;
  const common = {
    callId: r.requestId,
    at: r.receivedAt,
    endedAt: r.endedAt ?? r.receivedAt,
    key: r.key ?? "",
    ...(r.chargeTo !== undefined ? { chargeTo: r.chargeTo } : {}),
    sessionId: r.attribution?.sessionId,
    turnId: r.attribution?.turnId,
    ...(r.workload ? { workload: r.workload } : {}),
    outcome: r.outcome ?? "error",
    errorCode: r.errorCode,
    tenant: r.tenant,
    taskId,
    parentTaskId: r.attribution?.parentTaskId,
  } as const;
  if (r.mcp) {
    const m = r.mcp;
    // A task's tasks/result runs the tool call its handle carries.
    const isTool = m.method === "tools/call" || m.method === "tasks/result";
    // A method the gateway answered itself (discovery, an aggregate list) reached no server.
    const target = isTool ? `${m.server ?? "*"}/${m.target ?? "?"}` : m.server === undefined ? m.method : `${m.server}/${m.method}`;
    // Only a call sent to its server is a tool call of the task: one refused or held for approval was not.
    const executed = isTool && m.toolSent === true && m.server !== undefined;
    const charge = m.charge;
    const list = singleAttempt(charge, executed, m.server, r);
    return {
      ...common,
      kind: isTool ? "tool" : "mcp",
      target,
      costMicros: sum(list.map((a) => a.costMicros)),
      currency: charge?.currency,
      attempts: list,
      attemptModels: [],
      retries: 0,
      fallbacks: 0,
      tool: executed ? target : undefined,
    };
  }
  if (r.a2a) return agentCallOf(r.a2a, r, common);
  const sent = attempts.filter((a) => a.outcome !== "not_sent");
  const list: CallAttempt[] = sent.map((a) => ({
    attemptId: a.id,
    backend: a.backendName,
    protocol: a.backendProtocol,
    codecVersion: a.codecVersion,
    outcome: a.outcome,
    usage: modelUsage(a),
    usageSource: usageSourceOf(a),
    costMicros: a.charge?.costMicros ?? 0,
  }));
  // A later attempt of another model is a fallback; of the same model (another backend or the same), a retry.
  let fallbacks = 0;
  for (let i = 1; i < sent.length; i++) if (sent[i]!.logicalModel !== sent[i - 1]!.logicalModel) fallbacks++;
  const hit = r.plugins.find((p) => p.action === "cache_hit");
  return {
    ...common,
    kind: "model",
    ...(r.decision ? { decision: r.decision.name } : {}),
    ...(r.parentRequestId !== undefined ? { parentCallId: r.parentRequestId } : {}),
    ...(r.looper ? { looper: r.looper } : {}),
    ...(hit ? { cache: { hit: hit.detail === "semantic" ? ("semantic" as const) : ("exact" as const), similarity: hit.similarity ?? 1, ageMs: hit.ageMs ?? 0 } } : {}),
    target: sent.at(-1)?.logicalModel ?? r.route ?? "?",
    costMicros: sum(list.map((a) => a.costMicros)),
    currency: sent.find((a) => a.charge?.currency !== undefined)?.charge?.currency,
    attempts: list,
    attemptModels: sent.map((a) => ({ model: a.logicalModel, input: a.usage?.inputTokens ?? 0, output: a.usage?.outputTokens ?? 0 })),
    retries: Math.max(0, sent.length - 1 - fallbacks),
    fallbacks,
  };
}

/**
 * The one attempt of a tool or agent call, as a list: its charge's when the call was priced, a
 * free one when it was sent unpriced, none when it never went out.
 */
function singleAttempt(charge: McpCharge | undefined, sent: boolean, backend: string | undefined, r: Readonly<RequestRecord>): CallAttempt[] {
  const outcome = r.outcome ?? "error";
  if (charge) {
    const usage = charge.settlement === "charged" ? "known" : charge.settlement === "released" ? "none" : "unknown";
    return [{ attemptId: charge.attemptId, backend, outcome, usage, costMicros: charge.settlement === "charged" ? charge.micros : 0 }];
  }
  return sent ? [{ attemptId: r.requestId, backend, outcome, usage: "none", costMicros: 0 }] : [];
}

/**
 * An A2A call as one of its task's calls: `agent/skill`, with one attempt when it was sent (its
 * charge's, when priced). The A2A task id is the agent's protocol state, not the business task.
 */
function agentCallOf(a: A2aRecord, r: Readonly<RequestRecord>, common: Omit<LedgerCall, "kind" | "target" | "costMicros" | "attempts" | "attemptModels" | "retries" | "fallbacks">): LedgerCall {
  const charge = a.charge;
  const list = singleAttempt(charge, a.sent === true, a.agent, r);
  return { ...common, kind: "agent", target: `${a.agent}/${a.skill ?? "*"}`, costMicros: sum(list.map((x) => x.costMicros)), currency: charge?.currency, attempts: list, attemptModels: [], retries: 0, fallbacks: 0 };
}

/**
 * Which model completions are audit events (gateway.yaml `governance.audit.modelCompletions`):
 * `attributed`, those of calls that name a task; `all`, every one. An unattributed call's
 * completion is on its access line either way, with the same facts (attempt, model, outcome,
 * evidence, usage).
 */
export type ModelCompletions = "attributed" | "all";

/**
 * The audit events one finished request stands for: the policy's decision and the execution of an
 * MCP tool call, each model attempt's completion (see {@link ModelCompletions}) and, apart, the
 * tool calls it proposed, then every event the request recorded itself (approvals). Metadata only.
 */
export function auditEventsOf(r: Readonly<RequestRecord>, attempts: readonly Readonly<AttemptRecord>[], newId: () => string, modelCompletions: ModelCompletions): AuditEvent[] {
  if (r.tenant === undefined) return [...r.events];
  const base = { tenant: r.tenant, subject: r.key ?? "", taskId: r.attribution?.taskId, callId: r.requestId } as const;
  const out: AuditEvent[] = [];
  const m = r.mcp;
  if (m) {
    const target = m.target !== undefined ? { kind: kindOf(m.method), server: m.server, name: m.target } : undefined;
    if (m.decision) {
      out.push({ ...base, id: newId(), at: r.receivedAt, type: m.decision.allowed ? "decision.allowed" : "decision.denied", target, policyRevision: m.decision.policyRevision, decision: { allowed: m.decision.allowed, rule: m.decision.rule, reason: m.decision.reason } });
    }
    // Only a call that was sent is an execution (one refused, or held for approval, was not).
    if (m.toolSent === true && m.decision?.allowed === true && m.server !== undefined) {
      const settlement = m.charge?.settlement;
      const execution =
        settlement === "pending_reconciliation"
          ? "unknown"
          : settlement === "released"
            ? "not_executed"
            : r.outcome === "success" && m.inputRequired === true
              ? "input_required"
              : r.outcome === "success" && m.toolError !== true
                ? "succeeded"
                : r.outcome === "success"
                  ? "failed"
                  : // Sent, and the request ended under it (a client that left, the deadline, a
                    // drain) with no answer read: the server may or may not have run it.
                    r.outcome === "cancelled" || r.errorCode === undefined
                    ? "unknown"
                    : "failed";
      const usage = settlement === "charged" ? "known" : settlement === "pending_reconciliation" ? "unknown" : "none";
      out.push({ ...base, id: newId(), at: r.endedAt ?? r.receivedAt, type: "tool.executed", attemptId: m.charge?.attemptId, target, policyRevision: m.decision.policyRevision, approvalId: m.approvalId, execution, usage });
    }
  } else if (r.a2a) {
    out.push(...agentEventsOf(r.a2a, r, base, newId));
  } else {
    const completions = modelCompletions === "all" || base.taskId !== undefined;
    for (const a of attempts) {
      if (a.outcome === "not_sent") continue;
      const target = { kind: "model", name: a.logicalModel } as const;
      const execution = a.outcome === "success" ? "succeeded" : a.evidence?.class === "unknown" ? "unknown" : "failed";
      if (completions) out.push({ ...base, id: newId(), at: a.endedAt ?? a.startedAt, type: "model.completed", attemptId: a.id, target, execution, usage: modelUsage(a) });
      // One event per tool the model proposed (a proposal, not an execution), named, never with its arguments.
      const at = a.endedAt ?? a.startedAt;
      for (const name of a.toolCallsProposed ?? []) out.push({ ...base, id: newId(), at, type: "model.tool_call_proposed", attemptId: a.id, target: { kind: "tool", name } });
      if ((a.toolCallsProposed ?? []).length === 0 && a.stopReason === "tool_use") out.push({ ...base, id: newId(), at, type: "model.tool_call_proposed", attemptId: a.id, target });
    }
  }
  // What the request's plugins did to its content: counted per detector, never the content.
  for (const p of r.plugins) {
    const type = p.action === "redacted" || p.action === "masked" ? "content.redacted" : p.action === "blocked" || p.action === "failed_closed" ? "content.blocked" : undefined;
    if (type === undefined) continue;
    const counts = p.counts === undefined ? "" : Object.entries(p.counts).map(([d, n]) => `${d}=${n}`).join(",");
    out.push({ ...base, id: newId(), at: r.endedAt ?? r.receivedAt, type, reason: [`${p.plugin}: ${p.action}`, counts, p.detail].filter((x) => x !== undefined && x !== "").join("; ") });
  }
  out.push(...r.events);
  return out;
}

/** An A2A call's decision, and its execution when it was sent (as a tool call's, without `isError`). */
function agentEventsOf(a: A2aRecord, r: Readonly<RequestRecord>, base: Pick<AuditEvent, "tenant" | "subject" | "taskId" | "callId">, newId: () => string): AuditEvent[] {
  const out: AuditEvent[] = [];
  const target = { kind: "skill", server: a.agent, name: a.skill ?? "*" } as const;
  const d = a.decision;
  if (d) out.push({ ...base, id: newId(), at: r.receivedAt, type: d.allowed ? "decision.allowed" : "decision.denied", target, policyRevision: d.policyRevision, decision: { allowed: d.allowed, rule: d.rule, reason: d.reason } });
  if (a.sent === true && d?.allowed === true) {
    const settlement = a.charge?.settlement;
    const execution =
      settlement === "pending_reconciliation" ? "unknown" : settlement === "released" ? "not_executed" : r.outcome === "success" ? (a.agentError === undefined ? "succeeded" : "failed") : r.outcome === "cancelled" || r.errorCode === undefined ? "unknown" : "failed";
    const usage = settlement === "charged" ? "known" : settlement === "pending_reconciliation" ? "unknown" : "none";
    out.push({ ...base, id: newId(), at: r.endedAt ?? r.receivedAt, type: "agent.executed", attemptId: a.charge?.attemptId, target, policyRevision: d.policyRevision, approvalId: a.approvalId, execution, usage });
  }
  return out;
}

function kindOf(method: string): "tool" | "prompt" | "resource" {
  return method.startsWith("prompts/") ? "prompt" : method.startsWith("resources/") ? "resource" : "tool";
}

function sum(xs: readonly number[]): number {
  return xs.reduce((n, x) => n + x, 0);
}
