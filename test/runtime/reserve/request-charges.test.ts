import { describe, expect, it } from "vitest";
import { RequestBilling } from "../../../src/reserve/request-charges.ts";
import { settleStep } from "../../../src/settle/settle-step.ts";
import type { PrincipalBudget } from "../../../src/publication/budgets.ts";
import { priceOf, type Price } from "../../../src/publication/prices.ts";
import { inputTokenBound } from "../../../src/reserve/token-bounds.ts";
import { priceSchema } from "../../../src/config/budget-schema.ts";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import { budgetLedgerClient, type BudgetLedgerClient } from "../../../src/ledger/ledger-client.ts";
import type { ScopeLimits } from "../../../src/ledger/ledger.ts";
import { createClientStream } from "../../../src/respond/stream-pipeline.ts";
import { CodecRegistry } from "../../../src/protocol/codec.ts";
import { builtinCodecs } from "../../../src/protocol/registry.ts";
import { clock, errorOf, harness, okBody, plan, snapshot, type RunResult, type Seen } from "../support/executor-harness.ts";
import { memoryLedgers } from "../ledger/ledger-fakes.ts";

const PRICE: Price = priceOf(priceSchema.parse({ version: "p-1", currency: "USD", inputPerMTok: 1, outputPerMTok: 2 }));
const HOUR = 3_600_000;

/** A request's billing over in-memory ledgers; `settled()` waits for its waitUntil work. */
function billing(limits: { project?: ScopeLimits; key?: ScopeLimits } = {}, opts: { mode?: "strict" | "soft"; ledger?: BudgetLedgerClient; cap?: number } = {}) {
  const ledgerClock = { now: 1_000_000 };
  const ledgers = memoryLedgers(ledgerClock);
  const ledger = opts.ledger ?? budgetLedgerClient(ledgers.objectFor);
  const budget: PrincipalBudget = {
    root: "tenant:t",
    scopes: [{ name: "tenant:t" }, { name: "project:p", ...(limits.project ? { limits: limits.project } : {}) }, { name: "key:k", ...(limits.key ? { limits: limits.key } : {}) }],
    stripes: 1,
    leaseMs: 60_000,
    retentionMs: 30 * 24 * HOUR,
    historyMs: 90 * 24 * HOUR,
    exposeBudget: false,
  };
  const background: Promise<unknown>[] = [];
  const logs: Record<string, unknown>[] = [];
  const make = (inputBound: number) =>
    new RequestBilling({
      ledger,
      budget,
      policy: { mode: opts.mode ?? "strict", defaultMaxOutputTokens: 100 },
      price: () => PRICE,
      currency: "USD",
      requestId: "req_1",
      inputBound,
      inputEstimate: () => 3,
      outputCap: opts.cap ?? 100,
      waitUntil: (p) => background.push(p),
      log: (e) => logs.push({ ...e }),
    });
  const core = ledgers.core("tenant:t");
  // The runner's settle step over the same ledger and logs: the request context pays the debts with it.
  const settle = settleStep({ ledger, log: (e) => logs.push({ ...e }) });
  const waitUntil = (p: Promise<unknown>) => void background.push(p);
  return { make, core, logs, settle, waitUntil, settled: () => Promise.all(background), calls: ledgers.calls };
}

async function run(
  respond: (s: Seen, n: number) => Response | Promise<Response>,
  b: ReturnType<typeof billing>,
  body: Record<string, unknown> = {},
  maxAttempts = 1,
  codecs: CodecRegistry = builtinCodecs,
) {
  let n = 0;
  const h = harness((s) => respond(s, ++n), undefined, { sleep: async () => {}, codecs });
  const a = plan({ max_tokens: 100, ...body });
  const charges = b.make(inputTokenBound(a.request));
  const signal = new AbortController();
  const result = await h.executor
    .execute({ ...a.plan, retry: { maxAttempts } }, a.request, { snapshot: await snapshot([{ name: "a", port: 9001 }, { name: "b", port: 9002 }]), clientSignal: signal.signal, charges, settle: b.settle, waitUntil: b.waitUntil })
    ;
  return { result, h, a, charges, bound: inputTokenBound(a.request) };
}

