import type { AlarmStorage } from "../deps/alarm-storage.ts";
import type { Clock } from "../deps/clock.ts";
import type { AuditEvent } from "../audit/audit-event.ts";
import type { CallRecord } from "./call-record.ts";
import type { RequestLogRow, RequestPage, RequestQuery } from "./request-log.ts";
import type { AuditQuery, TaskLedgerBatch, TaskLedgerStore, TaskQuery } from "./task-ledger-store.ts";
import type { TaskOutcome, TaskRollup } from "./task-rollup.ts";

/** What the service asks of a tenant's records: {@link TaskLedgerStore}, or a fake in tests. */
export type TaskLedgerRecords = Pick<TaskLedgerStore, "write" | "tasks" | "task" | "setOutcome" | "audit" | "requests" | "request" | "retain" | "nextRetention">;

/** The part of a Durable Object's storage (`ctx.storage`) the service uses: transactions and the alarm. */
export interface TaskLedgerObjectStorage extends AlarmStorage {
  transactionSync<T>(fn: () => T): T;
}

/**
 * What the TaskLedger object serves over RPC and runs on its alarm, runnable without it. Each call
 * runs in one transaction. Retention runs on the alarm in bounded batches: re-armed at once while
 * a batch was full, else for when the oldest row falls due. A write arms the alarm unless this
 * instance knows it is armed, so the common write costs no alarm work.
 */
export class TaskLedgerService {
  readonly #store: TaskLedgerRecords;
  readonly #storage: TaskLedgerObjectStorage;
  readonly #clock: Clock;
  #alarmArmed = false;

  constructor(store: TaskLedgerRecords, storage: TaskLedgerObjectStorage, clock: Clock) {
    this.#store = store;
    this.#storage = storage;
    this.#clock = clock;
  }

  async write(batch: TaskLedgerBatch): Promise<void> {
    this.#storage.transactionSync(() => this.#store.write(batch));
    if (!this.#alarmArmed) await this.#arm();
  }

  tasks(tenant: string, q: TaskQuery): TaskRollup[] {
    return this.#storage.transactionSync(() => this.#store.tasks(tenant, q));
  }

  task(tenant: string, taskId: string, key?: string): { task: TaskRollup; calls: CallRecord[] } | undefined {
    return this.#storage.transactionSync(() => this.#store.task(tenant, taskId, key));
  }

  setOutcome(taskId: string, outcome: TaskOutcome): boolean {
    return this.#storage.transactionSync(() => this.#store.setOutcome(taskId, outcome));
  }

  audit(q: AuditQuery): AuditEvent[] {
    return this.#storage.transactionSync(() => this.#store.audit(q));
  }

  requests(q: RequestQuery): RequestPage {
    return this.#storage.transactionSync(() => this.#store.requests(q));
  }

  request(requestId: string): RequestLogRow | undefined {
    return this.#storage.transactionSync(() => this.#store.request(requestId));
  }

  async alarm(): Promise<void> {
    this.#alarmArmed = false;
    const now = this.#clock.now();
    const { more } = this.#storage.transactionSync(() => this.#store.retain(now));
    if (more) {
      await this.#storage.setAlarm(now);
      this.#alarmArmed = true;
    } else await this.#arm();
  }

  async #arm(): Promise<void> {
    const next = this.#storage.transactionSync(() => this.#store.nextRetention());
    if (next === undefined) return;
    const current = await this.#storage.getAlarm();
    if (current === null || current > next) await this.#storage.setAlarm(next);
    this.#alarmArmed = true;
  }
}
