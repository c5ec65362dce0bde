import { describe, expect, it } from "vitest";
import { MemoryLedgerStore } from "../../../src/ledger/ledger-memory-store.ts";
import { BudgetLedgerCore, USAGE_REPORT_MAX_ATTEMPTS, type AttemptMeta, type ReserveRequest } from "../../../src/ledger/ledger.ts";

const T0 = 1_800_000_000_000;
const DAY = 86_400_000;
const PATH = ["org:acme", "team:ml", "project:x"].map((name) => ({ name }));

function ledger() {
  const store = new MemoryLedgerStore();
  const l = new BudgetLedgerCore(store);
  l.setLimits("org:acme", { money: { currency: "USD", limitMicros: 1_000_000, periodMs: DAY }, tokens: { limit: 1_000_000, windowMs: DAY } }, T0, { actor: "setup" });
  return { store, l };
}

const req = (micros: number, tokens: number, over: Partial<ReserveRequest> = {}): ReserveRequest => ({ scopes: PATH, currency: "USD", amount: { micros, tokens }, now: T0, ...over });
const money = (l: BudgetLedgerCore) => l.balance("org:acme", T0).money;

describe("BudgetLedgerCore: reconciliation", () => {
  function pending() {
    const r = ledger();
    r.l.reserve("a-unknown", req(4_000, 400));
    r.l.settle("a-unknown", "unknown", T0 + 10, { estimate: { micros: 2_500, tokens: 250 }, usage: { output: 12 } });
    r.l.reserve("b-expired", req(1_000, 100, { leaseMs: 1_000 }));
    r.l.expireLeases(T0 + 1_000);
    r.l.reserve("c-held", req(500, 50));
    r.l.reserve("d-settled", req(300, 30));
    r.l.settle("d-settled", { micros: 200, tokens: 20 }, T0);
    return r;
  }

  it("lists attempts pending reconciliation (either reason) by id, with paging", () => {
    const { l } = pending();
    expect(l.pendingReconciliations(10).map((a) => [a.attemptId, a.pendingReason])).toEqual([
      ["a-unknown", "unknown_usage"],
      ["b-expired", "lease_expired"],
    ]);
    expect(l.pendingReconciliations(1).map((a) => a.attemptId)).toEqual(["a-unknown"]);
    expect(l.pendingReconciliations(1, "a-unknown").map((a) => a.attemptId)).toEqual(["b-expired"]);
    expect(l.pendingReconciliations(10, "b-expired")).toEqual([]);
    expect(l.attemptsIn("held", 10).map((a) => a.attemptId)).toEqual(["c-held"]);
    expect(() => l.pendingReconciliations(0)).toThrow(/limit/);
    expect(() => l.pendingReconciliations(1_001)).toThrow(/limit/);
    expect(() => l.attemptsIn("bogus" as "held", 1)).toThrow(/state/);
  });

  it("resolves an unknown-usage attempt: hold released, actual spent, who resolved it recorded, audited", () => {
    const { l } = pending();
    expect(money(l)).toMatchObject({ held: 5_500, pending: 5_000, spent: 200 });
    const first = l.resolve("a-unknown", { micros: 3_000, tokens: 300 }, { actor: "ops", note: "provider invoice" }, T0 + 5_000);
    expect(first).toEqual({
      ok: true,
      attemptId: "a-unknown",
      state: "settled",
      settlement: {
        actual: { micros: 3_000, tokens: 300 },
        overrun: { micros: 0, tokens: 0 },
        settledAt: T0 + 5_000,
        estimate: { micros: 2_500, tokens: 250 },
        usage: { output: 12 },
        resolvedBy: { actor: "ops", note: "provider invoice", at: T0 + 5_000 },
      },
    });
    expect(money(l)).toMatchObject({ held: 1_500, pending: 1_000, spent: 3_200, overrun: 0 });
    for (const s of ["team:ml", "project:x"]) expect(l.usage(s).find((c) => c.metric === "tokens")).toMatchObject({ held: 150, pending: 100, spent: 320 });
    // Repeating it returns the first answer, whatever it says, and changes nothing.
    expect(l.resolve("a-unknown", { micros: 9, tokens: 9 }, { actor: "other" }, T0 + 9_000)).toEqual(first);
    expect(money(l)).toMatchObject({ held: 1_500, pending: 1_000, spent: 3_200 });
    // The attempt is settled now: settle answers the resolution, release is a conflict.
    expect(l.settle("a-unknown", { micros: 1, tokens: 1 }, T0)).toMatchObject({ ok: true, state: "settled", settlement: first.ok ? first.settlement : {} });
    expect(l.release("a-unknown", T0)).toMatchObject({ ok: false, reason: "conflict" });
    expect(l.pendingReconciliations(10).map((a) => a.attemptId)).toEqual(["b-expired"]);
  });

  it("resolves a lease-expired attempt, recording an overrun as settle does", () => {
    const { l } = pending();
    expect(l.resolve("b-expired", { micros: 1_600, tokens: 100 }, { actor: "ops" }, T0 + 2_000)).toMatchObject({
      ok: true,
      settlement: { actual: { micros: 1_600, tokens: 100 }, overrun: { micros: 600, tokens: 0 }, resolvedBy: { actor: "ops", at: T0 + 2_000 } },
    });
    expect(money(l)).toMatchObject({ held: 4_500, pending: 4_000, spent: 1_800, overrun: 600 });
    expect(l.attempt("b-expired")).toMatchObject({ state: "settled" });
    expect(l.attempt("b-expired")?.pendingReason).toBeUndefined();
  });

  it("refuses to resolve anything not pending reconciliation", () => {
    const { l } = pending();
    const before = money(l);
    expect(l.resolve("c-held", { micros: 1, tokens: 1 }, { actor: "ops" }, T0)).toEqual({ ok: false, attemptId: "c-held", reason: "not_pending", state: "held" });
    expect(l.resolve("d-settled", { micros: 1, tokens: 1 }, { actor: "ops" }, T0)).toEqual({ ok: false, attemptId: "d-settled", reason: "not_pending", state: "settled" });
    l.release("c-held", T0);
    expect(l.resolve("c-held", { micros: 1, tokens: 1 }, { actor: "ops" }, T0)).toMatchObject({ ok: false, reason: "not_pending", state: "released" });
    l.reserve("refused", req(10_000_000, 0));
    expect(l.resolve("refused", { micros: 1, tokens: 1 }, { actor: "ops" }, T0)).toEqual({ ok: false, attemptId: "refused", reason: "unknown_attempt" });
    expect(l.resolve("nope", { micros: 1, tokens: 1 }, { actor: "ops" }, T0)).toEqual({ ok: false, attemptId: "nope", reason: "unknown_attempt" });
    expect(money(l)).toMatchObject({ spent: before!.spent, pending: before!.pending });
    expect(() => l.resolve("a-unknown", { micros: -1, tokens: 0 }, { actor: "ops" }, T0)).toThrow(/actual\.micros/);
    expect(() => l.resolve("a-unknown", { micros: 1, tokens: 0 }, { actor: "" }, T0)).toThrow(/by\.actor/);
    expect(l.audit(100).filter((r) => r.action === "resolve")).toEqual([]);
  });

  it("keeps an audit log of every admin act, in order, with paging", () => {
    const { l } = pending();
    l.resolve("a-unknown", { micros: 3_000, tokens: 300 }, { actor: "ops", note: "invoice" }, T0 + 5_000);
    l.resolve("a-unknown", { micros: 3_000, tokens: 300 }, { actor: "ops" }, T0 + 5_001); // a replay: not audited again
    l.topUp("project:x", { currency: "USD", micros: 50 }, { opId: "t1", actor: "billing" }, T0 + 6_000);
    l.setLimits("project:x", null, T0 + 7_000);
    const log = l.audit(10);
    expect(log.map((r) => [r.seq, r.action, r.actor, r.at])).toEqual([
      [1, "set_limits", "setup", T0],
      [2, "resolve", "ops", T0 + 5_000],
      [3, "top_up", "billing", T0 + 6_000],
      [4, "set_limits", "unattributed", T0 + 7_000],
    ]);
    expect(log[1]).toEqual({
      seq: 2,
      at: T0 + 5_000,
      actor: "ops",
      action: "resolve",
      attemptId: "a-unknown",
      detail: { scopes: ["org:acme", "team:ml", "project:x"], reserved: { micros: 4_000, tokens: 400 }, actual: { micros: 3_000, tokens: 300 }, overrun: { micros: 0, tokens: 0 }, pendingReason: "unknown_usage", note: "invoice" },
    });
    expect(l.audit(2, 2).map((r) => r.seq)).toEqual([3, 4]);
    expect(l.audit(10, 4)).toEqual([]);
    expect(() => l.audit(10, -1)).toThrow(/afterSeq/);
  });
});

