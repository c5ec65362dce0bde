import { afterEach, describe, expect, it, vi } from "vitest";
import { priceSchema } from "../../../src/config/budget-schema.ts";
import type { AttemptCharge, AttemptRecord } from "../../../src/context/attempt-record.ts";
import { budgetLedgerClient, type BudgetLedgerClient, type LedgerHandle, type QueuedSettlement, type SettleOptions } from "../../../src/ledger/ledger-client.ts";
import type { LedgerAmount, ReleaseResult, SettleDetail, SettleResult } from "../../../src/ledger/ledger.ts";
import { priceOf, type Price } from "../../../src/publication/prices.ts";
import { settleCharge, writeSettlement, type SettlementDeps, type SettlementIds, type SettlementObservation } from "../../../src/settle/settle-charge.ts";
import { memoryLedgers } from "../ledger/ledger-fakes.ts";

const T0 = 1_800_000_000_000;
/** Micros per token: 2 input, 1 cached input, 10 output (reasoning priced as output). */
const PRICE: Price = priceOf(priceSchema.parse({ version: "p-7", currency: "USD", inputPerMTok: 2, outputPerMTok: 10, cachedInputPerMTok: 1 }));
/** What the gateway estimates a request's input at when the provider says nothing. */
const INPUT_ESTIMATE = 120;

type Answer = SettleResult | ReleaseResult | QueuedSettlement;

/** One settle or release the settle phase asked of the ledger, with everything it passed. */
interface LedgerCall {
  readonly method: "settle" | "release";
  readonly handle: LedgerHandle;
  readonly attemptId: string;
  readonly actual?: LedgerAmount | "unknown";
  readonly detail?: SettleDetail | undefined;
  readonly opts: SettleOptions | undefined;
}

/** A client that records every settle and release and answers through `inner` (or `answer`, when given). */
function recording(inner: BudgetLedgerClient | undefined, answer?: (call: LedgerCall, n: number) => Promise<Answer>) {
  const calls: LedgerCall[] = [];
  const unused = () => Promise.reject(new Error("not used by the settle phase"));
  const respond = (call: LedgerCall, viaInner: () => Promise<Answer>) => {
    calls.push(call);
    return answer ? answer(call, calls.length) : viaInner();
  };
  const client: BudgetLedgerClient = {
    reserve: inner?.reserve ?? unused,
    balance: inner?.balance ?? unused,
    topUp: inner?.topUp ?? unused,
    setLimits: inner?.setLimits ?? unused,
    settleNow: inner?.settleNow ?? unused,
    settle: (handle, attemptId, actual, detail, opts) => respond({ method: "settle", handle, attemptId, actual, detail, opts }, () => inner!.settle(handle, attemptId, actual, detail, opts)) as Promise<SettleResult | QueuedSettlement>,
    release: (handle, attemptId, opts) => respond({ method: "release", handle, attemptId, opts }, () => inner!.release(handle, attemptId, opts)) as Promise<ReleaseResult | QueuedSettlement>,
  };
  return { client, calls };
}

/** The settle phase's dependencies, with everything it reports collected. */
function settlement(ledger: BudgetLedgerClient, over: Partial<SettlementDeps> = {}) {
  const logs: Record<string, unknown>[] = [];
  const observed: SettlementObservation[] = [];
  const kept: Promise<unknown>[] = [];
  let estimates = 0;
  const deps: SettlementDeps = {
    ledger,
    inputEstimate: () => (estimates++, INPUT_ESTIMATE),
    log: (e) => logs.push({ ...e }),
    waitUntil: (p) => void kept.push(p),
    onSettlement: (s) => observed.push(s),
    currency: "USD",
    ...over,
  };
  return { deps, logs, observed, kept, estimates: () => estimates };
}

/** A real in-memory ledger holding one reservation of `amount` for attempt `att_1`. */
async function reserved(amount: LedgerAmount) {
  const ledgers = memoryLedgers({ now: T0 });
  const real = budgetLedgerClient(ledgers.objectFor);
  const { result, handle } = await real.reserve("att_1", { scopes: [{ name: "tenant:t" }], currency: "USD", amount, meta: { requestId: "req_1", model: "chat-small@3", priceVersion: "p-7" } });
  expect(result.ok).toBe(true);
  const core = ledgers.core("tenant:t");
  const tokens = () => core.usage("tenant:t").find((c) => c.metric === "tokens")!;
  return { real, handle, core, tokens };
}

