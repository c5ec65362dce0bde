import { describe, expect, it } from "vitest";
import { budgetLedgerClient, stripeLimits, stripeObjectName, stripeShareOf, type ReserveArgs } from "../../../src/ledger/ledger-client.ts";
import type { ScopeLimits, ScopeRef } from "../../../src/ledger/ledger.ts";
import { memoryLedgers } from "./ledger-fakes.ts";

const T0 = 1_800_000_000_000;
const DAY = 86_400_000;
const ROOT = "tenant:hot";
const usd = (limitMicros: number): ScopeLimits => ({ money: { currency: "USD", limitMicros, periodMs: DAY } });

function setup(stripes = 4) {
  const clock = { now: T0 };
  const fakes = memoryLedgers(clock);
  const client = budgetLedgerClient(fakes.objectFor, { stripes: (root) => (root === ROOT ? stripes : 1) });
  return { ...fakes, client, clock };
}

const args = (scopes: readonly ScopeRef[], micros: number, over: Partial<ReserveArgs> = {}): ReserveArgs => ({ scopes, currency: "USD", amount: { micros, tokens: 0 }, ...over });
const path = (team: ScopeLimits): ScopeRef[] => [{ name: ROOT }, { name: "team:t", limits: team }];
/** The stripe an attempt starts at: where its first reserve call went. */
const startOf = (calls: string[], from: number) => calls.slice(from).find((c) => c.endsWith(".reserve"))!.split(".reserve")[0]!;

describe("striping arithmetic", () => {
  it("splits every limit into exact integer shares that sum to it", () => {
    for (const n of [1, 2, 3, 4, 7, 64]) {
      for (const total of [0, 1, 2, 3, 10, 99, 1_000_003, 2 ** 50]) {
        const shares = Array.from({ length: n }, (_, i) => stripeShareOf(total, i, n));
        expect(shares.reduce((a, b) => a + b, 0)).toBe(total);
        expect(Math.max(...shares) - Math.min(...shares)).toBeLessThanOrEqual(1);
      }
    }
    const full: ScopeLimits = { ...usd(10), tokens: { limit: 7, windowMs: 60_000 }, requests: { perMinute: 5, burst: 2 }, balance: { currency: "USD" } };
    expect([0, 1, 2, 3].map((i) => stripeLimits(full, i, 4))).toEqual([
      { money: { currency: "USD", limitMicros: 3, periodMs: DAY }, tokens: { limit: 2, windowMs: 60_000 }, requests: { perMinute: 2, burst: 1 }, balance: { currency: "USD" } },
      { money: { currency: "USD", limitMicros: 3, periodMs: DAY }, tokens: { limit: 2, windowMs: 60_000 }, requests: { perMinute: 1, burst: 1 }, balance: { currency: "USD" } },
      { money: { currency: "USD", limitMicros: 2, periodMs: DAY }, tokens: { limit: 2, windowMs: 60_000 }, requests: { perMinute: 1, burst: 0 }, balance: { currency: "USD" } },
      { money: { currency: "USD", limitMicros: 2, periodMs: DAY }, tokens: { limit: 1, windowMs: 60_000 }, requests: { perMinute: 1, burst: 0 }, balance: { currency: "USD" } },
    ]);
    expect([0, 1, 2].map((i) => stripeObjectName("r", i))).toEqual(["r", "r#1", "r#2"]);
  });
});