describe("BudgetLedgerCore: usage report", () => {
  const meta = (model: string, priceVersion: string): AttemptMeta => ({ model, priceVersion, requestId: "r" });

  it("sums the attempts that charged a scope in [from, to) by model and price version", () => {
    const { l } = ledger();
    const other = [{ name: "org:acme" }, { name: "team:other" }];
    // m1@p1: settled 2 (actual), held 1, pending 1 (unknown usage), released 1 (left out).
    l.reserve("s1", req(1_000, 100, { meta: meta("m1", "p1") }));
    l.settle("s1", { micros: 700, tokens: 70 }, T0);
    l.reserve("s2", req(1_000, 100, { meta: meta("m1", "p1"), now: T0 + 10 }));
    l.settle("s2", { micros: 1_200, tokens: 90 }, T0 + 10);
    l.reserve("h1", req(500, 50, { meta: meta("m1", "p1"), now: T0 + 20 }));
    l.reserve("u1", req(400, 40, { meta: meta("m1", "p1"), now: T0 + 30 }));
    l.settle("u1", "unknown", T0 + 30);
    l.reserve("r1", req(999, 99, { meta: meta("m1", "p1"), now: T0 + 40 }));
    l.release("r1", T0 + 40);
    // m1@p2 and m2@p1, and one without metadata.
    l.reserve("v2", req(300, 30, { meta: meta("m1", "p2"), now: T0 + 50 }));
    l.settle("v2", { micros: 100, tokens: 10 }, T0 + 50);
    l.reserve("m2", req(200, 20, { meta: meta("m2", "p1"), now: T0 + 60 }));
    l.reserve("bare", req(10, 1, { now: T0 + 70 }));
    // Not counted for project:x: another path, refused, or created outside the range.
    l.reserve("elsewhere", req(100, 10, { scopes: other, meta: meta("m1", "p1"), now: T0 + 80 }));
    l.reserve("refused", req(10_000_000, 1, { meta: meta("m1", "p1"), now: T0 + 90 }));
    l.reserve("before", req(100, 10, { meta: meta("m1", "p1"), now: T0 - 1 }));
    l.reserve("after", req(100, 10, { meta: meta("m1", "p1"), now: T0 + 1_000 }));

    const row = (model: string, priceVersion: string, attempts: number, settledMicros: number, settledTokens: number, pendingMicros: number, pendingTokens: number) => ({ model, priceVersion, currency: "USD", attempts, settledMicros, settledTokens, pendingMicros, pendingTokens });
    expect(l.usageReport("project:x", T0, T0 + 1_000)).toEqual({
      ok: true,
      rows: [row("", "", 1, 0, 0, 10, 1), row("m1", "p1", 4, 1_900, 160, 900, 90), row("m1", "p2", 1, 100, 10, 0, 0), row("m2", "p1", 1, 0, 0, 200, 20)],
    });
    // The root also saw the other path's attempt.
    const root = l.usageReport("org:acme", T0, T0 + 1_000);
    expect(root.ok && root.rows.find((r) => r.model === "m1" && r.priceVersion === "p1")).toMatchObject({ attempts: 5, pendingMicros: 1_000 });
    expect(l.usageReport("project:x", T0 + 1_001, T0 + 2_000)).toEqual({ ok: true, rows: [] });
    expect(() => l.usageReport("project:x", T0, T0 - 1)).toThrow(/toMs/);
  });

  it(`scans at most ${USAGE_REPORT_MAX_ATTEMPTS} attempts, the earliest of the range`, () => {
    const { l } = ledger();
    for (let i = 0; i <= USAGE_REPORT_MAX_ATTEMPTS; i++) l.reserve(`a${i}`, req(1, 1, { scopes: [{ name: "org:acme" }], now: T0 + i, meta: meta("m", "p") }));
    expect(l.usageReport("org:acme", T0, T0 + DAY)).toEqual({ ok: true, rows: [expect.objectContaining({ attempts: USAGE_REPORT_MAX_ATTEMPTS })] });
    expect(l.usageReport("org:acme", T0 + 1, T0 + DAY)).toEqual({ ok: true, rows: [expect.objectContaining({ attempts: USAGE_REPORT_MAX_ATTEMPTS })] });
    expect(l.usageReport("org:acme", T0 + 2, T0 + DAY)).toEqual({ ok: true, rows: [expect.objectContaining({ attempts: USAGE_REPORT_MAX_ATTEMPTS - 1 })] });
  });
});