function attempt(over: Partial<AttemptRecord> = {}): AttemptRecord {
  return {
    id: "att_1",
    requestId: "req_1",
    snapshotRevision: 4,
    logicalModel: "chat-small",
    modelRevision: 3,
    pool: "pool-small",
    backendId: "bk_1",
    backendName: "primary",
    upstreamModel: "small-upstream",
    startedAt: T0,
    outcome: "success",
    evidence: { class: "success", reason: "ok", status: 200 },
    ...over,
  };
}

/** 1000 input tokens (200 of them cached) and 300 output: 800×2 + 200×1 + 300×10 micros. */
const USAGE = { inputTokens: 1000, outputTokens: 300, cachedInputTokens: 200, source: "provider" as const };
const USAGE_COST = { micros: 4_800, tokens: 1_300 };
const keepAliveAndReport = (deps: SettlementDeps) => ({ keepAlive: deps.waitUntil, report: expect.any(Function) });

describe("settleCharge: nothing was done", () => {
  for (const evidence of [
    { class: "known_zero", reason: "rejected_before_processing", status: 429 },
    { class: "client_error", reason: "status_client_error", status: 400 },
  ] as const) {
    it(`releases the whole hold on ${evidence.class} evidence, booking nothing`, async () => {
      const r = await reserved({ micros: 10_000, tokens: 5_000 });
      const { client, calls } = recording(r.real);
      const s = settlement(client);
      const booked: AttemptCharge[] = [];
      // Even a usage figure on the refusal does not make it charged: the backend did no work.
      await settleCharge(s.deps, r.handle, attempt({ outcome: "upstream_status", status: evidence.status, evidence, usage: USAGE }), PRICE, (c) => booked.push(c));
      expect(calls).toEqual([{ method: "release", handle: r.handle, attemptId: "att_1", opts: keepAliveAndReport(s.deps) }]);
      expect(booked).toEqual([{ usage: "none", costMicros: 0, currency: "USD" }]);
      expect(s.observed).toEqual([{ result: "released", overrun: false, model: "chat-small", currency: "USD" }]);
      expect(s.logs).toEqual([]);
      expect(s.estimates()).toBe(0);
      expect(r.core.attempt("att_1")!.state).toBe("released");
      expect(r.tokens()).toMatchObject({ held: 0, spent: 0 });
    });
  }
});

describe("settleCharge: usage the provider reported", () => {
  it("settles at the actual cost from the price, and the ledger releases the rest of the hold", async () => {
    const r = await reserved({ micros: 10_000, tokens: 5_000 });
    const { client, calls } = recording(r.real);
    const s = settlement(client);
    const booked: AttemptCharge[] = [];
    await settleCharge(s.deps, r.handle, attempt({ usage: USAGE }), PRICE, (c) => booked.push(c));
    expect(calls).toEqual([
      {
        method: "settle",
        handle: r.handle,
        attemptId: "att_1",
        actual: USAGE_COST,
        detail: { usage: { inputTokens: 1000, outputTokens: 300, cachedInputTokens: 200 } },
        opts: keepAliveAndReport(s.deps),
      },
    ]);
    expect(booked).toEqual([{ usage: "known", costMicros: 4_800, currency: "USD" }]);
    expect(s.observed).toEqual([{ result: "settled", costMicros: 4_800, overrun: false, model: "chat-small", currency: "USD" }]);
    expect(s.logs).toEqual([]);
    expect(s.estimates()).toBe(0);
    expect(r.core.attempt("att_1")).toMatchObject({ state: "settled", settlement: { actual: USAGE_COST, overrun: { micros: 0, tokens: 0 } } });
    // The 5000 tokens held became the 1300 spent: the excess is free again.
    expect(r.tokens()).toMatchObject({ held: 0, spent: 1_300, overrun: 0 });
  });

  it("books usage above the reservation in full, flags the overrun and logs it against the price version", async () => {
    const r = await reserved({ micros: 1_000, tokens: 500 });
    const { client, calls } = recording(r.real);
    const s = settlement(client);
    await settleCharge(s.deps, r.handle, attempt({ usage: USAGE }), PRICE);
    expect(calls.map((c) => [c.method, c.actual])).toEqual([["settle", USAGE_COST]]);
    expect(s.observed).toEqual([{ result: "settled", costMicros: 4_800, overrun: true, model: "chat-small", currency: "USD" }]);
    expect(s.logs).toEqual([{ kind: "ledger_overrun", requestId: "req_1", attemptId: "att_1", model: "chat-small@3", priceVersion: "p-7", overrun: { micros: 3_800, tokens: 800 } }]);
    expect(r.tokens()).toMatchObject({ held: 0, spent: 1_300, overrun: 800 });
  });

  it("settles reported usage even when the attempt's end left its evidence unknown", async () => {
    const r = await reserved({ micros: 10_000, tokens: 5_000 });
    const { client, calls } = recording(r.real);
    const s = settlement(client);
    await settleCharge(s.deps, r.handle, attempt({ outcome: "stream_cut", evidence: { class: "unknown", reason: "stream_cut" }, usage: USAGE }), PRICE);
    expect(calls.map((c) => [c.method, c.actual])).toEqual([["settle", USAGE_COST]]);
    expect(r.core.attempt("att_1")!.state).toBe("settled");
  });

  it("counts the tokens of an unpriced revision at no money, in the publication's currency", async () => {
    const r = await reserved({ micros: 0, tokens: 5_000 });
    const { client, calls } = recording(r.real);
    const s = settlement(client, { currency: "EUR" });
    const booked: AttemptCharge[] = [];
    await settleCharge(s.deps, r.handle, attempt({ usage: USAGE }), undefined, (c) => booked.push(c));
    expect(calls.map((c) => c.actual)).toEqual([{ micros: 0, tokens: 1_300 }]);
    expect(booked).toEqual([{ usage: "known", costMicros: 0, currency: "EUR" }]);
    expect(s.observed).toEqual([{ result: "settled", costMicros: 0, overrun: false, model: "chat-small", currency: "EUR" }]);
  });
});