describe("budgetLedgerClient", () => {
  it("routes an unstriped root to one object named after it, passing the limits unchanged", async () => {
    const { client, core, calls } = setup();
    const scopes = [{ name: "tenant:calm", limits: usd(1_000) }, { name: "key:k" }];
    const { result, handle } = await client.reserve("a", args(scopes, 400, { countsRequest: true, meta: { model: "m" } }));
    expect(result).toMatchObject({ ok: true, attemptId: "a" });
    expect(handle).toEqual({ object: "tenant:calm" });
    expect(core("tenant:calm").limits("tenant:calm").configured).toEqual(usd(1_000));
    expect(core("tenant:calm").attempt("a")).toMatchObject({ meta: { model: "m" } });
    expect(await client.settle(handle, "a", { micros: 100, tokens: 0 }, { usage: { output: 3 } })).toMatchObject({ ok: true, state: "settled", settlement: { usage: { output: 3 } } });
    expect(await client.balance("tenant:calm", "tenant:calm")).toMatchObject({ money: { limit: 1_000, spent: 100, held: 0 } });
    expect(calls).toEqual(["tenant:calm.reserve", "tenant:calm.settle", "tenant:calm.balance"]);
  });

  it("gives each stripe its share, starts at a stable stripe per attempt id, and spreads attempts over all stripes", async () => {
    const { client, core, calls } = setup();
    const starts = new Map<string, number>();
    for (let i = 0; i < 400; i++) {
      const from = calls.length;
      const { result, handle } = await client.reserve(`spread-${i}`, args(path(usd(1_000_000)), 1));
      expect(result.ok).toBe(true);
      expect(handle.object).toBe(startOf(calls, from));
      starts.set(handle.object, (starts.get(handle.object) ?? 0) + 1);
    }
    expect([...starts.keys()].sort()).toEqual([ROOT, `${ROOT}#1`, `${ROOT}#2`, `${ROOT}#3`]);
    for (const n of starts.values()) expect(n).toBeGreaterThan(50);
    for (let i = 0; i < 4; i++) expect(core(stripeObjectName(ROOT, i)).limits("team:t").configured).toEqual(usd(250_000));
    // The same id starts at the same stripe again (and gets its first answer back).
    const from = calls.length;
    const again = await client.reserve("spread-7", args(path(usd(1_000_000)), 999));
    expect(startOf(calls, from)).toBe(again.handle.object);
    expect(calls.length - from).toBe(1);
  });

  it("on a refusal tries the next stripes in order and answers the first grant, whose object holds the attempt", async () => {
    // Where "walker" starts is a stable function of its id: learn it from a dry run.
    const dry = setup();
    const start = Number(((await dry.client.reserve("walker", args(path(usd(8)), 1))).handle.object.split("#")[1]) ?? 0);
    const { client, core, calls } = setup();
    const team = usd(8); // 2 per stripe
    for (let i = 0; i < 4; i++) {
      const l = core(stripeObjectName(ROOT, i));
      for (let k = 0; k < 2; k++) expect(l.reserve(`fill-${i}-${k}`, { scopes: path(stripeLimits(team, i, 4)), currency: "USD", amount: { micros: 1, tokens: 0 }, now: T0 }).ok).toBe(true);
    }
    // Only the stripe two after the start has room.
    const room = stripeObjectName(ROOT, (start + 2) % 4);
    core(room).release("fill-" + ((start + 2) % 4) + "-0", T0);
    const r = await client.reserve("walker", args(path(team), 1));
    expect(r).toMatchObject({ result: { ok: true }, handle: { object: room } });
    const tried = calls.map((c) => c.split(".reserve")[0]!);
    expect(tried).toEqual([0, 1, 2].map((k) => stripeObjectName(ROOT, (start + k) % 4)));
    expect(core(room).attempt("walker")).toMatchObject({ state: "held" });
    // The stripes that refused keep no attempt, only a count in the refusing scope's tally.
    for (const name of tried.slice(0, 2)) {
      expect(core(name).attempt("walker")).toBeUndefined();
      expect(core(name).balance("team:t", T0).refusals).toMatchObject({ total: 1, byReason: { money_budget_exceeded: 1 } });
    }
    // A repeat walks the same way (the full stripes refuse it afresh) and gets the grant back.
    expect(await client.reserve("walker", args(path(team), 1))).toEqual(r);
    expect(core(tried[0]!).balance("team:t", T0).refusals?.total).toBe(2);
    // Settle and release go to the object that holds the attempt.
    expect(await client.settle(r.handle, "walker", { micros: 1, tokens: 0 })).toMatchObject({ ok: true, state: "settled" });
    expect(await client.release({ object: tried[0]! }, "walker")).toMatchObject({ ok: false, reason: "unknown_attempt" });
  });

  it("answers the last refusal when every stripe refuses; a currency mismatch stops at the first", async () => {
    const { client, calls } = setup();
    const from = calls.length;
    const r = await client.reserve("big", args(path(usd(8)), 3));
    expect(r.result).toMatchObject({ ok: false, reason: "money_budget_exceeded", scope: "team:t", limit: 2 });
    const tried = calls.slice(from);
    expect(tried).toHaveLength(4);
    expect(r.handle.object).toBe(tried[3]!.split(".reserve")[0]);
    const m = calls.length;
    expect((await client.reserve("eur", args(path({ money: { currency: "EUR", limitMicros: 8, periodMs: DAY } }), 1))).result).toMatchObject({ ok: false, reason: "currency_mismatch" });
    expect(calls.length - m).toBe(1);
  });

  it("pays for striping in fragmentation: a worst case larger than every stripe's share is refused though the total fits", async () => {
    const { client } = setup();
    // 10 micro-units split 3/3/2/2: a worst case of 4 fits the total, no stripe.
    expect((await client.reserve("w4", args(path(usd(10)), 4))).result).toMatchObject({ ok: false, reason: "money_budget_exceeded" });
    for (let i = 0; i < 10; i++) expect((await client.reserve(`one-${i}`, args(path(usd(10)), 1))).result.ok).toBe(true);
    expect((await client.reserve("eleventh", args(path(usd(10)), 1))).result.ok).toBe(false);
  });

  it("splits request buckets too: a stripe with a zero burst share hands the attempt on", async () => {
    const { client, core } = setup();
    const team: ScopeLimits = { requests: { perMinute: 2, burst: 2 } }; // stripes 0 and 1 get one token each
    const admitted: string[] = [];
    for (let i = 0; i < 6; i++) {
      const r = await client.reserve(`q${i}`, args(path(team), 1, { countsRequest: true }));
      if (r.result.ok) admitted.push(r.handle.object);
      else expect(r.result).toMatchObject({ reason: "request_rate_exceeded", scope: "team:t" });
    }
    expect(admitted.sort()).toEqual([ROOT, `${ROOT}#1`]);
    expect(core(`${ROOT}#3`).limits("team:t").configured).toEqual({ requests: { perMinute: 0, burst: 0 } });
    expect((await client.balance(ROOT, "team:t")).requests).toEqual({ metric: "requests", perMinute: 2, burst: 2, available: 0, retryAfterMs: 60_000 });
  });

  it("sums a balance over the stripes", async () => {
    const { client, clock } = setup();
    const handles = [];
    for (let i = 0; i < 12; i++) {
      const r = await client.reserve(`b${i}`, args(path(usd(1_000)), 50));
      handles.push(r);
    }
    await client.settle(handles[0]!.handle, "b0", { micros: 80, tokens: 0 });
    await client.settle(handles[1]!.handle, "b1", "unknown");
    clock.now += 1;
    expect(await client.balance(ROOT, "team:t")).toMatchObject({
      scope: "team:t",
      limits: usd(1_000),
      money: { metric: "money:USD", limit: 1_000, spent: 80, held: 550, pending: 50, overrun: 30, remaining: 370 },
    });
  });

  it("splits top-ups over the stripes with derived op ids, idempotently", async () => {
    const { client, core, calls } = setup();
    const by = { opId: "inv-1", actor: "billing" };
    expect(await client.topUp(ROOT, "team:t", { currency: "USD", micros: 10 }, by)).toEqual({ ok: true, opId: "inv-1", credited: 10 });
    expect(await client.topUp(ROOT, "team:t", { currency: "USD", micros: 10 }, by)).toEqual({ ok: true, opId: "inv-1", credited: 10 });
    expect([0, 1, 2, 3].map((i) => core(stripeObjectName(ROOT, i)).audit(10).map((r) => (r.action === "top_up" ? [r.detail.opId, r.detail.micros] : [])))).toEqual([[["inv-1#0", 3]], [["inv-1#1", 3]], [["inv-1#2", 2]], [["inv-1#3", 2]]]);
    // A top-up smaller than the stripe count skips the stripes whose share is 0.
    const from = calls.length;
    expect(await client.topUp(ROOT, "team:t", { currency: "USD", micros: 2 }, { opId: "tiny", actor: "billing" })).toEqual({ ok: true, opId: "tiny", credited: 8 });
    expect(calls.slice(from)).toEqual([`${ROOT}.topUp`, `${ROOT}#1.topUp`]);
    // The prepaid balance admits exactly what was credited, summed over the stripes.
    const prepaid: ScopeLimits = { balance: { currency: "USD" } };
    let admitted = 0;
    for (let i = 0; i < 20; i++) if ((await client.reserve(`p${i}`, args(path(prepaid), 1))).result.ok) admitted++;
    expect(admitted).toBe(12);
    expect((await client.balance(ROOT, "team:t")).balance).toMatchObject({ metric: "balance:USD", limit: 12, held: 12, remaining: 0 });
  });

  it("splits admin overrides like limits, and clears them everywhere", async () => {
    const { client, core } = setup();
    await client.setLimits(ROOT, "team:t", usd(10), { actor: "ops", note: "cap" });
    expect([0, 1, 2, 3].map((i) => core(stripeObjectName(ROOT, i)).limits("team:t").override?.money?.limitMicros)).toEqual([3, 3, 2, 2]);
    expect((await client.balance(ROOT, "team:t")).limits).toEqual(usd(10));
    expect(core(`${ROOT}#2`).audit(10)).toEqual([expect.objectContaining({ action: "set_limits", actor: "ops", scope: "team:t", detail: { override: usd(2), previous: null, note: "cap" } })]);
    await client.setLimits(ROOT, "team:t", null, { actor: "ops" });
    for (let i = 0; i < 4; i++) expect(core(stripeObjectName(ROOT, i)).limits("team:t").override).toBeUndefined();
  });

  it("rejects bad arguments before any call, naming the field: as results on the request path, RangeErrors on the admin path", async () => {
    const { client, calls, objectFor } = setup();
    const invalid = (field: RegExp) => ({ result: { ok: false, attemptId: "a", reason: "invalid_argument", message: expect.stringMatching(field) }, handle: { object: "" } });
    expect(await client.reserve("a", args([{ name: "tenant:x#1" }], 1))).toEqual(invalid(/'#'/));
    expect(await client.reserve("a", args([], 1))).toEqual(invalid(/scopes/));
    expect(await client.reserve("a", args(path({ money: { currency: "USD", limitMicros: 2.5, periodMs: DAY } }), 1))).toEqual(invalid(/scopes\[1\]\.limits\.money\.limitMicros/));
    expect(await client.reserve("a", args(path({ requests: { perMinute: 0, burst: 1 } }), 1))).toEqual(invalid(/scopes\[1\]\.limits\.requests/));
    expect(await budgetLedgerClient(objectFor, { stripes: () => 65 }).reserve("a", args(path(usd(1)), 1))).toEqual(invalid(/stripes/));
    expect(await client.settle({ object: "" }, "a", "unknown")).toEqual({ ok: false, attemptId: "a", reason: "invalid_argument", message: expect.stringMatching(/handle/) });
    expect(await client.release({ object: "" }, "a")).toMatchObject({ ok: false, reason: "invalid_argument", message: expect.stringMatching(/handle/) });
    await expect(client.setLimits(ROOT, "team:t", { requests: { perMinute: 1, burst: 0 } })).rejects.toThrow(/limits\.requests/);
    await expect(client.topUp(ROOT, "team:t", { currency: "USD", micros: 0 }, { opId: "x", actor: "a" })).rejects.toThrow(/amount\.micros/);
    await expect(client.topUp(ROOT, "team:t", { currency: "USD", micros: 1 }, { opId: "x".repeat(254), actor: "a" })).rejects.toThrow(/by\.opId/);
    for (const n of [0, 65, 1.5, Number.NaN]) {
      const bad = budgetLedgerClient(objectFor, { stripes: () => n });
      await expect(bad.balance(ROOT, "team:t")).rejects.toThrow(/stripes/);
    }
    expect(calls).toEqual([]);
  });
});
