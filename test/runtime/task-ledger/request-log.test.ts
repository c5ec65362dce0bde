import { env, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { TaskLedger } from "../../../durable-objects/task-ledger.ts";
import type { RequestRecord } from "../../../src/context/request-record.ts";
import { decodeCursor, encodeCursor, requestRowOf, type RequestLogRow } from "../../../src/task-ledger/request-log.ts";
import { RETENTION_BATCH, TaskLedgerStore, type TaskLedgerBatch } from "../../../src/task-ledger/task-ledger-store.ts";
import { attempt, modelRecord } from "./task-fixtures.ts";

const DAY = 86_400_000;
let batches = 0;

/** An unattributed model call's row, received at `at`; `over` replaces the request's fields. */
function row(requestId: string, at: number, over: Partial<RequestRecord> & { model?: string } = {}): RequestLogRow {
  const { model, ...rest } = over;
  return requestRowOf(modelRecord({ requestId, receivedAt: at, endedAt: at + 40, attribution: undefined, ...rest }), [attempt({ id: `att_${requestId}`, requestId, startedAt: at, logicalModel: model ?? "gpt" })])!;
}

function batch(requests: readonly RequestLogRow[], over: Partial<TaskLedgerBatch> = {}): TaskLedgerBatch {
  return { batchId: `b${++batches}`, at: Date.now(), calls: [], events: [], retentionMs: 30 * DAY, requests, ...over };
}

describe("a request-log row", () => {
  it("has the access line's figures for a call that names no task", () => {
    const r = modelRecord({ requestId: "r1", receivedAt: 1_000, endedAt: 1_480, attribution: undefined, chargeTo: "team/app", decision: { name: "cheap", signals: {}, skipped: [] } });
    const attempts = [
      attempt({ id: "a1", requestId: "r1", backendName: "first", outcome: "upstream_status", usage: undefined, charge: { usage: "none", costMicros: 0, currency: "EUR" } }),
      attempt({ id: "a2", requestId: "r1", backendName: "second", startedAt: 1_100, firstContentAt: 1_250, logicalModel: "gpt-b", usage: { inputTokens: 12, outputTokens: 7, source: "provider" }, charge: { usage: "known", costMicros: 450, currency: "EUR" } }),
      attempt({ id: "a3", requestId: "r1", outcome: "not_sent" }),
    ];
    expect(requestRowOf(r, attempts)).toEqual({
      requestId: "r1",
      at: 1_000,
      endedAt: 1_480,
      tenant: "demo",
      key: "k1",
      project: "team/app",
      entrypoint: "chat",
      protocol: "openai-chat",
      stream: false,
      kind: "model",
      decision: "cheap",
      model: "gpt-b",
      backend: "second",
      attempts: 2,
      outcome: "success",
      latencyMs: 480,
      ttftMs: 250,
      tokens: { input: 12, output: 7 },
      costMicros: 450,
      currency: "EUR",
    });
  });

  it("keeps a task's id, content only when the policy sampled it, and nothing for an explain or a request with no tenant", () => {
    const a = [attempt({ id: "a1", requestId: "r2" })];
    expect(requestRowOf(modelRecord({ requestId: "r2" }), a)).toMatchObject({ taskId: "task-1", sessionId: "s1" });
    expect(requestRowOf(modelRecord({ requestId: "r2" }), a)!.content).toBeUndefined();
    const content = { prompt: "my key is sk-123 ok", completion: "fine", maxChars: 14, redact: [/sk-\d+/g] };
    expect(requestRowOf(modelRecord({ requestId: "r2", content }), a)!.content).toEqual({ prompt: { text: "my key is [red", truncated: true }, completion: { text: "fine", truncated: false } });
    expect(requestRowOf(modelRecord({ requestId: "r2", explain: true }), a)).toBeUndefined();
    expect(requestRowOf(modelRecord({ requestId: "r2", tenant: undefined }), a)).toBeUndefined();
  });

  it("names an MCP tool call's server and tool, and its settled charge", () => {
    const r = modelRecord({
      requestId: "m1",
      attribution: undefined,
      mcp: { method: "tools/call", jsonrpcId: 1, protocolVersion: "2025-06-18", server: "files", target: "read", toolSent: true, charge: { rule: "read", attemptId: "t1", micros: 2_000, currency: "USD", priceVersion: undefined, settlement: "charged" } },
    });
    expect(requestRowOf(r, [])).toMatchObject({ kind: "tool", model: "files/read", backend: "files", attempts: 1, costMicros: 2_000, currency: "USD", tokens: { input: 0, output: 0 } });
  });

  it("pages by an opaque cursor that refuses anything it did not make", () => {
    const text = encodeCursor({ at: 1_700_000_000_123, seq: 42 });
    expect(text).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeCursor(text)).toEqual({ at: 1_700_000_000_123, seq: 42 });
    for (const bad of ["", "!!", btoa("1.2.3"), btoa("x.1"), "a".repeat(65)]) expect(decodeCursor(bad)).toBeUndefined();
  });
});