describe("settleCharge: usage missing or only estimated", () => {
  // 120 estimated input tokens and ceil(41 / 4) = 11 output tokens: 120×2 + 11×10 micros.
  const ESTIMATE = { micros: 350, tokens: 131 };

  const cases: [string, Partial<AttemptRecord>][] = [
    ["a cut stream", { outcome: "stream_cut", evidence: { class: "unknown", reason: "stream_cut" } }],
    ["a 5xx after acceptance", { outcome: "upstream_status", status: 502, evidence: { class: "unknown", reason: "status_after_acceptance", status: 502 } }],
    ["a timeout", { outcome: "timeout", evidence: { class: "unknown", reason: "timeout" } }],
    ["a success that reported no usage", {}],
    ["an attempt with no evidence", { evidence: undefined }],
    ["usage the gateway only estimated", { usage: { inputTokens: 9_999, outputTokens: 9_999, source: "estimated" } }],
  ];
  for (const [what, over] of cases) {
    it(`settles ${what} as unknown, holding it for reconciliation with the gateway's estimate beside it`, async () => {
      const r = await reserved({ micros: 10_000, tokens: 5_000 });
      const { client, calls } = recording(r.real);
      const s = settlement(client);
      const booked: AttemptCharge[] = [];
      await settleCharge(s.deps, r.handle, attempt({ outputChars: 41, ...over }), PRICE, (c) => booked.push(c));
      expect(calls).toEqual([{ method: "settle", handle: r.handle, attemptId: "att_1", actual: "unknown", detail: { estimate: ESTIMATE }, opts: keepAliveAndReport(s.deps) }]);
      expect(booked).toEqual([{ usage: "unknown", costMicros: 0, currency: "USD" }]);
      expect(s.observed).toEqual([{ result: "pending_reconciliation", overrun: false, model: "chat-small", currency: "USD" }]);
      expect(s.logs).toEqual([]);
      expect(s.estimates()).toBe(1);
      expect(r.core.attempt("att_1")).toMatchObject({ state: "pending_reconciliation", pendingReason: "unknown_usage", settlement: { actual: "unknown", estimate: ESTIMATE } });
      // The hold stays whole until reconciliation: nothing is spent, and it is not zeroed.
      expect(r.tokens()).toMatchObject({ held: 5_000, pending: 5_000, spent: 0 });
    });
  }

  it("estimates from the input alone when no output was seen, and in tokens when the revision is unpriced", async () => {
    const r = await reserved({ micros: 0, tokens: 5_000 });
    const { client, calls } = recording(r.real);
    const s = settlement(client);
    await settleCharge(s.deps, r.handle, attempt({ outcome: "timeout", evidence: { class: "unknown", reason: "timeout" } }), undefined);
    expect(calls.map((c) => [c.actual, c.detail])).toEqual([["unknown", { estimate: { micros: 0, tokens: INPUT_ESTIMATE } }]]);
  });
});

