import { env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { AttemptBudget } from "../../../durable-objects/attempt-budget.ts";
import { SqliteAttemptBudgetStore } from "../../../durable-objects/sqlite-attempt-budget-store.ts";
import { attemptBudgetClient } from "../../../src/call-budget/attempt-budget-client.ts";

const inAMinute = () => Date.now() + 60_000;

describe("AttemptBudget Durable Object", () => {
  it("grants exactly the budget to 50 concurrent consumes for one call id", async () => {
    const stub = env.ATTEMPT_BUDGET.getByName("call-concurrent");
    const deadlineAt = inAMinute();
    const answers = await Promise.all(Array.from({ length: 50 }, () => stub.consume("call-concurrent", { initialBudget: 7, deadlineAt })));
    const granted = answers.filter((a) => a.ok);
    expect(granted).toHaveLength(7);
    expect(granted.map((a) => (a.ok ? a.remaining : -1)).sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(answers.filter((a) => !a.ok).every((a) => !a.ok && a.reason === "exhausted")).toBe(true);
    expect(await stub.peek("call-concurrent")).toMatchObject({ initialBudget: 7, remaining: 0, expired: false });
  });

  it("grants exactly the budget to 50 concurrent consumes through separate stubs and the client", async () => {
    const client = attemptBudgetClient((id) => env.ATTEMPT_BUDGET.getByName(id));
    const deadlineAt = inAMinute();
    const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => client.consume("call-client", { initialBudget: i === 0 ? 7 : 50, deadlineAt })));
    expect(answers.filter((a) => a.ok)).toHaveLength(7);
    expect(await client.peek("call-client")).toMatchObject({ remaining: 0 });
    expect(await client.peek("call-unknown")).toBeUndefined();
  });

  it("refuses a call whose deadline has passed and never extends it", async () => {
    const stub = env.ATTEMPT_BUDGET.getByName("call-deadline");
    expect(await stub.consume("call-deadline", { initialBudget: 3, deadlineAt: Date.now() - 1 })).toEqual({ ok: false, reason: "expired" });
    expect(await stub.peek("call-deadline")).toBeUndefined();
    const deadlineAt = inAMinute();
    expect(await stub.consume("call-deadline", { initialBudget: 3, deadlineAt })).toEqual({ ok: true, remaining: 2 });
    expect(await stub.consume("call-deadline", { initialBudget: 3, deadlineAt: deadlineAt + 3_600_000 })).toEqual({ ok: true, remaining: 1 });
    expect((await stub.peek("call-deadline"))?.deadlineAt).toBe(deadlineAt);
  });

  it("persists in SQLite: a fresh instance (as after eviction) continues the count", async () => {
    const stub = env.ATTEMPT_BUDGET.getByName("call-persist");
    const deadlineAt = inAMinute();
    await runInDurableObject(stub, async (instance: AttemptBudget) => {
      expect(await instance.consume("call-persist", { initialBudget: 3, deadlineAt })).toEqual({ ok: true, remaining: 2 });
    });
    await runInDurableObject(stub, async (_instance: AttemptBudget, state) => {
      const rows = state.storage.sql.exec("SELECT * FROM attempt_budget").toArray();
      expect(rows).toHaveLength(1);
      const reborn = new AttemptBudget(state, env);
      expect(await reborn.consume("call-persist", { initialBudget: 10, deadlineAt })).toEqual({ ok: true, remaining: 1 });
    });
    expect(await stub.consume("call-persist", { initialBudget: 10, deadlineAt })).toEqual({ ok: true, remaining: 0 });
    expect(await stub.consume("call-persist", { initialBudget: 10, deadlineAt })).toEqual({ ok: false, reason: "exhausted" });
  });

  it("arms an alarm at the earliest expiry; the alarm deletes expired entries and re-arms for the rest", async () => {
    const stub = env.ATTEMPT_BUDGET.getByName("call-gc");
    const deadlineAt = inAMinute();
    await stub.consume("call-gc", { initialBudget: 2, deadlineAt });
    await runInDurableObject(stub, async (instance: AttemptBudget, state) => {
      const alarm = await state.storage.getAlarm();
      expect(alarm).toBe((await instance.peek("call-gc"))!.expiresAt);
      // Plant an entry already past its grace period.
      const store = new SqliteAttemptBudgetStore(state.storage);
      const past = Date.now() - 1_000;
      store.put({ callId: "call-gc-old", initialBudget: 1, remaining: 1, deadlineAt: past - 60_000, expiresAt: past, createdAt: past - 120_000 });
      await state.storage.setAlarm(Date.now() + 3_600_000);
    });
    // Runs the alarm now, whenever it is set for.
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    await runInDurableObject(stub, async (instance: AttemptBudget, state) => {
      const ids = state.storage.sql.exec<{ call_id: string }>("SELECT call_id FROM attempt_budget").toArray().map((r) => r.call_id);
      expect(ids).toEqual(["call-gc"]);
      expect(await state.storage.getAlarm()).toBe((await instance.peek("call-gc"))!.expiresAt);
    });
    expect(await stub.peek("call-gc")).toMatchObject({ remaining: 1 });
  });

  it("drops all storage when the alarm leaves nothing, and still works afterwards", async () => {
    const stub = env.ATTEMPT_BUDGET.getByName("call-drop");
    await runInDurableObject(stub, async (_i: AttemptBudget, state) => {
      const past = Date.now() - 1_000;
      new SqliteAttemptBudgetStore(state.storage).put({ callId: "call-drop", initialBudget: 4, remaining: 0, deadlineAt: past - 60_000, expiresAt: past, createdAt: past - 120_000 });
      await state.storage.setAlarm(Date.now() + 3_600_000);
    });
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    await runInDurableObject(stub, async (_i: AttemptBudget, state) => {
      const tables = state.storage.sql.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'attempt_budget'").toArray();
      expect(tables).toEqual([]);
      expect(await state.storage.getAlarm()).toBeNull();
    });
    expect(await stub.peek("call-drop")).toBeUndefined();
    expect(await stub.consume("call-drop", { initialBudget: 1, deadlineAt: inAMinute() })).toEqual({ ok: true, remaining: 0 });
  });

  it("rejects invalid arguments with a RangeError", async () => {
    const stub = env.ATTEMPT_BUDGET.getByName("call-bad");
    // Called in the object, not over RPC: the test pool's RPC wrapper logs every remote throw as uncaught.
    await runInDurableObject(stub, async (instance: AttemptBudget) => {
      await expect(instance.consume("call-bad", { initialBudget: -1, deadlineAt: inAMinute() })).rejects.toThrow(/initialBudget/);
      await expect(instance.consume("call-bad", { initialBudget: 1, deadlineAt: Number.NaN })).rejects.toThrow(/deadlineAt/);
      await expect(instance.consume("", { initialBudget: 1, deadlineAt: inAMinute() })).rejects.toThrow(/callId/);
      await expect(instance.peek(42 as never)).rejects.toThrow(RangeError);
    });
    expect(await stub.peek("call-bad")).toBeUndefined();
  });
});