describe("the request log on real SQLite", () => {
  it("filters by key, project, entrypoint, model, decision, outcome, code, task and time", async () => {
    const stub = env.TASK_LEDGER.getByName("log-filters");
    const t = Date.now() - 60_000;
    const rows = [
      row("f1", t, { key: "k1", chargeTo: "team/a" }),
      row("f2", t + 1, { key: "k2", model: "gpt-b", decision: { name: "big", signals: {}, skipped: [] } }),
      row("f3", t + 2, { key: "k1", outcome: "error", errorCode: "upstream_error", entrypoint: "messages" }),
      row("f4", t + 3, { key: "k2", attribution: { taskId: "job-1" } }),
    ];
    await stub.write(batch(rows));
    const ids = async (q: Partial<Parameters<typeof stub.requests>[0]>) => (await stub.requests({ limit: 10, ...q })).calls.map((c) => c.requestId);
    expect(await ids({})).toEqual(["f4", "f3", "f2", "f1"]);
    expect(await ids({ key: "k1" })).toEqual(["f3", "f1"]);
    expect(await ids({ project: "team/a" })).toEqual(["f1"]);
    expect(await ids({ entrypoint: "messages" })).toEqual(["f3"]);
    expect(await ids({ model: "gpt-b" })).toEqual(["f2"]);
    expect(await ids({ decision: "big" })).toEqual(["f2"]);
    expect(await ids({ outcome: "error" })).toEqual(["f3"]);
    expect(await ids({ errorCode: "upstream_error" })).toEqual(["f3"]);
    expect(await ids({ taskId: "job-1" })).toEqual(["f4"]);
    expect(await ids({ since: t + 1, until: t + 2 })).toEqual(["f3", "f2"]);
    expect(await ids({ key: "k2", since: t + 2 })).toEqual(["f4"]);
    // A row is stored as it was made, and found by its id.
    expect(await stub.request("f2")).toEqual(rows[1]);
    expect(await stub.request("nope")).toBeUndefined();
  });

  it("pages newest first, and calls stored between pages neither repeat nor skip a row", async () => {
    const stub = env.TASK_LEDGER.getByName("log-paging");
    const t = Date.now() - 60_000;
    // Two calls share a millisecond: arrival order breaks the tie.
    await stub.write(batch([row("p1", t), row("p2", t + 10), row("p3", t + 10), row("p4", t + 20), row("p5", t + 30)]));
    const first = await stub.requests({ limit: 2 });
    expect(first.calls.map((c) => c.requestId)).toEqual(["p5", "p4"]);
    // Meanwhile: a newer call, and a long one received earlier that only now ended.
    await stub.write(batch([row("p6", t + 40), row("p0", t - 5)]));
    const second = await stub.requests({ limit: 2, cursor: first.next });
    expect(second.calls.map((c) => c.requestId)).toEqual(["p3", "p2"]);
    const third = await stub.requests({ limit: 2, cursor: second.next });
    expect(third.calls.map((c) => c.requestId)).toEqual(["p1", "p0"]);
    expect(third.next).toBeUndefined();
    // Filters hold across pages.
    const page = await stub.requests({ limit: 1, since: t + 10, cursor: (await stub.requests({ limit: 4 })).next });
    expect(page.calls.map((c) => c.requestId)).toEqual(["p2"]);
  });

  it("keeps at most the configured number of calls, the newest, trimming as it writes and on its alarm when the bound is lowered", async () => {
    const stub = env.TASK_LEDGER.getByName("log-bound");
    const t = Date.now() - 60_000;
    const rows = Array.from({ length: 30 }, (_, i) => row(`c${i}`, t + i));
    await stub.write(batch(rows.slice(0, 20), { maxRequests: 25 }));
    await stub.write(batch(rows.slice(20), { maxRequests: 25 }));
    const listed = (await stub.requests({ limit: 100 })).calls.map((c) => c.requestId);
    expect(listed).toEqual(rows.slice(5).map((r) => r.requestId).reverse());
    // A lowered bound: more than a retention batch over it, gone over two alarm runs.
    const many = Array.from({ length: RETENTION_BATCH + 40 }, (_, i) => row(`m${i}`, t + 100 + i));
    await stub.write(batch(many, { maxRequests: 10_000 }));
    const count = () => runInDurableObject(stub, (_i: TaskLedger, state) => Number(state.storage.sql.exec("SELECT COUNT(*) AS n FROM tl_requests").toArray()[0]!.n));
    expect(await count()).toBe(25 + RETENTION_BATCH + 40);
    await runInDurableObject(stub, (_i: TaskLedger, state) => state.storage.transactionSync(() => new TaskLedgerStore(state.storage).write(batch([], { maxRequests: 10 }))));
    // The alarm is run by hand, one run at a time: none may also fire on its own between the counts.
    const runAlarm = () =>
      runInDurableObject(stub, async (instance: TaskLedger, state) => {
        await instance.alarm();
        await state.storage.deleteAlarm();
      });
    await runInDurableObject(stub, (_i: TaskLedger, state) => state.storage.deleteAlarm());
    await runAlarm();
    expect(await count()).toBe(25 + RETENTION_BATCH + 40 - RETENTION_BATCH);
    await runAlarm();
    expect(await count()).toBe(10);
    expect((await stub.requests({ limit: 100 })).calls.map((c) => c.requestId)).toEqual(many.slice(-10).map((r) => r.requestId).reverse());
  });

  it("forgets calls past the retention on its alarm, with the call ledger's other records", async () => {
    const stub = env.TASK_LEDGER.getByName("log-retention");
    const old = Date.now() - 10 * DAY;
    await runInDurableObject(stub, (_i: TaskLedger, state) =>
      state.storage.transactionSync(() => new TaskLedgerStore(state.storage).write(batch([row("old1", old), row("old2", old + 1), row("new1", Date.now())], { retentionMs: DAY }))),
    );
    await runInDurableObject(stub, (instance: TaskLedger) => instance.alarm());
    expect((await stub.requests({ limit: 10 })).calls.map((c) => c.requestId)).toEqual(["new1"]);
    // The alarm now waits for the newest call to age out.
    expect(await runInDurableObject(stub, (_i: TaskLedger, state) => state.storage.getAlarm())).toBeGreaterThan(Date.now() + DAY / 2);
  });
});
