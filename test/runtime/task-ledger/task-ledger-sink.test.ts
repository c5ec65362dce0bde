import { describe, expect, it } from "vitest";
import type { TaskLedgerBatch } from "../../../src/task-ledger/task-ledger-store.ts";
import { taskLedgerSink } from "../../../src/task-ledger/task-ledger-client.ts";
import { attempt, modelRecord } from "./task-fixtures.ts";

describe("the call ledger's sink", () => {
  it("batches a tenant's records off the request path and writes each audit event as a log line", async () => {
    const writes: { tenant: string; batch: TaskLedgerBatch }[] = [];
    const lines: string[] = [];
    const waits: Promise<unknown>[] = [];
    const sink = taskLedgerSink({ ledgerOf: (tenant) => ({ write: async (batch) => void writes.push({ tenant, batch }) }), retentionMs: 1_000, line: (l) => lines.push(l), log: () => {}, batchMs: 5 });
    for (const id of ["r1", "r2"]) sink.finished(modelRecord({ requestId: id }), [attempt({ id: `a_${id}`, requestId: id })], (p) => waits.push(p));
    // Nothing is written while the requests are being answered.
    expect(writes).toEqual([]);
    expect(lines.map((l) => JSON.parse(l))).toMatchObject([{ kind: "audit", type: "model.completed", requestId: "r1" }, { kind: "audit", type: "model.completed", requestId: "r2" }]);
    await Promise.all(waits);
    expect(writes).toHaveLength(1);
    expect(writes[0]).toMatchObject({ tenant: "demo", batch: { retentionMs: 1_000, calls: [{ callId: "r1" }, { callId: "r2" }] } });
    expect(writes[0]!.batch.events).toHaveLength(2);
  });

  it("logs a failed write and never throws it at the request", async () => {
    const logged: Record<string, unknown>[] = [];
    const waits: Promise<unknown>[] = [];
    const sink = taskLedgerSink({ ledgerOf: () => ({ write: () => Promise.reject(new Error("ledger down")) }), retentionMs: 1_000, log: (e) => logged.push(e), batchMs: 1 });
    expect(() => sink.finished(modelRecord({ requestId: "r3" }), [], (p) => waits.push(p))).not.toThrow();
    await expect(Promise.all(waits)).resolves.toBeDefined();
    expect(logged).toMatchObject([{ kind: "task_ledger_write_failed", tenant: "demo", calls: 1, error: "Error: ledger down" }]);
  });

  it("writes an unattributed model call to the request log only: no audit event or line unless every completion is asked for, nothing at all with no request log", async () => {
    const waits: Promise<unknown>[] = [];
    const lines: string[] = [];
    const writes: TaskLedgerBatch[] = [];
    const deps = { ledgerOf: () => ({ write: async (b: TaskLedgerBatch) => void writes.push(b) }), retentionMs: 1_000, line: (l: string) => lines.push(l), log: () => {}, batchMs: 1 };
    const unattributed = () => modelRecord({ requestId: "r5", attribution: undefined });
    taskLedgerSink({ ...deps, maxRequests: 0 }).finished(unattributed(), [attempt({ id: "a_r5", requestId: "r5" })], (p) => waits.push(p));
    expect(waits).toEqual([]);
    taskLedgerSink(deps).finished(unattributed(), [attempt({ id: "a_r5", requestId: "r5" })], (p) => waits.push(p));
    await Promise.all(waits);
    expect(lines).toEqual([]);
    expect(writes).toHaveLength(1);
    expect(writes[0]).toMatchObject({ calls: [], events: [], maxRequests: 100_000, requests: [{ requestId: "r5", tenant: "demo", key: "k1", model: "gpt", backend: "sim", attempts: 1, costMicros: 300, currency: "USD", tokens: { input: 10, output: 5 } }] });
    expect(writes[0]!.requests![0]!.taskId).toBeUndefined();
    taskLedgerSink({ ...deps, modelCompletions: "all" }).finished(unattributed(), [attempt({ id: "a_r5", requestId: "r5" })], (p) => waits.push(p));
    await Promise.all(waits);
    expect(lines.map((l) => JSON.parse(l))).toMatchObject([{ kind: "audit", type: "model.completed", requestId: "r5", attemptId: "a_r5" }]);
    expect(writes).toHaveLength(2);
    expect(writes[1]!.events).toHaveLength(1);
  });

  it("records audit events caused outside a request (an approver's decision) the same way: a line each, batched to the tenant's ledger", async () => {
    const writes: { tenant: string; batch: TaskLedgerBatch }[] = [];
    const lines: string[] = [];
    const waits: Promise<unknown>[] = [];
    const sink = taskLedgerSink({ ledgerOf: (tenant) => ({ write: async (batch) => void writes.push({ tenant, batch }) }), retentionMs: 1_000, line: (l) => lines.push(l), log: () => {}, batchMs: 1 });
    const granted = { id: "evt_g", at: 5, type: "approval.granted" as const, tenant: "acme", subject: "k1", approvalId: "ap_1", actor: "approver", reason: "ok" };
    sink.record("acme", [granted], (p) => waits.push(p));
    expect(lines.map((l) => JSON.parse(l))).toEqual([{ kind: "audit", ...granted }]);
    await Promise.all(waits);
    expect(writes).toMatchObject([{ tenant: "acme", batch: { calls: [], events: [granted], retentionMs: 1_000 } }]);
  });

  it("writes nothing for a request that reached no tenant", async () => {
    const waits: Promise<unknown>[] = [];
    let wrote = false;
    const sink = taskLedgerSink({ ledgerOf: () => ({ write: async () => void (wrote = true) }), retentionMs: 1_000, log: () => {}, batchMs: 1 });
    sink.finished(modelRecord({ requestId: "r4", tenant: undefined, key: undefined }), [], (p) => waits.push(p));
    await Promise.all(waits);
    expect(waits).toEqual([]);
    expect(wrote).toBe(false);
  });
});