const rateLimited = () => Response.json({ error: { message: "slow down" } }, { status: 429, headers: { "retry-after": "0" } });
/** What the harness plan costs at worst: its input bound plus the 100-token cap, priced. */
const worst = (bound: number) => ({ micros: Math.ceil((bound * 1_000_000 + 100 * 2_000_000) / 1_000_000), tokens: bound + 100 });

describe("RequestBilling through the executor", () => {
  it("reserves the priced worst case before sending and settles the buffered usage exactly once", async () => {
    const b = billing();
    const { result, h, bound } = await run(() => okBody(), b);
    expect((result.ok && result.kind)).toBe("buffered");
    await b.settled();
    const rec = b.core.attempt(h.attempts[0]!.id)!;
    expect(rec.amount).toEqual(worst(bound));
    expect(rec.meta).toEqual({ requestId: "req_1", model: "chat-small@1", priceVersion: "p-1" });
    // okBody reports 5 prompt + 2 completion tokens: 5×1 + 2×2 micros.
    expect(rec).toMatchObject({ state: "settled", settlement: { actual: { micros: 9, tokens: 7 }, usage: { inputTokens: 5, outputTokens: 2 } } });
    expect(b.core.balance("project:p", 1_000_000).scope).toBe("project:p");
    expect(b.calls.filter((c) => c.endsWith(".reserve"))).toHaveLength(1);
    expect(b.calls.filter((c) => c.endsWith(".settle"))).toHaveLength(1);
  });

  it("a retry reserves its own: the known-zero attempt is released, the next one settled", async () => {
    const b = billing();
    const { result, h } = await run((_, n) => (n === 1 ? rateLimited() : okBody()), b, {}, 3);
    expect(result.attempts).toHaveLength(2);
    await b.settled();
    expect(h.attempts.map((a) => b.core.attempt(a.id)!.state)).toEqual(["released", "settled"]);
  });

  it("refuses before sending anything when a scope cannot hold the worst case now, naming that scope", async () => {
    const probe = await run(() => okBody(), billing());
    const limits = { tokens: { limit: worst(probe.bound).tokens + 50, windowMs: HOUR } };
    const b = billing({ project: limits });
    // Another attempt already holds 60 tokens of the project.
    b.core.reserve("occupant", { scopes: [{ name: "tenant:t" }, { name: "project:p", limits }], currency: "USD", amount: { micros: 0, tokens: 60 }, now: 1_000_000 });
    const { result, h } = await run(() => okBody(), b);
    const err = errorOf(result);
    expect(err.code).toBe("token_limit_exceeded");
    expect(err.status).toBe(429);
    expect(err.details?.[0]).toMatchObject({ scope: "project:p", metric: "tokens" });
    expect(err.retryAfterSeconds).toBeGreaterThan(0);
    expect(h.seen).toHaveLength(0);
    // Nothing held anywhere for the refused attempt: only the occupant's 60.
    const held = (s: string) => b.core.usage(s).find((c) => c.metric === "tokens")?.held ?? 0;
    expect([held("tenant:t"), held("project:p"), held("key:k")]).toEqual([60, 60, 0]);
  });

  it("answers a worst case larger than a whole limit as the client's error, not a retry-later", async () => {
    const b = billing({ project: { tokens: { limit: 50, windowMs: HOUR } } });
    const { result, h } = await run(() => okBody(), b);
    expect(errorOf(result)).toMatchObject({ code: "invalid_request", status: 400, retryAfterSeconds: undefined });
    expect(h.seen).toHaveLength(0);
  });

  it("lets a retry in where its own earlier hold would have crowded it out", async () => {
    // Room for exactly one worst case: the retry only fits once the 429's hold is released.
    const probe = await run(() => okBody(), billing());
    const b = billing({ project: { tokens: { limit: worst(probe.bound).tokens, windowMs: HOUR } } });
    const { result } = await run((_, n) => (n === 1 ? rateLimited() : okBody()), b, {}, 3);
    expect((result.ok && result.kind)).toBe("buffered");
  });

  it("counts a request once against a request-rate limit, whatever its retries", async () => {
    const b = billing({ key: { requests: { perMinute: 1, burst: 1 } } });
    const first = await run((_, n) => (n === 1 ? rateLimited() : okBody()), b, {}, 3);
    expect(first.result.attempts).toHaveLength(2);
    const second = await run(() => okBody(), b);
    expect(errorOf(second.result).code).toBe("request_rate_exceeded");
  });

  it("keeps unknown usage held for reconciliation, with an estimate beside it", async () => {
    const b = billing();
    const noUsage = () => Response.json({ id: "x", model: "x", choices: [{ index: 0, message: { role: "assistant", content: "Hello there" }, finish_reason: "stop" }] });
    const { h, bound } = await run(noUsage, b);
    await b.settled();
    const rec = b.core.attempt(h.attempts[0]!.id)!;
    expect(rec).toMatchObject({ state: "pending_reconciliation", pendingReason: "unknown_usage", settlement: { actual: "unknown" } });
    // Estimate: 3 input tokens + ceil(11 chars / 4) output tokens, priced.
    expect(rec.settlement?.estimate).toEqual({ micros: 3 + 3 * 2, tokens: 6 });
    expect(b.core.usage("key:k").find((c) => c.metric === "tokens")).toMatchObject({ held: worst(bound).tokens, pending: worst(bound).tokens, spent: 0 });
  });

  it("books usage above the worst case in full and flags the price or cap", async () => {
    const b = billing();
    const huge = () =>
      Response.json({ id: "x", model: "x", choices: [{ index: 0, message: { role: "assistant", content: "Hi" }, finish_reason: "stop" }], usage: { prompt_tokens: 9_000, completion_tokens: 500, total_tokens: 9_500 } });
    const { h, bound } = await run(huge, b);
    await b.settled();
    const rec = b.core.attempt(h.attempts[0]!.id)!;
    expect(rec.settlement?.actual).toEqual({ micros: 9_000 + 500 * 2, tokens: 9_500 });
    expect(rec.settlement?.overrun.tokens).toBe(9_500 - worst(bound).tokens);
    expect(b.logs.find((l) => l.kind === "ledger_overrun")).toMatchObject({ attemptId: h.attempts[0]!.id, model: "chat-small@1", priceVersion: "p-1" });
  });

  it("releases an attempt the provider refused (4xx) and holds one it may have run (5xx)", async () => {
    for (const [status, state] of [
      [400, "released"],
      [500, "pending_reconciliation"],
    ] as const) {
      const b = billing();
      const { h } = await run(() => Response.json({ error: { message: "no" } }, { status }), b);
      await b.settled();
      expect(b.core.attempt(h.attempts[0]!.id)!.state).toBe(state);
    }
  });

  it("reserves nothing for an attempt its backend's encoder refused, and finishes that attempt once", async () => {
    const chat = builtinCodecs.get("openai-chat")!;
    const refusing = new CodecRegistry([
      {
        ...chat,
        encodeRequest: () => {
          throw new GatewayError("invalid_request", "This backend cannot express the request.");
        },
      },
      builtinCodecs.get("openai-responses")!,
      builtinCodecs.get("anthropic-messages")!,
    ]);
    const b = billing();
    const { result, h } = await run(() => okBody(), b, {}, 3, refusing);
    expect(errorOf(result).code).toBe("invalid_request");
    expect(h.seen).toHaveLength(0);
    expect(h.attempts).toHaveLength(1);
    expect(h.attempts[0]).toMatchObject({ outcome: "connect_failed", errorCode: "invalid_request", evidence: { class: "client_error", reason: "not_attempted" } });
    await b.settled();
    // The request is encoded before anything is reserved: the ledger never heard of it.
    expect(b.core.attempt(h.attempts[0]!.id)).toBeUndefined();
    expect(b.calls.filter((c) => c.endsWith(".reserve"))).toEqual([]);
  });

  it("refuses a cap no budget could hold as the client's error, before the ledger is asked", async () => {
    const b = billing({}, { cap: 2 ** 51 });
    const { result, h } = await run(() => okBody(), b);
    expect(errorOf(result)).toMatchObject({ code: "invalid_request", status: 400 });
    expect(h.seen).toHaveLength(0);
    expect(b.calls).toEqual([]);
  });

  it("fails closed on a strict route when the ledger is unreachable, and goes on flagged on a soft one", async () => {
    const down: BudgetLedgerClient = {
      reserve: () => Promise.reject(new Error("ledger down")),
      settle: () => Promise.reject(new Error("ledger down")),
      release: () => Promise.reject(new Error("ledger down")),
      balance: () => Promise.reject(new Error("ledger down")),
      topUp: () => Promise.reject(new Error("ledger down")),
      setLimits: () => Promise.reject(new Error("ledger down")),
      settleNow: () => Promise.reject(new Error("ledger down")),
    };
    const strict = await run(() => okBody(), billing({}, { ledger: down }));
    expect(errorOf(strict.result)).toMatchObject({ code: "budget_unavailable", status: 503, retryAfterSeconds: 1 });
    expect(strict.h.seen).toHaveLength(0);
    const b = billing({}, { ledger: down, mode: "soft" });
    const soft = await run(() => okBody(), b);
    expect((soft.result.ok && soft.result.kind)).toBe("buffered");
    expect(soft.charges.unchecked).toBe(true);
    expect(b.logs[0]).toMatchObject({ kind: "ledger_unchecked", requestId: "req_1" });
  });

  it("answers a malformed reservation as the gateway's own fault, never unchecked, and logs an invalid settlement", async () => {
    const ledgers = memoryLedgers({ now: 1_000_000 });
    const real = budgetLedgerClient(ledgers.objectFor);
    const invalid = { ok: false as const, attemptId: "a", reason: "invalid_argument" as const, message: "invalid ledger reservation: amount.micros must be an integer" };
    const broken: BudgetLedgerClient = { ...real, reserve: async () => ({ result: invalid, handle: { object: "" } }) };
    for (const mode of ["strict", "soft"] as const) {
      const b = billing({}, { ledger: broken, mode });
      const { result, h, charges } = await run(() => okBody(), b);
      expect(errorOf(result)).toMatchObject({ code: "internal_error", status: 500 });
      expect(h.seen).toHaveLength(0);
      expect(charges.unchecked).toBe(false);
    }
    const badSettle: BudgetLedgerClient = { ...real, settle: async () => ({ ...invalid, message: "invalid ledger settlement: actual.micros" }) };
    const s = billing({}, { ledger: badSettle });
    await run(() => okBody(), s);
    await s.settled();
    expect(s.logs).toContainEqual(expect.objectContaining({ kind: "ledger_settle_refused", reason: "invalid_argument", error: "invalid ledger settlement: actual.micros" }));
  });

  it("leaves a hold to lease expiry when settlement keeps failing, and says so", async () => {
    const ledgers = memoryLedgers({ now: 1_000_000 });
    const real = budgetLedgerClient(ledgers.objectFor);
    const flaky: BudgetLedgerClient = { ...real, settle: () => Promise.reject(new Error("ledger down")) };
    const f = billing({}, { ledger: flaky });
    const { h } = await run(() => okBody(), f);
    await f.settled();
    expect(ledgers.core("tenant:t").attempt(h.attempts[0]!.id)!.state).toBe("held");
    expect(f.logs.at(-1)).toMatchObject({ kind: "ledger_settle_failed", attemptId: h.attempts[0]!.id });
    expect(ledgers.core("tenant:t").expireLeases(1_000_000 + 60_000)).toBe(1);
    expect(ledgers.core("tenant:t").attempt(h.attempts[0]!.id)!).toMatchObject({ state: "pending_reconciliation", pendingReason: "lease_expired" });
  });
});

