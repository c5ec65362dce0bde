import { describe, expect, it } from "vitest";
import { toolPricesSchema } from "../../../src/config/tool-price-schema.ts";
import { RequestContext } from "../../../src/context/request-context.ts";
import type { RequestRecord } from "../../../src/context/request-record.ts";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import { budgetLedgerClient } from "../../../src/ledger/ledger-client.ts";
import type { ScopeLimits } from "../../../src/ledger/ledger.ts";
import type { PrincipalBudget } from "../../../src/publication/budgets.ts";
import type { CompiledPublication } from "../../../src/publication/compile-publication.ts";
import type { Principal } from "../../../src/publication/principal.ts";
import { ToolPrices } from "../../../src/publication/tool-prices.ts";
import { reserveToolCall, toolRateScope } from "../../../src/reserve/tool-charge.ts";
import { settleStep } from "../../../src/settle/settle-step.ts";
import { memoryLedgers } from "../ledger/ledger-fakes.ts";

const HOUR = 3_600_000;
const PRINCIPAL = { tenantId: "t", keyId: "k" } as Principal;
const PRICES = new ToolPrices(
  toolPricesSchema.parse([
    { id: "search", servers: ["docs"], names: ["search"], price: { version: "tp-1", currency: "USD", perCall: 0.01 } },
    { id: "slow", servers: ["*"], names: ["fetch_*"], requests: { perMinute: 1, burst: 2 } },
  ]),
);

/** A tool call's request context over in-memory ledgers; `settled()` waits for its background work. */
function setup(limits: { key?: ScopeLimits; budgeted?: boolean } = {}) {
  const ledgerClock = { now: 1_000_000 };
  const ledgers = memoryLedgers(ledgerClock);
  const ledger = budgetLedgerClient(ledgers.objectFor);
  const budget: PrincipalBudget = {
    root: "tenant:t",
    scopes: [{ name: "tenant:t" }, { name: "key:k", limits: limits.key ?? { money: { currency: "USD", limitMicros: 1_000_000_000, periodMs: HOUR } } }],
    stripes: 1,
    leaseMs: 60_000,
    retentionMs: 30 * 24 * HOUR,
    historyMs: 90 * 24 * HOUR,
    exposeBudget: false,
  };
  const publication = { budgets: { forPrincipal: () => (limits.budgeted === false ? undefined : budget), currency: "USD" } } as unknown as CompiledPublication;
  const background: Promise<unknown>[] = [];
  const records: RequestRecord[] = [];
  const logs: Record<string, unknown>[] = [];
  const context = () => {
    const ctx = new RequestContext({
      requestId: "req_1",
      receivedAt: 0,
      clock: { now: () => ledgerClock.now },
      scheduler: { schedule: () => () => {} },
      sink: { attemptFinished: () => {}, requestFinished: (r) => records.push(structuredClone(r)) },
      waitUntil: (p) => background.push(p),
      settle: settleStep({ ledger, log: (e) => logs.push({ ...e }) }),
      onUndoError: (err) => {
        throw err;
      },
    });
    ctx.record.mcp = { method: "tools/call", jsonrpcId: 1, protocolVersion: "2026-07-28" };
    return ctx;
  };
  const reserve = (ctx: RequestContext, name = "search") => reserveToolCall({ ledger, callBudgets: undefined as never, log: (e) => logs.push({ ...e }) }, publication, PRICES, ctx, PRINCIPAL, { server: "docs", name });
  const core = ledgers.core("tenant:t");
  return { context, reserve, core, records, logs, settled: () => Promise.all(background), calls: ledgers.calls };
}

