import { DurableObject } from "cloudflare:workers";
import type { AuditEvent } from "../src/audit/audit-event.ts";
import type { CallRecord } from "../src/task-ledger/call-record.ts";
import { TaskLedgerStore, type AuditQuery, type TaskLedgerBatch, type TaskQuery } from "../src/task-ledger/task-ledger-store.ts";
import type { TaskOutcome, TaskRollup } from "../src/task-ledger/task-rollup.ts";
import type { TaskLedgerRpc } from "../src/task-ledger/task-ledger-client.ts";

/**
 * TaskLedger: one instance per tenant (`TASK_LEDGER.getByName(tenant)`), the tenant's call ledger
 * and audit trail. A thin RPC shell over TaskLedgerStore (tested without this class); each call
 * runs in one `transactionSync`. Its alarm runs retention in bounded batches: re-armed at once
 * while a batch was full, else for when the oldest row falls due.
 */
export class TaskLedger extends DurableObject<Env> implements TaskLedgerRpc {
  readonly #store: TaskLedgerStore;
  #alarmArmed = false;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#store = ctx.storage.transactionSync(() => new TaskLedgerStore(ctx.storage));
  }

  async write(batch: TaskLedgerBatch): Promise<void> {
    this.ctx.storage.transactionSync(() => this.#store.write(batch));
    if (!this.#alarmArmed) await this.#arm();
  }

  async tasks(tenant: string, q: TaskQuery): Promise<TaskRollup[]> {
    return this.ctx.storage.transactionSync(() => this.#store.tasks(tenant, q));
  }

  async task(tenant: string, taskId: string, key?: string): Promise<{ task: TaskRollup; calls: CallRecord[] } | undefined> {
    return this.ctx.storage.transactionSync(() => this.#store.task(tenant, taskId, key));
  }

  async setOutcome(taskId: string, outcome: TaskOutcome): Promise<boolean> {
    return this.ctx.storage.transactionSync(() => this.#store.setOutcome(taskId, outcome));
  }

  async audit(q: AuditQuery): Promise<AuditEvent[]> {
    return this.ctx.storage.transactionSync(() => this.#store.audit(q));
  }

  override async alarm(): Promise<void> {
    this.#alarmArmed = false;
    const now = Date.now();
    const { more } = this.ctx.storage.transactionSync(() => this.#store.retain(now));
    if (more) {
      await this.ctx.storage.setAlarm(now);
      this.#alarmArmed = true;
    } else await this.#arm();
  }

  async #arm(): Promise<void> {
    const next = this.ctx.storage.transactionSync(() => this.#store.nextRetention());
    if (next === undefined) return;
    const current = await this.ctx.storage.getAlarm();
    if (current === null || current > next) await this.ctx.storage.setAlarm(next);
    this.#alarmArmed = true;
  }
}
