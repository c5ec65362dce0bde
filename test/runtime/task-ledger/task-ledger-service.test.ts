import { describe, expect, it } from "vitest";
import { TaskLedgerService, type TaskLedgerObjectStorage, type TaskLedgerRecords } from "../../../src/task-ledger/task-ledger-service.ts";
import type { TaskLedgerBatch } from "../../../src/task-ledger/task-ledger-store.ts";
import { FakeAlarmStorage } from "../support/fake-alarm-storage.ts";
import { FakeClock } from "../support/fixtures.ts";

/** Records that answer what a test sets and log what they were asked. */
class FakeRecords implements TaskLedgerRecords {
  next: number | undefined = undefined;
  more = false;
  readonly log: string[] = [];
  write(batch: TaskLedgerBatch): void {
    this.log.push(`write ${batch.batchId}`);
  }
  tasks(): never[] {
    this.log.push("tasks");
    return [];
  }
  task(): undefined {
    this.log.push("task");
    return undefined;
  }
  setOutcome(): boolean {
    this.log.push("setOutcome");
    return true;
  }
  audit(): never[] {
    this.log.push("audit");
    return [];
  }
  requests(): { calls: never[] } {
    this.log.push("requests");
    return { calls: [] };
  }
  request(): undefined {
    this.log.push("request");
    return undefined;
  }
  retain(now: number): { more: boolean } {
    this.log.push(`retain ${now}`);
    return { more: this.more };
  }
  nextRetention(): number | undefined {
    return this.next;
  }
}

/** The object's storage: an alarm in memory and counted transactions. */
class FakeStorage extends FakeAlarmStorage implements TaskLedgerObjectStorage {
  transactions = 0;
  transactionSync<T>(fn: () => T): T {
    this.transactions++;
    return fn();
  }
}

const batch = (batchId: string): TaskLedgerBatch => ({ batchId, at: 0, calls: [], events: [], retentionMs: 1_000 });

describe("TaskLedgerService", () => {
  const make = (alarmAt: number | null = null) => {
    const records = new FakeRecords();
    const storage = new FakeStorage(alarmAt);
    const clock = new FakeClock();
    return { records, storage, clock, ledger: new TaskLedgerService(records, storage, clock) };
  };

  it("arms the alarm for the oldest row on the first write, then writes without alarm work", async () => {
    const { records, storage, ledger } = make();
    records.next = 5_000;
    await ledger.write(batch("b1"));
    expect(storage.at).toBe(5_000);
    storage.log.length = 0;
    await ledger.write(batch("b2"));
    expect(storage.log).toEqual([]);
    expect(records.log).toEqual(["write b1", "write b2"]);
  });

  it("keeps an earlier alarm, and counts it as armed", async () => {
    const { records, storage, ledger } = make(1_000);
    records.next = 5_000;
    await ledger.write(batch("b1"));
    expect(storage.log).toEqual(["get"]);
    await ledger.write(batch("b2"));
    expect(storage.log).toEqual(["get"]);
  });

  it("arms nothing while nothing is kept, and tries again on the next write", async () => {
    const { records, storage, ledger } = make();
    await ledger.write(batch("b1"));
    expect(storage.log).toEqual([]);
    records.next = 7_000;
    await ledger.write(batch("b2"));
    expect(storage.at).toBe(7_000);
  });

  it("on its alarm retains at its clock's time and re-arms at once while a batch was full", async () => {
    const { records, storage, clock, ledger } = make();
    records.more = true;
    await ledger.alarm();
    expect(records.log).toEqual([`retain ${clock.now()}`]);
    expect(storage.log).toEqual([`set ${clock.now()}`]);
    // Armed: a write meanwhile does no alarm work.
    await ledger.write(batch("b1"));
    expect(storage.log).toEqual([`set ${clock.now()}`]);
  });

  it("on its alarm re-arms for the oldest row once retention is done, or for nothing when empty", async () => {
    const { records, storage, clock, ledger } = make();
    records.next = clock.now() + 9_000;
    await ledger.alarm();
    expect(storage.at).toBe(clock.now() + 9_000);

    const empty = make();
    await empty.ledger.alarm();
    expect(empty.storage.log).toEqual([]);
    // Not armed after all: the next write looks again.
    empty.records.next = 3_000;
    await empty.ledger.write(batch("b1"));
    expect(empty.storage.at).toBe(3_000);
  });

  it("runs each read and the outcome in a transaction of its own", () => {
    const { records, storage, ledger } = make();
    ledger.tasks("t", { limit: 1 });
    ledger.task("t", "task");
    ledger.setOutcome("task", { status: "passed", evidence: "report-1", at: 0, verifier: "ci" });
    ledger.audit({ limit: 1 });
    expect(records.log).toEqual(["tasks", "task", "setOutcome", "audit"]);
    expect(storage.transactions).toBe(4);
  });
});