describe("reserveToolCall", () => {
  it("reserves nothing for a tool no rule prices or limits", async () => {
    const s = setup();
    const ctx = s.context();
    expect(await s.reserve(ctx, "other")).toBeUndefined();
    ctx.finish({ kind: "completed" });
    expect(s.calls).toEqual([]);
  });

  it("charges the price exactly once when the server answered, and records it on the audit", async () => {
    const s = setup();
    const ctx = s.context();
    const track = (await s.reserve(ctx))!;
    const id = ctx.record.mcp!.charge!.attemptId;
    expect(s.core.attempt(id)).toMatchObject({ state: "held", amount: { micros: 10_000, tokens: 0 }, meta: { model: "mcp:docs/search", priceVersion: "tp-1" } });
    track.onSent();
    track.onEvidence("answered");
    ctx.finish({ kind: "completed" });
    await s.settled();
    expect(s.core.attempt(id)).toMatchObject({ state: "settled" });
    expect(s.core.balance("key:k", 1_000_000).money).toMatchObject({ spent: 10_000, held: 0 });
    expect(s.records[0]!.mcp!.charge).toMatchObject({ rule: "search", micros: 10_000, currency: "USD", priceVersion: "tp-1", settlement: "charged" });
    expect(s.calls.filter((c) => c.endsWith(".settle") || c.endsWith(".release"))).toEqual(["tenant:t.settle"]);
  });

  it.each([["refused"], ["rate_limited"], ["not_sent"]] as const)("releases the hold when the evidence is %s", async (evidence) => {
    const s = setup();
    const ctx = s.context();
    const track = (await s.reserve(ctx))!;
    if (evidence !== "not_sent") track.onSent();
    track.onEvidence(evidence);
    ctx.finish({ kind: "failed", error: new GatewayError("upstream_error", "refused") });
    await s.settled();
    expect(s.core.attempt(ctx.record.mcp!.charge!.attemptId)).toMatchObject({ state: "released" });
    expect(s.core.balance("key:k", 1_000_000).money).toMatchObject({ spent: 0, held: 0 });
    expect(s.records[0]!.mcp!.charge!.settlement).toBe("released");
  });

  it("releases a call the request ended before sending (admission refused, client gone)", async () => {
    const s = setup();
    const ctx = s.context();
    await s.reserve(ctx);
    ctx.abort("client_disconnected");
    await s.settled();
    expect(s.core.attempt(ctx.record.mcp!.charge!.attemptId)).toMatchObject({ state: "released" });
  });

  it("holds the whole price for reconciliation when the call was sent and nothing proves the outcome", async () => {
    for (const end of ["evidence", "abort"] as const) {
      const s = setup();
      const ctx = s.context();
      const track = (await s.reserve(ctx))!;
      track.onSent();
      if (end === "evidence") track.onEvidence("unknown");
      ctx.abort("client_disconnected");
      await s.settled();
      const rec = s.core.attempt(ctx.record.mcp!.charge!.attemptId)!;
      expect(rec).toMatchObject({ state: "pending_reconciliation" });
      expect(s.core.balance("key:k", 1_000_000).money).toMatchObject({ held: 10_000, pending: 10_000 });
      expect(s.records[0]!.mcp!.charge!.settlement).toBe("pending_reconciliation");
    }
  });

  it("refuses over budget with the model path's code, before anything could be sent", async () => {
    const s = setup({ key: { money: { currency: "USD", limitMicros: 25_000, periodMs: HOUR } } });
    const granted: unknown[] = [];
    for (let i = 0; i < 2; i++) granted.push(await s.reserve(s.context()));
    const err = await s.reserve(s.context()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GatewayError);
    expect((err as GatewayError).code).toBe("budget_exceeded");
    expect(granted.every((g) => g !== undefined)).toBe(true);
  });

  it("refuses a tool priced above the whole budget without a retry-after", async () => {
    const s = setup({ key: { money: { currency: "USD", limitMicros: 5_000, periodMs: HOUR } } });
    const err = (await s.reserve(s.context()).catch((e: unknown) => e)) as GatewayError;
    expect(err.code).toBe("budget_exceeded");
    expect(err.retryAfterSeconds).toBeUndefined();
    expect(err.message).toMatch(/price of this tool is larger than the whole budget of key:k/);
  });

  it("limits the call rate per key and rule in a scope of its own, even for a tenant without budgets", async () => {
    const s = setup({ budgeted: false });
    for (let i = 0; i < 2; i++) expect(await s.reserve(s.context(), `fetch_${i}`)).toBeDefined();
    const err = (await s.reserve(s.context(), "fetch_9").catch((e: unknown) => e)) as GatewayError;
    expect(err.code).toBe("request_rate_exceeded");
    expect(err.message).toContain(toolRateScope("k", "slow"));
    expect(err.retryAfterSeconds).toBeGreaterThanOrEqual(1);
  });

  it("charges nothing to a tenant that keeps no budgets, as for its model requests", async () => {
    const s = setup({ budgeted: false });
    const ctx = s.context();
    expect(await s.reserve(ctx, "search")).toBeUndefined();
    expect(s.calls).toEqual([]);
    // A rate-limited tool still takes a token, and reserves no money.
    const track = (await s.reserve(ctx, "fetch_1"))!;
    expect(ctx.record.mcp!.charge).toMatchObject({ rule: "slow", micros: 0 });
    track.onSent();
    track.onEvidence("answered");
    await s.settled();
    expect(s.core.attempt(ctx.record.mcp!.charge!.attemptId)).toMatchObject({ state: "settled", scopes: ["tenant:t", "key:k", "key:k/tools:slow"] });
  });

  it("answers budget_unavailable when the ledger cannot be reached, and sends nothing", async () => {
    const s = setup();
    const ctx = s.context();
    const failing = { reserve: () => Promise.reject(new Error("down")) } as never;
    const err = (await reserveToolCall({ ledger: failing, callBudgets: undefined as never, log: () => {} }, { budgets: { forPrincipal: () => ({ root: "tenant:t", scopes: [{ name: "tenant:t" }], stripes: 1, leaseMs: 60_000, retentionMs: 30 * 24 * HOUR, exposeBudget: false }), currency: "USD" } } as unknown as CompiledPublication, PRICES, ctx, PRINCIPAL, { server: "docs", name: "search" }).catch((e: unknown) => e)) as GatewayError;
    expect(err.code).toBe("budget_unavailable");
  });
});