describe("settleCharge: a ledger that keeps failing", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("asks the same settlement again, then leaves the hold to its lease and reports the failure", async () => {
    vi.useFakeTimers();
    const { client, calls } = recording(undefined, () => Promise.reject(new Error("ledger down")));
    const s = settlement(client, { settleTries: 2 });
    const booked: AttemptCharge[] = [];
    const done = settleCharge(s.deps, { object: "tenant:t" }, attempt({ usage: USAGE }), PRICE, (c) => booked.push(c));
    await vi.runAllTimersAsync();
    await expect(done).resolves.toBeUndefined();
    expect(calls).toHaveLength(2);
    expect(calls[1]).toEqual(calls[0]);
    expect(calls[0]).toMatchObject({ method: "settle", actual: USAGE_COST });
    // What was booked is what the settlement said, whether or not the ledger took it.
    expect(booked).toEqual([{ usage: "known", costMicros: 4_800, currency: "USD" }]);
    expect(s.observed).toEqual([{ result: "failed", overrun: false, model: "chat-small", currency: "USD" }]);
    expect(s.logs).toEqual([{ kind: "ledger_settle_failed", requestId: "req_1", attemptId: "att_1", error: "Error: ledger down" }]);
  });
});

describe("writeSettlement", () => {
  const IDS: SettlementIds = { requestId: "req_9", attemptId: "att_9", model: "mcp:search", label: "search/lookup", priceVersion: "tools-1" };
  const settled = (overrun: LedgerAmount = { micros: 0, tokens: 0 }): SettleResult => ({
    ok: true,
    attemptId: "att_9",
    state: "settled",
    settlement: { actual: { micros: 40, tokens: 0 }, overrun, settledAt: T0 },
  });
  const noLedger = recording(undefined).client;

  afterEach(() => {
    vi.useRealTimers();
  });

  it("retries a throwing write up to settleTries, waiting longer before each try, then reports it failed", async () => {
    vi.useFakeTimers();
    const s = settlement(noLedger, { settleTries: 3 });
    const triedAt: number[] = [];
    const done = writeSettlement(s.deps, IDS, () => {
      triedAt.push(Date.now());
      return Promise.reject(new Error("ledger down"));
    });
    await vi.advanceTimersByTimeAsync(0);
    // The first retry is not immediate: a ledger that just failed gets a moment.
    expect(triedAt).toHaveLength(1);
    expect(s.observed).toEqual([]);
    await vi.runAllTimersAsync();
    await expect(done).resolves.toBeUndefined();
    expect(triedAt).toHaveLength(3);
    const gaps = [triedAt[1]! - triedAt[0]!, triedAt[2]! - triedAt[1]!];
    expect(gaps[0]).toBeGreaterThan(0);
    expect(gaps[1]).toBeGreaterThan(gaps[0]!);
    expect(s.observed).toEqual([{ result: "failed", overrun: false, model: "mcp:search", currency: "USD" }]);
    expect(s.logs).toEqual([{ kind: "ledger_settle_failed", requestId: "req_9", attemptId: "att_9", error: "Error: ledger down" }]);
  });

  it("tries three times when settleTries is not set", async () => {
    vi.useFakeTimers();
    const s = settlement(noLedger);
    let tries = 0;
    const done = writeSettlement(s.deps, IDS, () => (tries++, Promise.reject("unreachable")));
    await vi.runAllTimersAsync();
    await done;
    expect(tries).toBe(3);
    expect(s.logs).toEqual([{ kind: "ledger_settle_failed", requestId: "req_9", attemptId: "att_9", error: "unreachable" }]);
  });

  it("reports once, as settled, when a retry gets through", async () => {
    vi.useFakeTimers();
    const s = settlement(noLedger);
    let tries = 0;
    const done = writeSettlement(s.deps, IDS, async () => {
      if (++tries === 1) throw new Error("blip");
      return settled();
    });
    await vi.runAllTimersAsync();
    await done;
    expect(tries).toBe(2);
    expect(s.observed).toEqual([{ result: "settled", costMicros: 40, overrun: false, model: "mcp:search", currency: "USD" }]);
    expect(s.logs).toEqual([]);
  });

  it("reports a refusal once, without retrying, with the ledger's reason and the attempt's state", async () => {
    const s = settlement(noLedger);
    let tries = 0;
    await writeSettlement(s.deps, IDS, async () => (tries++, { ok: false, attemptId: "att_9", reason: "conflict", state: "released" }));
    expect(tries).toBe(1);
    expect(s.observed).toEqual([{ result: "refused", overrun: false, model: "mcp:search", currency: "USD" }]);
    expect(s.logs).toEqual([{ kind: "ledger_settle_refused", requestId: "req_9", attemptId: "att_9", reason: "conflict", state: "released" }]);
  });

  it("logs an invalid argument with the ledger's message, not a state", async () => {
    const s = settlement(noLedger);
    await writeSettlement(s.deps, IDS, async () => ({ ok: false, attemptId: "att_9", reason: "invalid_argument", message: "invalid ledger settlement: actual.micros" }));
    expect(s.observed.map((o) => o.result)).toEqual(["refused"]);
    expect(s.logs).toEqual([{ kind: "ledger_settle_refused", requestId: "req_9", attemptId: "att_9", reason: "invalid_argument", error: "invalid ledger settlement: actual.micros" }]);
  });

  it("logs an overrun under the settlement's label, and a token overrun alone is one too", async () => {
    const s = settlement(noLedger);
    await writeSettlement(s.deps, IDS, async () => settled({ micros: 0, tokens: 7 }));
    expect(s.observed).toEqual([{ result: "settled", costMicros: 40, overrun: true, model: "mcp:search", currency: "USD" }]);
    expect(s.logs).toEqual([{ kind: "ledger_overrun", requestId: "req_9", attemptId: "att_9", model: "search/lookup", priceVersion: "tools-1", overrun: { micros: 0, tokens: 7 } }]);
  });

  it("leaves a queued settlement's report to the batching client, so it is reported once, when written", async () => {
    const s = settlement(noLedger);
    let given: SettleOptions | undefined;
    await writeSettlement(s.deps, IDS, async (opts) => {
      given = opts;
      return { ok: true, attemptId: "att_9", state: "queued" };
    });
    // Queued is not an answer: nothing is reported yet.
    expect(s.observed).toEqual([]);
    expect(s.logs).toEqual([]);
    expect(given?.keepAlive).toBe(s.deps.waitUntil);
    given!.report!(settled({ micros: 5, tokens: 0 }));
    expect(s.observed).toEqual([{ result: "settled", costMicros: 40, overrun: true, model: "mcp:search", currency: "USD" }]);
    expect(s.logs).toEqual([expect.objectContaining({ kind: "ledger_overrun", attemptId: "att_9" })]);
  });

  it("reports a queued settlement whose batch failed as failed", async () => {
    const s = settlement(noLedger);
    let given: SettleOptions | undefined;
    await writeSettlement(s.deps, IDS, async (opts) => ((given = opts), { ok: true, attemptId: "att_9", state: "queued" }));
    given!.report!({ error: new Error("batch lost") });
    expect(s.observed).toEqual([{ result: "failed", overrun: false, model: "mcp:search", currency: "USD" }]);
    expect(s.logs).toEqual([{ kind: "ledger_settle_failed", requestId: "req_9", attemptId: "att_9", error: "Error: batch lost" }]);
  });

  it("reports a release as released, and a settlement held for reconciliation as pending", async () => {
    const s = settlement(noLedger);
    await writeSettlement(s.deps, IDS, async () => ({ ok: true, attemptId: "att_9", state: "released", releasedAt: T0 }));
    await writeSettlement(s.deps, IDS, async () => ({ ok: true, attemptId: "att_9", state: "pending_reconciliation", settlement: { actual: "unknown", overrun: { micros: 0, tokens: 0 }, settledAt: T0 } }));
    expect(s.observed).toEqual([
      { result: "released", overrun: false, model: "mcp:search", currency: "USD" },
      { result: "pending_reconciliation", overrun: false, model: "mcp:search", currency: "USD" },
    ]);
    expect(s.logs).toEqual([]);
  });

  it("settles once and still logs when the metrics observer throws", async () => {
    const s = settlement(noLedger, {
      onSettlement: () => {
        throw new Error("metrics broke");
      },
    });
    let tries = 0;
    await expect(writeSettlement(s.deps, IDS, async () => (tries++, settled({ micros: 1, tokens: 0 })))).resolves.toBeUndefined();
    expect(tries).toBe(1);
    expect(s.logs.map((l) => l.kind)).toEqual(["ledger_overrun"]);
  });
});
