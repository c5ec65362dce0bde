import { env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { BudgetLedger } from "../../../durable-objects/budget-ledger.ts";
import { SqliteLedgerStore } from "../../../src/ledger/ledger-sqlite-store.ts";
import { budgetLedgerClient, stripeObjectName, type BudgetLedgerRpc, type ReserveArgs } from "../../../src/ledger/ledger-client.ts";
import type { ScopeLimits, ScopeRef } from "../../../src/ledger/ledger.ts";

const DAY = 86_400_000;
const usd = (limitMicros: number): ScopeLimits => ({ money: { currency: "USD", limitMicros, periodMs: DAY } });
const names = (org: string) => [org, `team:${org}`, `project:${org}`, `key:${org}`];
const path = (org: string, limits: Partial<Record<string, ScopeLimits>> = {}): ScopeRef[] => names(org).map((name) => (limits[name] ? { name, limits: limits[name] } : { name }));
const args = (scopes: ScopeRef[], micros: number, tokens = 0, over: Partial<ReserveArgs> = {}): ReserveArgs => ({ scopes, currency: "USD", amount: { micros, tokens }, ...over });
const objectFor = (name: string): BudgetLedgerRpc => env.BUDGET_LEDGER.getByName(name);

describe("BudgetLedger Durable Object", () => {
  it("admits exactly K = 7 of 40 concurrent worst-case reservations, and spend never exceeds the limit", async () => {
    const org = "org:concurrent";
    const stub = env.BUDGET_LEDGER.getByName(org);
    // 7 worst cases of 1.25 USD fit in 9 USD; an 8th does not.
    const scopes = path(org, { [`team:${org}`]: usd(9_000_000), [org]: usd(100_000_000) });
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => stub.reserve(`att-${i}`, args(scopes, 1_250_000, 2_000))));
    expect(answers.filter((a) => a.ok)).toHaveLength(7);
    expect(answers.filter((a) => !a.ok).every((a) => !a.ok && a.reason === "money_budget_exceeded" && a.scope === `team:${org}`)).toBe(true);
    expect((await stub.balance(`team:${org}`)).money).toMatchObject({ limit: 9_000_000, held: 8_750_000, spent: 0, remaining: 250_000 });
    // No dangling reservation at the other levels: each holds exactly the 7 admitted.
    expect((await stub.balance(org)).money?.held).toBe(8_750_000);
    for (const s of [`project:${org}`, `key:${org}`]) expect((await stub.usage(s)).find((c) => c.metric === "money:USD")?.held).toBe(8_750_000);
  });

  it("admits exactly K through fresh stubs from the client, concurrently", async () => {
    const org = "org:client";
    const client = budgetLedgerClient(objectFor);
    const scopes = path(org, { [`key:${org}`]: { tokens: { limit: 7_000, windowMs: 3_600_000 } } });
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => client.reserve(`c-${i}`, args(scopes, 10, 1_000))));
    const admitted = answers.filter((a) => a.result.ok);
    expect(admitted).toHaveLength(7);
    expect((await client.balance(org, `key:${org}`)).tokens).toMatchObject({ held: 7_000, remaining: 0 });
    // Settle twice concurrently: exactly once counts.
    const settled = await Promise.all(admitted.flatMap(({ result, handle }) => [0, 1].map(() => client.settle(handle, result.attemptId, { micros: 5, tokens: 400 }))));
    expect(settled.every((s) => s.ok && s.state === "settled")).toBe(true);
    expect((await client.balance(org, `key:${org}`)).tokens).toMatchObject({ held: 0, spent: 2_800, remaining: 4_200 });
  });

  it("striped over N = 4 objects, admits exactly the K worst cases the split budget fits, no stripe over its share", async () => {
    const org = "org:striped";
    const client = budgetLedgerClient(objectFor, { stripes: (root) => (root === org ? 4 : 1) });
    // 8 worst cases of 1.25 USD in 10 USD: 2.5 USD, exactly 2 worst cases, per stripe.
    const team = `team:${org}`;
    const scopes = path(org, { [team]: usd(10_000_000), [org]: usd(100_000_000) });
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => client.reserve(`s-${i}`, args(scopes, 1_250_000, 100, { countsRequest: true }))));
    const admitted = answers.filter((a) => a.result.ok);
    expect(admitted).toHaveLength(8);
    for (const a of answers.filter((x) => !x.result.ok)) expect(a.result).toMatchObject({ scope: team, limit: 2_500_000 });
    for (let i = 0; i < 4; i++) {
      const stripe = objectFor(stripeObjectName(org, i));
      expect((await stripe.balance(team)).money).toMatchObject({ limit: 2_500_000, held: 2_500_000, remaining: 0 });
      expect((await stripe.balance(org)).money).toMatchObject({ limit: 25_000_000, held: 2_500_000 });
      expect(admitted.filter((a) => a.handle.object === stripeObjectName(org, i))).toHaveLength(2);
    }
    expect((await client.balance(org, team)).money).toMatchObject({ limit: 10_000_000, held: 10_000_000, spent: 0, remaining: 0 });
    // Settling below the worst case frees room in that stripe only.
    const first = admitted[0]!;
    await client.settle(first.handle, first.result.attemptId, { micros: 250_000, tokens: 10 }, { usage: { input: 5, output: 5 } });
    expect((await objectFor(first.handle.object).balance(team)).money).toMatchObject({ held: 1_250_000, spent: 250_000, remaining: 1_000_000 });
    expect((await client.balance(org, team)).money).toMatchObject({ held: 8_750_000, spent: 250_000, remaining: 1_000_000 });
    // Fragmentation: 1 USD remains in total, in one stripe; a 1.25 USD worst case does not fit.
    expect((await client.reserve("frag", args(scopes, 1_250_000))).result).toMatchObject({ ok: false, scope: team });
  });

  it("keeps unknown usage held, releases attempts never sent, and persists across instances", async () => {
    const org = "org:persist";
    const stub = env.BUDGET_LEDGER.getByName(org);
    const scopes = path(org, { [org]: usd(1_000) });
    expect((await stub.reserve("u", args(scopes, 400))).ok).toBe(true);
    expect((await stub.reserve("r", args(scopes, 400))).ok).toBe(true);
    expect(await stub.settle("u", "unknown", { estimate: { micros: 250, tokens: 0 } })).toMatchObject({ ok: true, state: "pending_reconciliation", settlement: { estimate: { micros: 250 } } });
    expect(await stub.release("r")).toMatchObject({ ok: true, state: "released" });
    await runInDurableObject(stub, async (_instance: BudgetLedger, state) => {
      const reborn = new BudgetLedger(state, env);
      expect((await reborn.balance(org)).money).toMatchObject({ held: 400, pending: 400, spent: 0, remaining: 600 });
      expect(await reborn.release("u")).toMatchObject({ ok: false, reason: "conflict" });
    });
    expect(await stub.reserve("x", args(scopes, 601))).toMatchObject({ ok: false, scope: org, used: 400 });
    expect(await stub.limits(org)).toEqual({ configured: usd(1_000), effective: usd(1_000) });
    // Omitted limits mean none configured (and the stored ones are cleared).
    expect(await stub.reserve("y", args(path(org), 601))).toMatchObject({ ok: true });
    expect(await stub.limits(org)).toEqual({ effective: {} });
  });

  it("validates every RPC argument, naming the bad field: results on the request path, RangeErrors on the admin path", async () => {
    const org = "org:validate";
    const stub = env.BUDGET_LEDGER.getByName(org);
    const invalid = (field: RegExp, attemptId = "bad") => ({ ok: false, attemptId, reason: "invalid_argument", message: expect.stringMatching(field) });
    // Over RPC, as the gateway sees them: answers, not rejections.
    expect(await stub.reserve("bad", args(path(org), 0.5))).toEqual(invalid(/amount\.micros/));
    expect(await stub.settle("u", { micros: -1, tokens: 0 })).toEqual(invalid(/actual\.micros/, "u"));
    expect(await stub.release("")).toEqual(invalid(/attemptId/, ""));
    await runInDurableObject(stub, async (instance: BudgetLedger, state) => {
      const bad = <T>(v: unknown) => v as T;
      expect(await instance.reserve("bad", args([], 1))).toEqual(invalid(/scopes/));
      expect(await instance.reserve("bad", bad(null))).toEqual(invalid(/must be an object/));
      expect(await instance.reserve("bad", args([{ name: org, limits: bad({ money: "lots" }) }], 1))).toEqual(invalid(/scopes\[0\]\.limits\.money/));
      expect(await instance.settle("u", "unknown", bad({ usage: "x" }))).toEqual(invalid(/detail\.usage/, "u"));
      // Nothing was written, not even an alarm.
      expect(state.storage.sql.exec("SELECT COUNT(*) AS n FROM ledger_attempts").one().n).toBe(0);
      expect(await state.storage.getAlarm()).toBeNull();
      await expect(instance.setLimits(org, { money: { currency: "usd", limitMicros: 1, periodMs: DAY } })).rejects.toThrow(/limits\.money\.currency/);
      await expect(instance.setLimits(org, null, bad({ actor: 7 }))).rejects.toThrow(/by\.actor/);
      await expect(instance.topUp(org, { currency: "USD", micros: 0 }, { opId: "o", actor: "a" })).rejects.toThrow(/amount\.micros/);
      await expect(instance.topUp(org, bad(undefined), bad(undefined))).rejects.toThrow(/amount.*by/);
      await expect(instance.resolve("u", { micros: 1, tokens: 0 }, bad({}))).rejects.toThrow(/by\.actor/);
      await expect(instance.pendingReconciliations(0)).rejects.toThrow(/limit/);
      await expect(instance.attemptsIn(bad("gone"), 10)).rejects.toThrow(/state/);
      await expect(instance.audit(10, -1)).rejects.toThrow(/afterSeq/);
      await expect(instance.usageReport(org, 10, 5)).rejects.toThrow(/toMs/);
      await expect(instance.refusals(org, 10, 5)).rejects.toThrow(/toMs/);
      await expect(instance.balance(bad(42))).rejects.toThrow(/scope/);
      await expect(instance.usage(bad(""))).rejects.toThrow(/scope/);
      await expect(instance.attempt(bad(1))).rejects.toThrow(/attemptId/);
    });
  });

  it("serves top-ups, reconciliation, the audit log and usage reports over RPC", async () => {
    const org = "org:admin";
    const stub = env.BUDGET_LEDGER.getByName(org);
    const scopes = path(org, { [`project:${org}`]: { balance: { currency: "USD" } } });
    expect(await stub.reserve("p0", args(scopes, 100))).toMatchObject({ ok: false, reason: "balance_exhausted" });
    expect(await stub.topUp(`project:${org}`, { currency: "USD", micros: 1_000 }, { opId: "op-1", actor: "billing" })).toEqual({ ok: true, opId: "op-1", credited: 1_000 });
    expect(await stub.topUp(`project:${org}`, { currency: "USD", micros: 1_000 }, { opId: "op-1", actor: "billing" })).toEqual({ ok: true, opId: "op-1", credited: 1_000 });
    const meta = { requestId: "req-1", model: "m1", priceVersion: "v1" };
    expect(await stub.reserve("p1", args(scopes, 600, 60, { meta }))).toMatchObject({ ok: true, remaining: [{ scope: `project:${org}`, metric: "balance:USD", remaining: 400 }] });
    expect(await stub.reserve("p2", args(scopes, 300, 30, { meta }))).toMatchObject({ ok: true });
    await stub.settle("p1", "unknown");
    expect((await stub.pendingReconciliations(10)).map((a) => a.attemptId)).toEqual(["p1"]);
    expect(await stub.attempt("p1")).toMatchObject({ state: "pending_reconciliation", meta });
    expect((await stub.attemptsIn("held", 10)).map((a) => a.attemptId)).toEqual(["p2"]);
    const resolved = await stub.resolve("p1", { micros: 700, tokens: 70 }, { actor: "ops", note: "from invoice" });
    expect(resolved).toMatchObject({ ok: true, state: "settled", settlement: { actual: { micros: 700, tokens: 70 }, overrun: { micros: 100, tokens: 10 }, resolvedBy: { actor: "ops", note: "from invoice" } } });
    expect(await stub.resolve("p1", { micros: 1, tokens: 1 }, { actor: "ops" })).toEqual(resolved);
    expect(await stub.resolve("p2", { micros: 1, tokens: 1 }, { actor: "ops" })).toMatchObject({ ok: false, reason: "not_pending", state: "held" });
    expect((await stub.balance(`project:${org}`)).balance).toMatchObject({ limit: 1_000, spent: 700, held: 300, overrun: 100, remaining: 0 });
    expect((await stub.audit(10)).map((r) => [r.seq, r.action, r.actor, r.scope ?? r.attemptId])).toEqual([
      [1, "top_up", "billing", `project:${org}`],
      [2, "resolve", "ops", "p1"],
    ]);
    await stub.setLimits(`project:${org}`, usd(5), { actor: "ops" });
    expect((await stub.audit(10, 2)).map((r) => r.action)).toEqual(["set_limits"]);
    const now = Date.now();
    expect(await stub.usageReport(`team:${org}`, now - DAY, now + 1)).toEqual({
      ok: true,
      rows: [{ model: "m1", priceVersion: "v1", currency: "USD", attempts: 2, settledMicros: 700, settledTokens: 70, pendingMicros: 300, pendingTokens: 30 }],
    });
    expect(await stub.usageReport(`team:${org}`, now + 1, now + 2)).toEqual({ ok: true, rows: [] });
    // The refusal before the top-up is counted where it was refused, not kept as an attempt.
    expect(await stub.attempt("p0")).toBeUndefined();
    expect((await stub.balance(`project:${org}`)).refusals).toMatchObject({ total: 1, byReason: { balance_exhausted: 1 } });
    expect(await stub.refusals(`project:${org}`, now - DAY, now + 1)).toEqual([expect.objectContaining({ total: 1, byReason: { balance_exhausted: 1 } })]);
    // The report is an index range scan of the scope index.
    await runInDurableObject(stub, async (_i: BudgetLedger, state) => {
      const plan = state.storage.sql
        .exec<{ detail: string }>("EXPLAIN QUERY PLAN SELECT a.body FROM ledger_attempt_scopes s JOIN ledger_attempts a ON a.attempt_id = s.attempt_id WHERE s.scope = ? AND s.created_at >= ? AND s.created_at < ? ORDER BY s.created_at, s.attempt_id LIMIT 10", "x", 0, 1)
        .toArray()
        .map((r) => r.detail)
        .join(" | ");
      expect(plan).toMatch(/SEARCH s USING PRIMARY KEY \(scope=\? AND created_at>\? AND created_at<\?\)/);
      expect(plan).not.toMatch(/TEMP B-TREE/);
    });
  });

  it("moves the books of the older schema over: admin limits become overrides, old attempts are reported", async () => {
    const org = "org:migrate";
    const stub = env.BUDGET_LEDGER.getByName(org);
    const now = Date.now();
    await runInDurableObject(stub, async (_i: BudgetLedger, state) => {
      const sql = state.storage.sql;
      sql.exec("CREATE TABLE ledger_limits (scope TEXT PRIMARY KEY, body TEXT NOT NULL)");
      sql.exec("INSERT INTO ledger_limits VALUES (?, ?)", org, JSON.stringify(usd(1_000)));
      sql.exec("CREATE TABLE ledger_attempts (attempt_id TEXT PRIMARY KEY, state TEXT NOT NULL, lease_expires_at INTEGER NOT NULL, body TEXT NOT NULL)");
      const old = { attemptId: "old", state: "held", scopes: [org], currency: "USD", amount: { micros: 300, tokens: 0 }, charges: [{ scope: org, metric: "money:USD", windowStart: now - (now % DAY), reserved: 300 }], createdAt: now, leaseExpiresAt: now + DAY, result: { ok: true, attemptId: "old", leaseExpiresAt: now + DAY } };
      sql.exec("INSERT INTO ledger_attempts VALUES (?, ?, ?, ?)", "old", "held", now + DAY, JSON.stringify(old));
    });
    expect(await stub.limits(org)).toEqual({ override: usd(1_000), effective: usd(1_000) });
    expect(await stub.usageReport(org, now, now + 1)).toEqual({ ok: true, rows: [expect.objectContaining({ model: "", attempts: 1, pendingMicros: 300 })] });
    expect(await stub.reserve("new", args([{ name: org }], 1_001))).toMatchObject({ ok: false, limit: 1_000 });
    await runInDurableObject(stub, async (_i: BudgetLedger, state) => {
      expect(state.storage.sql.exec("SELECT name FROM sqlite_master WHERE name = 'ledger_limits'").toArray()).toEqual([]);
    });
  });

  it("arms an alarm at the earliest lease; the alarm moves expired leases to reconciliation, never refunding them", async () => {
    const org = "org:lease";
    const stub = env.BUDGET_LEDGER.getByName(org);
    const scopes = [{ name: org, limits: usd(1_000) }];
    const short = await stub.reserve("short", args(scopes, 300, 0, { leaseMs: 60_000 }));
    const long = await stub.reserve("long", args(scopes, 200, 0, { leaseMs: 3_600_000 }));
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
    expect((await stub.pendingReconciliations(10)).map((a) => [a.attemptId, a.pendingReason])).toEqual([["short", "lease_expired"]]);
    // A late settlement is still the attempt's one settlement.
    expect(await stub.settle("short", { micros: 100, tokens: 0 })).toMatchObject({ ok: true, state: "settled" });
    expect((await stub.balance(org)).money).toMatchObject({ held: 200, pending: 0, spent: 100 });
  });

  it("moves the alarm earlier for a shorter lease, and leaves it for later ones", async () => {
    const org = "org:alarm";
    const stub = env.BUDGET_LEDGER.getByName(org);
    const scopes = [{ name: org, limits: usd(1_000) }];
    const alarm = () => runInDurableObject(stub, (_i: BudgetLedger, state) => state.storage.getAlarm());
    const first = await stub.reserve("a1", args(scopes, 1, 0, { leaseMs: 600_000 }));
    expect(await alarm()).toBe(first.ok ? first.leaseExpiresAt : -1);
    await stub.reserve("a2", args(scopes, 1, 0, { leaseMs: 900_000 }));
    expect(await alarm()).toBe(first.ok ? first.leaseExpiresAt : -1);
    const shorter = await stub.reserve("a3", args(scopes, 1, 0, { leaseMs: 60_000 }));
    expect(await alarm()).toBe(shorter.ok ? shorter.leaseExpiresAt : -1);
  });
});