describe("RequestBilling: streams settle when they end, however they end", () => {
  // One event per read, so a cut arrives after the events before it were read (an error
  // raised with chunks still queued would discard them).
  const sse = (events: string[], cut = false) => {
    let i = 0;
    return new Response(
      new ReadableStream<Uint8Array>({
        pull(c) {
          if (i < events.length) c.enqueue(new TextEncoder().encode(`data: ${events[i++]}\n\n`));
          else if (cut) c.error(new TypeError("Network connection lost."));
          else c.close();
        },
      }),
      { headers: { "content-type": "text/event-stream" } },
    );
  };
  const chunk = (delta: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "x", choices: [{ index: 0, delta, finish_reason: null }], ...extra });
  const usage = JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "x", choices: [], usage: { prompt_tokens: 4, completion_tokens: 3, total_tokens: 7 } });

  async function stream(respond: () => Response, cancelAfterFirst = false) {
    const b = billing();
    const { result, h, a } = await run(respond, b, { stream: true });
    const ex = result as Extract<RunResult, { kind: "stream" }>;
    const codec = builtinCodecs.get("openai-chat")!;
    const client = createClientStream(ex.body, {
      decoder: ex.decoder,
      encoder: codec.createStreamEncoder({ id: "x", created: 1, model: "sluice-chat" }, a.request),
      attempt: ex.attempt,
      clock,
    });
    const reader = client.getReader();
    if (cancelAfterFirst) {
      await reader.read();
      await reader.cancel();
    } else while (!(await reader.read()).done);
    await b.settled();
    return b.core.attempt(h.attempts[0]?.id ?? ex.attempts[0]!.id)!;
  }

  it("settles the usage of a complete stream", async () => {
    const rec = await stream(() => sse([chunk({ role: "assistant", content: "Hi" }), chunk({ content: " there" }), usage, "[DONE]"]));
    expect(rec).toMatchObject({ state: "settled", settlement: { actual: { micros: 4 + 3 * 2, tokens: 7 } } });
  });

  it("holds a cut stream for reconciliation, with the output it saw in the estimate", async () => {
    const rec = await stream(() => sse([chunk({ role: "assistant", content: "Hello, wor" })], true));
    expect(rec).toMatchObject({ state: "pending_reconciliation", settlement: { actual: "unknown", estimate: { tokens: 3 + 3 } } });
  });

  it("settles a stream the client cancelled: what the provider reported, or the hold", async () => {
    const rec = await stream(() => sse([chunk({ role: "assistant", content: "Hi" }), chunk({ content: "!" }), usage, "[DONE]"]), true);
    expect(["settled", "pending_reconciliation"]).toContain(rec.state);
    expect(rec.settlement).toBeDefined();
  });
});

