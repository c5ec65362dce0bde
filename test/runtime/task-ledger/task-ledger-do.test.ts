import { env, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { TaskLedger } from "../../../durable-objects/task-ledger.ts";
import type { AuditEvent } from "../../../src/audit/audit-event.ts";
import { callOf, type LedgerCall } from "../../../src/task-ledger/call-record.ts";
import { RETENTION_BATCH, TaskLedgerStore } from "../../../src/task-ledger/task-ledger-store.ts";
import { attempt, modelRecord } from "./task-fixtures.ts";

const DAY = 86_400_000;

function call(requestId: string, taskId: string, over: { key?: string; parent?: string; at?: number; session?: string } = {}): LedgerCall {
  const at = over.at ?? Date.now();
  return callOf(modelRecord({ requestId, key: over.key ?? "k1", receivedAt: at, endedAt: at + 5, attribution: { taskId, sessionId: over.session ?? "s1", turnId: "t1", parentTaskId: over.parent } }), [attempt({ id: `att_${requestId}`, requestId })])!;
}

describe("TaskLedger store on real SQLite", () => {
  it("keeps tasks, calls and audit events, lists them with filters, and counts a retried write once", async () => {
    const stub = env.TASK_LEDGER.getByName("store-tenant");
    const denied: AuditEvent = { id: "evt_d", at: Date.now(), type: "decision.denied", tenant: "store-tenant", subject: "k2", taskId: "child", callId: "r3" };
    const batch = { batchId: "b1", at: Date.now(), calls: [call("r1", "parent"), call("r2", "parent", { session: "s2" }), call("r3", "child", { key: "k2", parent: "parent" })], events: [denied], retentionMs: 30 * DAY };
    await stub.write(batch);
    await stub.write(batch);
    const all = await stub.tasks("store-tenant", { limit: 10 });
    expect(all.map((t) => t.taskId).sort()).toEqual(["child", "parent"]);
    const parent = all.find((t) => t.taskId === "parent")!;
    expect(parent).toMatchObject({ tenant: "store-tenant", calls: 2, attempts: 2, costMicros: 600, sessions: 2, turns: 2, children: ["child"] });
    expect(all.find((t) => t.taskId === "child")).toMatchObject({ parentTaskId: "parent", calls: 1 });
    // The key filter, and a key's own view that counts only its calls.
    expect((await stub.tasks("store-tenant", { key: "k2", limit: 10 })).map((t) => t.taskId)).toEqual(["child"]);
    expect(await stub.task("store-tenant", "parent", "k2")).toBeUndefined();
    // k1's view of its task does not name k2's child task.
    expect((await stub.task("store-tenant", "parent", "k1"))!.task).toMatchObject({ calls: 2, children: [] });
    const drill = (await stub.task("store-tenant", "parent"))!;
    expect(drill.calls.map((c) => c.callId)).toEqual(["r1", "r2"]);
    expect(drill.calls[0]!.attempts).toEqual([{ attemptId: "att_r1", backend: "sim", outcome: "success", usage: "known", costMicros: 300 }]);
    expect(await stub.audit({ taskId: "child", limit: 10 })).toEqual([denied]);
    expect(await stub.audit({ type: "decision.allowed", limit: 10 })).toEqual([]);
    expect(await stub.audit({ type: "decision.denied", limit: 10 })).toEqual([denied]);
    // An outcome is attached only to a task that exists.
    expect(await stub.setOutcome("parent", { status: "succeeded", evidence: "ci://run/1", at: 1, verifier: "verifier" })).toBe(true);
    expect(await stub.setOutcome("nope", { status: "succeeded", evidence: "x", at: 1, verifier: "verifier" })).toBe(false);
    expect((await stub.task("store-tenant", "parent"))!.task.outcome).toMatchObject({ status: "succeeded", evidence: "ci://run/1" });
  });

  it("survives a new instance: records are in SQLite, not memory", async () => {
    const stub = env.TASK_LEDGER.getByName("restart-tenant");
    await stub.write({ batchId: "b1", at: Date.now(), calls: [call("r1", "task")], events: [], retentionMs: 30 * DAY });
    const fresh = await runInDurableObject(stub, (_i: TaskLedger, state) => state.storage.transactionSync(() => new TaskLedgerStore(state.storage).task("restart-tenant", "task")));
    expect(fresh?.task).toMatchObject({ calls: 1, costMicros: 300 });
  });

  it("removes records past the retention from its alarm, in batches", async () => {
    const stub = env.TASK_LEDGER.getByName("retention-tenant");
    const old = Date.now() - 10 * DAY;
    const calls = Array.from({ length: RETENTION_BATCH + 20 }, (_, i) => call(`old${i}`, `old-task-${i % 3}`, { at: old + i }));
    const event = (id: string, at: number): AuditEvent => ({ id, at, type: "model.completed", tenant: "retention-tenant", subject: "k1", callId: id });
    // Events are kept in arrival order: one that is new arrives between old ones and stays.
    const events = [...Array.from({ length: RETENTION_BATCH + 20 }, (_, i) => event(`evt_old${i}`, old + i)), event("evt_new", Date.now())];
    events.splice(10, 0, event("evt_new_early", Date.now()));
    // Written around the object's RPC, so nothing armed the alarm: it is run here by hand.
    await runInDurableObject(stub, (_i: TaskLedger, state) =>
      state.storage.transactionSync(() => {
        const store = new TaskLedgerStore(state.storage);
        store.write({ batchId: "old", at: old, calls: [...calls, call("new", "new-task")], events, retentionMs: DAY });
        store.write({ batchId: "new", at: Date.now(), calls: [], events: [], retentionMs: DAY });
      }),
    );
    const rows = (table: string) => runInDurableObject(stub, (_i: TaskLedger, state) => Number(state.storage.sql.exec(`SELECT COUNT(*) AS n FROM ${table}`).toArray()[0]!.n));
    const count = () => rows("tl_calls");
    expect(await count()).toBe(RETENTION_BATCH + 21);
    expect(await rows("tl_audit")).toBe(RETENTION_BATCH + 22);
    // The first run removes one batch and re-arms at once; the next removes the rest.
    const runAlarm = () =>
      runInDurableObject(stub, async (instance: TaskLedger, state) => {
        await instance.alarm();
        return Number(state.storage.sql.exec("SELECT COUNT(*) AS n FROM tl_calls").toArray()[0]!.n);
      });
    expect(await runAlarm()).toBe(21);
    await runAlarm();
    expect(await count()).toBe(1);
    // Nothing is due any more: the alarm waits for the newest row to age out.
    const alarm = await runInDurableObject(stub, (_i: TaskLedger, state) => state.storage.getAlarm());
    expect(alarm).toBeGreaterThan(Date.now() + DAY / 2);
    expect((await stub.tasks("retention-tenant", { limit: 10 })).map((t) => t.taskId)).toEqual(["new-task"]);
    expect((await stub.audit({ limit: 10 })).map((e) => e.id)).toEqual(["evt_new", "evt_new_early"]);
    // The old batch's id is forgotten with it; the new one's is still known (so it is not stored twice).
    expect(await rows("tl_batches")).toBe(1);
    await stub.write({ batchId: "new", at: Date.now(), calls: [], events: [event("evt_again", Date.now())], retentionMs: DAY });
    expect(await rows("tl_audit")).toBe(2);
  });
});
