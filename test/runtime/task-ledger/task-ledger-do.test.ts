import { env, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { TaskLedger } from "../../../durable-objects/task-ledger.ts";
import type { AuditEvent } from "../../../src/audit/audit-event.ts";
import { callOf, type LedgerCall } from "../../../src/task-ledger/call-record.ts";
import { requestRowOf } from "../../../src/task-ledger/request-log.ts";
import { RETENTION_BATCH, TaskLedgerStore } from "../../../src/task-ledger/task-ledger-store.ts";
import { rollupTask } from "../../../src/task-ledger/task-rollup.ts";
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
    // Costliest first: parent's two calls cost more than child's one, whichever was seen last.
    expect((await stub.tasks("store-tenant", { order: "spend", limit: 10 })).map((t) => [t.taskId, t.costMicros])).toEqual([
      ["parent", 600],
      ["child", 300],
    ]);
    expect((await stub.tasks("store-tenant", { order: "spend", limit: 1 })).map((t) => t.taskId)).toEqual(["parent"]);
    await stub.write({ batchId: "b-late", at: Date.now(), calls: [call("r9", "late", { at: Date.now() + 60_000 })], events: [], retentionMs: 30 * DAY });
    expect((await stub.tasks("store-tenant", { limit: 1 })).map((t) => t.taskId)).toEqual(["late"]);
    // Equal costs: the one seen last first.
    expect((await stub.tasks("store-tenant", { order: "spend", limit: 10 })).map((t) => [t.taskId, t.costMicros])).toEqual([
      ["parent", 600],
      ["late", 300],
      ["child", 300],
    ]);
    // The key filter, and a key's own view that counts only its calls.
    expect((await stub.tasks("store-tenant", { key: "k2", limit: 10 })).map((t) => t.taskId)).toEqual(["child"]);
    expect(await stub.task("store-tenant", "parent", "k2")).toBeUndefined();
    // k1's view of its task does not name k2's child task.
    expect((await stub.task("store-tenant", "parent", "k1"))!.task).toMatchObject({ calls: 2, children: [] });
    const drill = (await stub.task("store-tenant", "parent"))!;
    expect(drill.calls.map((c) => c.callId)).toEqual(["r1", "r2"]);
    expect(drill.calls[0]!.attempts).toEqual([{ attemptId: "att_r1", backend: "sim", protocol: "openai-chat", codecVersion: "1", outcome: "success", usage: "known", usageSource: "reported", costMicros: 300 }]);
    expect(await stub.audit({ taskId: "child", limit: 10 })).toEqual([denied]);
    expect(await stub.audit({ type: "decision.allowed", limit: 10 })).toEqual([]);
    expect(await stub.audit({ type: "decision.denied", limit: 10 })).toEqual([denied]);
    // An outcome is attached only to a task that exists.
    expect(await stub.setOutcome("parent", { status: "succeeded", evidence: "ci://run/1", at: 1, verifier: "verifier" })).toBe(true);
    expect(await stub.setOutcome("nope", { status: "succeeded", evidence: "x", at: 1, verifier: "verifier" })).toBe(false);
    expect((await stub.task("store-tenant", "parent"))!.task.outcome).toMatchObject({ status: "succeeded", evidence: "ci://run/1" });
  });

  it("stores every event and request row of a large batch, in arrival order", async () => {
    const stub = env.TASK_LEDGER.getByName("store-big-batch");
    const at = Date.now();
    // More rows than one statement may bind (100 parameters): a batched insert must still keep them all, in order.
    const events: AuditEvent[] = Array.from({ length: 47 }, (_, i) => ({ id: `evt_${i}`, at: at + i, type: "decision.denied", tenant: "store-big-batch", subject: "k1", taskId: i % 2 === 0 ? "even" : undefined, callId: `r${i}` }));
    const requests = Array.from({ length: 23 }, (_, i) => requestRowOf(modelRecord({ requestId: `req_${i}`, receivedAt: at + i, endedAt: at + i + 1, attribution: undefined }), [attempt({ id: `att_req_${i}`, requestId: `req_${i}` })])!);
    await stub.write({ batchId: "big", at, calls: [], events, retentionMs: 30 * DAY, requests });
    expect((await stub.audit({ limit: 100 })).map((e) => e.id)).toEqual(events.map((e) => e.id).reverse());
    expect(await stub.audit({ taskId: "even", limit: 100 })).toHaveLength(24);
    const rows = (await stub.requests({ limit: 100 })).calls;
    expect(rows.map((r) => r.requestId)).toEqual(requests.map((r) => r.requestId).reverse());
    expect(await stub.request("req_22")).toEqual(requests[22]);
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
    // Nothing is due any more: the alarm waits for the newest row to age out. The "at once"
    // re-arm of the first run may also fire by itself meanwhile (the alarm is cleared while it
    // runs), so this waits for the settled alarm instead of reading it once.
    let alarm: number | null = null;
    for (const until = Date.now() + 5_000; Date.now() < until; await new Promise((r) => setTimeout(r, 20))) {
      alarm = await runInDurableObject(stub, (_i: TaskLedger, state) => state.storage.getAlarm());
      if (alarm !== null && alarm > Date.now() + DAY / 2) break;
    }
    expect(alarm).toBeGreaterThan(Date.now() + DAY / 2);
    expect((await stub.tasks("retention-tenant", { limit: 10 })).map((t) => t.taskId)).toEqual(["new-task"]);
    expect((await stub.audit({ limit: 10 })).map((e) => e.id)).toEqual(["evt_new", "evt_new_early"]);
    // The old batch's id is forgotten with it; the new one's is still known (so it is not stored twice).
    expect(await rows("tl_batches")).toBe(1);
    await stub.write({ batchId: "new", at: Date.now(), calls: [], events: [event("evt_again", Date.now())], retentionMs: DAY });
    expect(await rows("tl_audit")).toBe(2);
  });
});