describe("refusal errors", () => {
  it("maps each ledger refusal to a stable code with the caller's scope", async () => {
    const { refusalError } = await import("../../../src/reserve/request-charges.ts");
    const base = { ok: false as const, attemptId: "a", scope: "team:x", limit: 1, used: 1, requested: 1 };
    expect(refusalError({ ...base, reason: "money_budget_exceeded", metric: "money:USD", retryAfterMs: 1500 })).toMatchObject({ code: "budget_exceeded", retryAfterSeconds: 2 });
    // Larger than the whole limit: no period will admit it, so no retry-after.
    expect(refusalError({ ...base, requested: 2, used: 0, reason: "token_limit_exceeded", metric: "tokens", retryAfterMs: 1500 })).toMatchObject({ code: "invalid_request", status: 400, retryAfterSeconds: undefined });
    expect(refusalError({ ...base, reason: "balance_exhausted", metric: "balance:USD" })).toMatchObject({ code: "balance_exhausted", status: 402, retryAfterSeconds: undefined });
    expect(refusalError({ ...base, reason: "request_rate_exceeded", metric: "requests", retryAfterMs: 10 }).retryAfterSeconds).toBe(1);
    const e = refusalError({ ...base, reason: "currency_mismatch", metric: "money:USD" });
    expect(e).toBeInstanceOf(GatewayError);
    expect(e.code).toBe("internal_error");
  });
});
