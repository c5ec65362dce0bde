import { DurableObject } from "cloudflare:workers";
import type { AuditEvent } from "../src/audit/audit-event.ts";
import { systemClock } from "../src/deps/clock.ts";
import type { CallRecord } from "../src/task-ledger/call-record.ts";
import type { RequestLogRow, RequestPage, RequestQuery } from "../src/task-ledger/request-log.ts";
import type { TaskLedgerRpc } from "../src/task-ledger/task-ledger-client.ts";
import { TaskLedgerService } from "../src/task-ledger/task-ledger-service.ts";
import { TaskLedgerStore, type AuditQuery, type TaskLedgerBatch, type TaskQuery } from "../src/task-ledger/task-ledger-store.ts";
import type { TaskOutcome, TaskRollup } from "../src/task-ledger/task-rollup.ts";

/**
 * TaskLedger: one instance per tenant (`TASK_LEDGER.getByName(tenant)`), the tenant's call ledger
 * and audit trail. A thin RPC shell: what it serves is TaskLedgerService over TaskLedgerStore,
 * both tested without this class; each call runs in one `transactionSync`. Its alarm runs
 * retention in bounded batches: re-armed at once while a batch was full, else for when the oldest
 * row falls due.
 */
export class TaskLedger extends DurableObject<Env> implements TaskLedgerRpc {
  readonly #ledger: TaskLedgerService;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#ledger = new TaskLedgerService(ctx.storage.transactionSync(() => new TaskLedgerStore(ctx.storage)), ctx.storage, systemClock);
  }

  async write(batch: TaskLedgerBatch): Promise<void> {
    await this.#ledger.write(batch);
  }

  async tasks(tenant: string, q: TaskQuery): Promise<TaskRollup[]> {
    return this.#ledger.tasks(tenant, q);
  }

  async task(tenant: string, taskId: string, key?: string): Promise<{ task: TaskRollup; calls: CallRecord[] } | undefined> {
    return this.#ledger.task(tenant, taskId, key);
  }

  async setOutcome(taskId: string, outcome: TaskOutcome): Promise<boolean> {
    return this.#ledger.setOutcome(taskId, outcome);
  }

  async audit(q: AuditQuery): Promise<AuditEvent[]> {
    return this.#ledger.audit(q);
  }

  async requests(q: RequestQuery): Promise<RequestPage> {
    return this.#ledger.requests(q);
  }

  async request(requestId: string): Promise<RequestLogRow | undefined> {
    return this.#ledger.request(requestId);
  }

  override async alarm(): Promise<void> {
    await this.#ledger.alarm();
  }
}