describe("TaskLedger totals kept as calls arrive", () => {
  const store = (stub: DurableObjectStub<TaskLedger>) => <T>(fn: (s: TaskLedgerStore, sql: SqlStorage) => T) =>
    runInDurableObject(stub, (_i: TaskLedger, state) => state.storage.transactionSync(() => fn(new TaskLedgerStore(state.storage), state.storage.sql)));

  it("equal the rollup summed from the task's calls, across batches, and a retried batch adds nothing", async () => {
    const stub = env.TASK_LEDGER.getByName("totals-tenant");
    const calls = [call("t1", "job", { session: "s1" }), call("t2", "job", { session: "s2", key: "k2" }), call("t3", "job", { session: "s2" }), call("t4", "job", { session: "s1" })];
    await stub.write({ batchId: "a", at: Date.now(), calls: calls.slice(0, 2), events: [], retentionMs: 30 * DAY });
    await stub.write({ batchId: "b", at: Date.now(), calls: calls.slice(2), events: [], retentionMs: 30 * DAY });
    await stub.write({ batchId: "b", at: Date.now(), calls: calls.slice(2), events: [], retentionMs: 30 * DAY });
    const { task, calls: listed } = (await stub.task("totals-tenant", "job"))!;
    const head = { taskId: "job", tenant: "totals-tenant", children: [], firstSeen: task.firstSeen, lastSeen: task.lastSeen };
    expect(task).toEqual(rollupTask(head, calls, []));
    expect(task).toMatchObject({ calls: 4, attempts: 4, costMicros: 1_200, sessions: 2, turns: 2 });
    expect(listed).toHaveLength(4);
    // A key's own view is still summed from its own calls.
    expect((await stub.task("totals-tenant", "job", "k2"))!.task).toMatchObject({ calls: 1, costMicros: 300, sessions: 1 });
  });

  it("are summed once from the calls for a task written before they were kept, then kept", async () => {
    const stub = env.TASK_LEDGER.getByName("backfill-tenant");
    const run = store(stub);
    await stub.write({ batchId: "a", at: Date.now(), calls: [call("b1", "old-job", { session: "s1" }), call("b2", "old-job", { session: "s2" })], events: [], retentionMs: 30 * DAY });
    // As a ledger from before totals: no totals row, no distinct rows.
    await run((_s, sql) => ["tl_totals", "tl_sessions", "tl_turns"].forEach((t) => sql.exec(`DELETE FROM ${t}`)));
    // A new call of that task sums the old ones first; a read of another such task backfills it.
    await stub.write({ batchId: "b", at: Date.now(), calls: [call("b3", "old-job", { session: "s1" })], events: [], retentionMs: 30 * DAY });
    expect((await stub.task("backfill-tenant", "old-job"))!.task).toMatchObject({ calls: 3, costMicros: 900, sessions: 2 });
    await stub.write({ batchId: "c", at: Date.now(), calls: [call("c1", "other-job")], events: [], retentionMs: 30 * DAY });
    await run((_s, sql) => sql.exec("DELETE FROM tl_totals WHERE task_id = 'other-job'"));
    expect((await stub.tasks("backfill-tenant", { limit: 10 })).find((t) => t.taskId === "other-job")).toMatchObject({ calls: 1, costMicros: 300 });
    expect(await run((_s, sql) => sql.exec("SELECT COUNT(*) AS n FROM tl_totals").toArray()[0]!.n)).toBe(2);
  });

  it("keep each task's cost in an indexed column, added and filled from the totals on a ledger made before it", async () => {
    const stub = env.TASK_LEDGER.getByName("cost-column-tenant");
    const run = store(stub);
    await stub.write({ batchId: "a", at: Date.now(), calls: [call("k1", "cheap"), call("k2", "dear"), call("k3", "dear")], events: [], retentionMs: 30 * DAY });
    // As a ledger from before the column: its totals table without it.
    await run((_s, sql) => {
      sql.exec("DROP INDEX tl_totals_cost");
      sql.exec("CREATE TABLE old_totals AS SELECT task_id, body FROM tl_totals");
      sql.exec("DROP TABLE tl_totals");
      sql.exec("CREATE TABLE tl_totals (task_id TEXT PRIMARY KEY, body TEXT NOT NULL)");
      sql.exec("INSERT INTO tl_totals SELECT * FROM old_totals");
      sql.exec("DROP TABLE old_totals");
    });
    // The next store adds the column, fills it from the JSON and indexes it; "costliest first" reads the index.
    expect(await run((_s, sql) => sql.exec("SELECT task_id, cost_micros FROM tl_totals ORDER BY task_id").toArray())).toEqual([
      { task_id: "cheap", cost_micros: 300 },
      { task_id: "dear", cost_micros: 600 },
    ]);
    const plan = await run((_s, sql) => sql.exec("EXPLAIN QUERY PLAN SELECT t.* FROM tl_totals s JOIN tl_tasks t ON t.task_id = s.task_id ORDER BY s.cost_micros DESC LIMIT 10").toArray().map((r) => String(r.detail)).join("; "));
    expect(plan).toContain("tl_totals_cost");
    await stub.write({ batchId: "b", at: Date.now(), calls: [call("k4", "cheap"), call("k5", "cheap")], events: [], retentionMs: 30 * DAY });
    expect((await stub.tasks("cost-column-tenant", { order: "spend", limit: 10 })).map((t) => [t.taskId, t.costMicros])).toEqual([
      ["cheap", 900],
      ["dear", 600],
    ]);
  });

  it("keep counting calls retention removed while the task is still seen, and go with the task", async () => {
    const stub = env.TASK_LEDGER.getByName("totals-retention-tenant");
    const run = store(stub);
    const old = Date.now() - 10 * DAY;
    await run((s) => s.write({ batchId: "a", at: old, calls: [call("o1", "long-job", { at: old }), call("o2", "gone-job", { at: old })], events: [], retentionMs: DAY }));
    await stub.write({ batchId: "b", at: Date.now(), calls: [call("n1", "long-job")], events: [], retentionMs: DAY });
    await runInDurableObject(stub, (instance: TaskLedger) => instance.alarm());
    const { task, calls } = (await stub.task("totals-retention-tenant", "long-job"))!;
    // The old call is no longer listed, but the task's totals still count it.
    expect(calls.map((c) => c.callId)).toEqual(["n1"]);
    expect(task).toMatchObject({ calls: 2, costMicros: 600 });
    expect(await stub.task("totals-retention-tenant", "gone-job")).toBeUndefined();
    expect(await run((_s, sql) => sql.exec("SELECT task_id FROM tl_totals ORDER BY task_id").toArray().map((r) => r.task_id))).toEqual(["long-job"]);
    expect(await run((_s, sql) => sql.exec("SELECT COUNT(*) AS n FROM tl_sessions WHERE task_id = 'gone-job'").toArray()[0]!.n)).toBe(0);
  });
});
