import type { AttemptRecord } from "../context/attempt-record.ts";
import type { RequestRecord } from "../context/request-record.ts";
import { newAuditEventId, type AuditEvent } from "../audit/audit-event.ts";
import type { FinishedRequestReader } from "../telemetry/request-assembly.ts";
import { auditEventsOf, callOf, type CallRecord, type LedgerCall, type ModelCompletions } from "./call-record.ts";
import { DEFAULT_MAX_REQUESTS, type AuditQuery, type TaskLedgerBatch, type TaskQuery } from "./task-ledger-store.ts";
import { requestRowOf, type RequestLogRow, type RequestPage, type RequestQuery } from "./request-log.ts";
import type { TaskOutcome, TaskRollup } from "./task-rollup.ts";

/** The TaskLedger Durable Object's RPC surface (one object per tenant). */
export interface TaskLedgerRpc {
  write(batch: TaskLedgerBatch): Promise<void>;
  tasks(tenant: string, q: TaskQuery): Promise<TaskRollup[]>;
  task(tenant: string, taskId: string, key?: string): Promise<{ task: TaskRollup; calls: CallRecord[] } | undefined>;
  setOutcome(taskId: string, outcome: TaskOutcome): Promise<boolean>;
  audit(q: AuditQuery): Promise<AuditEvent[]>;
  /** A page of the request log (every call, attributed to a task or not), newest first. */
  requests(q: RequestQuery): Promise<RequestPage>;
  request(requestId: string): Promise<RequestLogRow | undefined>;
}

/** What the call-ledger sink needs. */
export interface TaskLedgerSinkDeps {
  /** The tenant's TaskLedger. */
  readonly ledgerOf: (tenant: string) => Pick<TaskLedgerRpc, "write">;
  readonly retentionMs: number;
  /** Request-log rows a tenant's ledger keeps at most; 0: no request log (default {@link DEFAULT_MAX_REQUESTS}). */
  readonly maxRequests?: number | undefined;
  /** Which model completions are audit events (default `attributed`). */
  readonly modelCompletions?: ModelCompletions | undefined;
  /** Writes one audit log line (the access log's stream); undefined: no audit lines. */
  readonly line?: ((line: string) => void) | undefined;
  readonly log: (event: Readonly<Record<string, unknown>>) => void;
  /** How long records wait to be written together (a batch per tenant). */
  readonly batchMs?: number | undefined;
  /** Records a batch holds at most; a full batch is written at once. */
  readonly maxBatch?: number | undefined;
  /** The writer's clock (epoch ms); `Date.now` unless a test sets it. */
  readonly now?: (() => number) | undefined;
}


/** The call ledger's sink: finished requests, and audit events that belong to no request. */
export interface TaskLedgerSink extends FinishedRequestReader {
  /**
   * Records audit events caused outside a request (an approver's decision on the admin API):
   * written as lines and batched to the tenant's ledger exactly as a request's events are.
   */
  record(tenant: string, events: readonly AuditEvent[], waitUntil: (p: Promise<unknown>) => void): void;
}

/**
 * The call ledger's reader of finished requests: each request's call record (when attributed to a
 * task), its request-log row (every request of a tenant, attributed or not) and audit events, written to its tenant's TaskLedger in batches off the request path
 * (under `waitUntil`). A failed write is logged and dropped: the ledger never fails or slows a
 * request. Each audit event is also written as one `{"kind":"audit",...}` log line at once.
 */
export function taskLedgerSink(deps: TaskLedgerSinkDeps): TaskLedgerSink {
  const batchMs = deps.batchMs ?? 250;
  const maxBatch = deps.maxBatch ?? 200;
  const now = deps.now ?? Date.now;
  const maxRequests = deps.maxRequests ?? DEFAULT_MAX_REQUESTS;
  const pending = new Map<string, { calls: LedgerCall[]; events: AuditEvent[]; requests: RequestLogRow[] }>();
  const flush = async (tenant: string) => {
    const batch = pending.get(tenant);
    if (!batch) return;
    pending.delete(tenant);
    try {
      await deps.ledgerOf(tenant).write({ batchId: crypto.randomUUID(), at: now(), calls: batch.calls, events: batch.events, retentionMs: deps.retentionMs, requests: batch.requests, maxRequests });
    } catch (err) {
      deps.log({ kind: "task_ledger_write_failed", tenant, calls: batch.calls.length, events: batch.events.length, requests: batch.requests.length, error: String(err) });
    }
  };
  const enqueue = (tenant: string, call: LedgerCall | undefined, events: readonly AuditEvent[], row: RequestLogRow | undefined, waitUntil: (p: Promise<unknown>) => void) => {
    let batch = pending.get(tenant);
    const fresh = batch === undefined;
    if (!batch) pending.set(tenant, (batch = { calls: [], events: [], requests: [] }));
    if (call) batch.calls.push(call);
    if (row) batch.requests.push(row);
    batch.events.push(...events);
    if (batch.calls.length + batch.events.length + batch.requests.length >= maxBatch) waitUntil(flush(tenant));
    else if (fresh) waitUntil(new Promise((done) => setTimeout(done, batchMs)).then(() => flush(tenant)));
  };
  return {
    record(tenant, events, waitUntil) {
      if (deps.line) for (const e of events) deps.line(JSON.stringify({ kind: "audit", ...e }));
      if (events.length > 0) enqueue(tenant, undefined, events, undefined, waitUntil);
    },
    finished(r: Readonly<RequestRecord>, attempts: readonly Readonly<AttemptRecord>[], waitUntil: (p: Promise<unknown>) => void) {
      // An explain is an operator's question, not the tenant's call: no call record, no audit event.
      if (r.explain === true) return;
      let call: LedgerCall | undefined;
      let events: AuditEvent[];
      let row: RequestLogRow | undefined;
      try {
        call = callOf(r, attempts);
        events = auditEventsOf(r, attempts, newAuditEventId, deps.modelCompletions ?? "attributed");
        row = maxRequests > 0 ? requestRowOf(r, attempts) : undefined;
      } catch (err) {
        deps.log({ kind: "task_ledger_record_failed", requestId: r.requestId, error: String(err) });
        return;
      }
      if (deps.line) for (const e of events) deps.line(JSON.stringify({ kind: "audit", requestId: r.requestId, ...e }));
      const tenant = r.tenant;
      if (tenant === undefined || (call === undefined && events.length === 0 && row === undefined)) return;
      enqueue(tenant, call, events, row, waitUntil);
    },
  };
}