describe("BudgetLedger Durable Object: leases and settlement batches on SQLite", () => {
  it("grants a lease, books a batch of its attempts once, reports them in usage, and returns the rest on close", async () => {
    const org = "org:leases";
    const stub = env.BUDGET_LEDGER.getByName(org);
    const scopes = path(org, { [org]: usd(100_000_000) });
    const got = await stub.acquire("first", args(scopes, 1_000, 10), { leaseId: "lease-1", slices: 16, admitMs: 30_000 });
    expect(got).toMatchObject({ lease: { ok: true, leaseId: "lease-1", amount: { micros: 16_000, tokens: 160 } } });
    const now = Date.now();
    const items = Array.from({ length: 5 }, (_, i) => ({
      op: "settle" as const,
      attemptId: `la-${i}`,
      actual: { micros: 100, tokens: 5 },
      lease: { leaseId: "lease-1", amount: { micros: 1_000, tokens: 10 }, admittedAt: now, meta: { model: "m@1", priceVersion: "p1" } },
    }));
    const first = await stub.settleBatch([...items, { op: "close", leaseId: "lease-1", unusedRequests: 0 }]);
    expect(first.map((r) => (r.ok && "state" in r ? r.state : r))).toEqual(["settled", "settled", "settled", "settled", "settled", "released"]);
    // The answer was lost and the batch is sent again: nothing is booked twice.
    const again = await stub.settleBatch([...items, { op: "close", leaseId: "lease-1", unusedRequests: 0 }]);
    expect(again.slice(0, 5)).toEqual(first.slice(0, 5));
    expect((await stub.balance(org)).money).toMatchObject({ spent: 500, held: 0 });
    const report = await stub.usageReport(`key:${org}`, now - DAY, now + DAY);
    expect(report).toEqual({ ok: true, rows: [{ model: "m@1", priceVersion: "p1", currency: "USD", attempts: 5, settledMicros: 500, settledTokens: 25, pendingMicros: 0, pendingTokens: 0 }] });
    expect(await stub.attempt("lease-1")).toMatchObject({ state: "released", lease: { closedAt: expect.any(Number) } });
  });

  it("writes a large batch (more rows than one statement may bind) and indexes every attempt under every scope", async () => {
    const org = "org:big-batch";
    const stub = env.BUDGET_LEDGER.getByName(org);
    const scopes = path(org, { [org]: usd(100_000_000) });
    const got = await stub.acquire("first", args(scopes, 1_000, 10), { leaseId: "lease-b", slices: 256, admitMs: 30_000 });
    expect(got).toMatchObject({ lease: { ok: true } });
    const now = Date.now();
    const items = Array.from({ length: 75 }, (_, i) => ({
      op: "settle" as const,
      attemptId: `big-${i}`,
      actual: { micros: 10, tokens: 1 },
      lease: { leaseId: "lease-b", amount: { micros: 1_000, tokens: 10 }, admittedAt: now, meta: { model: "m@1", priceVersion: "p1" } },
    }));
    // The same attempt twice in one batch: booked once.
    const results = await stub.settleBatch([...items, items[3]!, { op: "close", leaseId: "lease-b", unusedRequests: 0 }]);
    expect(results.filter((r) => r.ok && "state" in r && r.state === "settled")).toHaveLength(76);
    expect((await stub.balance(org)).money).toMatchObject({ spent: 750, held: 0 });
    for (const scope of scopes.map((s) => s.name)) {
      const report = await stub.usageReport(scope, now - DAY, now + DAY);
      expect(report).toEqual({ ok: true, rows: [expect.objectContaining({ model: "m@1", attempts: 75, settledMicros: 750 })] });
      // The batch's 75 settlements (and the repeat, booked once) are one rollup row per scope, with the books' spend.
      expect(await stub.dailyUsage(scope, now, now + 1)).toEqual([{ scope, dayStart: now - (now % DAY), model: "m@1", priceVersion: "p1", currency: "USD", attempts: 75, settledMicros: 750, settledTokens: 75 }]);
    }
    // Every scope's spend of the range, summed in SQL: the same figures, one row per scope.
    expect(await stub.spendByScope(now - DAY, now + 1)).toEqual(
      scopes.map((s) => ({ scope: s.name, model: "m@1", currency: "USD", attempts: 75, settledMicros: 750, settledTokens: 75 })).sort((a, b) => (a.scope < b.scope ? -1 : 1)),
    );
    expect(await stub.spendByScope(now + DAY, now + 2 * DAY)).toEqual([]);
    expect(await stub.attempt("big-74")).toMatchObject({ state: "settled", fromLease: "lease-b" });
  });

  it("near a limit reserves the attempt itself in the same call", async () => {
    const org = "org:near";
    const stub = env.BUDGET_LEDGER.getByName(org);
    const got = await stub.acquire("only", args(path(org, { [org]: usd(3_000) }), 1_000), { leaseId: "lease-n", slices: 16, admitMs: 30_000 });
    expect(got).toMatchObject({ reserved: { ok: true, attemptId: "only" } });
    expect(await stub.attempt("lease-n")).toBeUndefined();
  });
});
