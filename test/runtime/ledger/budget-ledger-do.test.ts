import { env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { BudgetLedger } from "../../../durable-objects/budget-ledger.ts";
import { SqliteLedgerStore } from "../../../durable-objects/sqlite-ledger-store.ts";
import { budgetLedgerClient } from "../../../src/ledger/ledger-client.ts";

const DAY = 86_400_000;
const path = (org: string) => [org, `team:${org}`, `project:${org}`, `key:${org}`];

describe("BudgetLedger Durable Object", () => {
  it("admits exactly K = 7 of 40 concurrent worst-case reservations, and spend never exceeds the limit", async () => {
    const org = "org:concurrent";
    const stub = env.BUDGET_LEDGER.getByName(org);
    // 7 worst cases of 1.25 USD fit in 9 USD; an 8th does not.
    await stub.setLimits(`team:${org}`, { money: { currency: "USD", limitMicros: 9_000_000, periodMs: DAY } });
    await stub.setLimits(org, { money: { currency: "USD", limitMicros: 100_000_000, periodMs: DAY } });
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => stub.reserve(`att-${i}`, { scopes: path(org), currency: "USD", amount: { micros: 1_250_000, tokens: 2_000 } })));
    expect(answers.filter((a) => a.ok)).toHaveLength(7);
    expect(answers.filter((a) => !a.ok).every((a) => !a.ok && a.reason === "money_budget_exceeded" && a.scope === `team:${org}`)).toBe(true);
    expect((await stub.balance(`team:${org}`)).money).toMatchObject({ limit: 9_000_000, held: 8_750_000, spent: 0, remaining: 250_000 });
    // No dangling reservation at the other levels: each holds exactly the 7 admitted.
    expect((await stub.balance(org)).money?.held).toBe(8_750_000);
    for (const s of [`project:${org}`, `key:${org}`]) expect((await stub.usage(s)).find((c) => c.metric === "money:USD")?.held).toBe(8_750_000);
  });

  it("admits exactly K through fresh stubs from the client, concurrently", async () => {
    const org = "org:client";
    const client = budgetLedgerClient((root) => env.BUDGET_LEDGER.getByName(root));
    await env.BUDGET_LEDGER.getByName(org).setLimits(`key:${org}`, { tokens: { limit: 7_000, windowMs: 3_600_000 } });
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => client.reserve(`c-${i}`, { scopes: path(org), currency: "USD", amount: { micros: 10, tokens: 1_000 } })));
    expect(answers.filter((a) => a.ok)).toHaveLength(7);
    expect((await client.balance(org, `key:${org}`)).tokens).toMatchObject({ held: 7_000, remaining: 0 });
    const admitted = answers.filter((a) => a.ok).map((a) => a.attemptId);
    // Settle twice concurrently: exactly once counts.
    const settled = await Promise.all(admitted.flatMap((id) => [client.settle(org, id, { micros: 5, tokens: 400 }), client.settle(org, id, { micros: 5, tokens: 400 })]));
    expect(settled.every((s) => s.ok && s.state === "settled")).toBe(true);
    expect((await client.balance(org, `key:${org}`)).tokens).toMatchObject({ held: 0, spent: 2_800, remaining: 4_200 });
  });

  it("keeps unknown usage held, releases attempts never sent, and persists across instances", async () => {
    const org = "org:persist";
    const stub = env.BUDGET_LEDGER.getByName(org);
    await stub.setLimits(org, { money: { currency: "USD", limitMicros: 1_000, periodMs: DAY } });
    expect((await stub.reserve("u", { scopes: path(org), currency: "USD", amount: { micros: 400, tokens: 0 } })).ok).toBe(true);
    expect((await stub.reserve("r", { scopes: path(org), currency: "USD", amount: { micros: 400, tokens: 0 } })).ok).toBe(true);
    expect(await stub.settle("u", "unknown")).toMatchObject({ ok: true, state: "pending_reconciliation" });
    expect(await stub.release("r")).toMatchObject({ ok: true, state: "released" });
    await runInDurableObject(stub, async (_instance: BudgetLedger, state) => {
      const reborn = new BudgetLedger(state, env);
      expect((await reborn.balance(org)).money).toMatchObject({ held: 400, pending: 400, spent: 0, remaining: 600 });
      expect(await reborn.release("u")).toMatchObject({ ok: false, reason: "conflict" });
    });
    expect(await stub.reserve("x", { scopes: path(org), currency: "USD", amount: { micros: 601, tokens: 0 } })).toMatchObject({ ok: false, scope: org, used: 400 });
    await runInDurableObject(stub, async (instance: BudgetLedger) => {
      await expect(instance.reserve("bad", { scopes: path(org), currency: "USD", amount: { micros: 0.5, tokens: 0 } })).rejects.toThrow(/micros/);
      await expect(instance.reserve("bad", { scopes: [], currency: "USD", amount: { micros: 1, tokens: 0 } })).rejects.toThrow(RangeError);
      await expect(instance.settle("u", { micros: -1, tokens: 0 })).rejects.toThrow(RangeError);
      await expect(instance.setLimits(org, { money: { currency: "usd", limitMicros: 1, periodMs: DAY } })).rejects.toThrow(/currency/);
    });
  });

  it("arms an alarm at the earliest lease; the alarm moves expired leases to reconciliation, never refunding them", async () => {
    const org = "org:lease";
    const stub = env.BUDGET_LEDGER.getByName(org);
    await stub.setLimits(org, { money: { currency: "USD", limitMicros: 1_000, periodMs: DAY } });
    const short = await stub.reserve("short", { scopes: [org], currency: "USD", amount: { micros: 300, tokens: 0 }, leaseMs: 60_000 });
    const long = await stub.reserve("long", { scopes: [org], currency: "USD", amount: { micros: 200, tokens: 0 }, leaseMs: 3_600_000 });
    expect(short.ok && long.ok).toBe(true);
    await runInDurableObject(stub, async (_i: BudgetLedger, state) => {
      expect(await state.storage.getAlarm()).toBe(short.ok ? short.leaseExpiresAt : -1);
      // Let the short lease run out: backdate it (the object's clock is the real one).
      const store = new SqliteLedgerStore(state.storage);
      store.transaction(() => store.putAttempt({ ...store.getAttempt("short")!, leaseExpiresAt: Date.now() - 1_000 }));
    });
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    await runInDurableObject(stub, async (_i: BudgetLedger, state) => {
      const rows = state.storage.sql.exec<{ attempt_id: string; state: string }>("SELECT attempt_id, state FROM ledger_attempts ORDER BY attempt_id").toArray();
      expect(rows.map((r) => [r.attempt_id, r.state])).toEqual([
        ["long", "held"],
        ["short", "pending_reconciliation"],
      ]);
      expect(await state.storage.getAlarm()).toBe(long.ok ? long.leaseExpiresAt : -1);
    });
    expect((await stub.balance(org)).money).toMatchObject({ held: 500, pending: 300, spent: 0 });
    // A late settlement is still the attempt's one settlement.
    expect(await stub.settle("short", { micros: 100, tokens: 0 })).toMatchObject({ ok: true, state: "settled" });
    expect((await stub.balance(org)).money).toMatchObject({ held: 200, pending: 0, spent: 100 });
  });
});
