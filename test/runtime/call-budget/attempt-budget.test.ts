import { describe, expect, it } from "vitest";
import { AttemptBudgetLedger, MemoryAttemptBudgetStore, MAX_ATTEMPT_BUDGET } from "../../../src/call-budget/attempt-budget.ts";

const T0 = 1_000_000;
const DEADLINE = T0 + 10_000;
const GRACE = 1_000;

function ledger(): { ledger: AttemptBudgetLedger; store: MemoryAttemptBudgetStore } {
  const store = new MemoryAttemptBudgetStore();
  return { store, ledger: new AttemptBudgetLedger(store, { graceMs: GRACE }) };
}

describe("AttemptBudgetLedger", () => {
  it("creates the entry on first consume and counts that attempt", () => {
    const { ledger: l } = ledger();
    expect(l.peek("c1", T0)).toBeUndefined();
    expect(l.consume("c1", { initialBudget: 3, deadlineAt: DEADLINE, now: T0 })).toEqual({ ok: true, remaining: 2 });
    expect(l.peek("c1", T0)).toEqual({ callId: "c1", initialBudget: 3, remaining: 2, deadlineAt: DEADLINE, expiresAt: DEADLINE + GRACE, expired: false });
  });

  it("decrements on each attempt and refuses once exhausted, without changing anything", () => {
    const { ledger: l } = ledger();
    const req = { initialBudget: 3, deadlineAt: DEADLINE, now: T0 };
    expect([1, 2, 3].map(() => l.consume("c", req))).toEqual([
      { ok: true, remaining: 2 },
      { ok: true, remaining: 1 },
      { ok: true, remaining: 0 },
    ]);
    expect(l.consume("c", req)).toEqual({ ok: false, reason: "exhausted" });
    expect(l.consume("c", req)).toEqual({ ok: false, reason: "exhausted" });
    expect(l.peek("c", T0)?.remaining).toBe(0);
  });

  it("treats a budget of 0 as exhausted from the start, and remembers it", () => {
    const { ledger: l } = ledger();
    expect(l.consume("z", { initialBudget: 0, deadlineAt: DEADLINE, now: T0 })).toEqual({ ok: false, reason: "exhausted" });
    expect(l.consume("z", { initialBudget: 5, deadlineAt: DEADLINE, now: T0 })).toEqual({ ok: false, reason: "exhausted" });
    expect(l.peek("z", T0)).toMatchObject({ initialBudget: 0, remaining: 0 });
  });

  it("never refills: a later, different announced budget does not change the entry's count", () => {
    const { ledger: l } = ledger();
    l.consume("r", { initialBudget: 2, deadlineAt: DEADLINE, now: T0 });
    expect(l.consume("r", { initialBudget: 100, deadlineAt: DEADLINE, now: T0 + 1 })).toEqual({ ok: true, remaining: 0 });
    expect(l.consume("r", { initialBudget: 100, deadlineAt: DEADLINE, now: T0 + 2 })).toEqual({ ok: false, reason: "exhausted" });
    expect(l.peek("r", T0)).toMatchObject({ initialBudget: 2, remaining: 0 });
    // A lower announcement does not lower it either: the entry's own count wins.
    const { ledger: l2 } = ledger();
    l2.consume("r", { initialBudget: 5, deadlineAt: DEADLINE, now: T0 });
    expect(l2.consume("r", { initialBudget: 1, deadlineAt: DEADLINE, now: T0 })).toEqual({ ok: true, remaining: 3 });
  });

  it("keeps call ids apart", () => {
    const { ledger: l } = ledger();
    l.consume("a", { initialBudget: 1, deadlineAt: DEADLINE, now: T0 });
    expect(l.consume("a", { initialBudget: 1, deadlineAt: DEADLINE, now: T0 })).toEqual({ ok: false, reason: "exhausted" });
    expect(l.consume("b", { initialBudget: 1, deadlineAt: DEADLINE, now: T0 })).toEqual({ ok: true, remaining: 0 });
  });

  it("refuses at and after the deadline as expired (before exhausted), and never extends the deadline", () => {
    const { ledger: l } = ledger();
    l.consume("d", { initialBudget: 5, deadlineAt: DEADLINE, now: T0 });
    // A later announced deadline is ignored.
    expect(l.consume("d", { initialBudget: 5, deadlineAt: DEADLINE + 60_000, now: DEADLINE - 1 })).toEqual({ ok: true, remaining: 3 });
    expect(l.peek("d", T0)?.deadlineAt).toBe(DEADLINE);
    expect(l.consume("d", { initialBudget: 5, deadlineAt: DEADLINE + 60_000, now: DEADLINE })).toEqual({ ok: false, reason: "expired" });
    expect(l.peek("d", DEADLINE)).toMatchObject({ remaining: 3, expired: true });

    const { ledger: l2 } = ledger();
    l2.consume("e", { initialBudget: 1, deadlineAt: DEADLINE, now: T0 });
    expect(l2.consume("e", { initialBudget: 1, deadlineAt: DEADLINE, now: DEADLINE + 1 })).toEqual({ ok: false, reason: "expired" });
  });

  it("tightens to an earlier announced deadline, even on a refused attempt", () => {
    const { ledger: l } = ledger();
    l.consume("t", { initialBudget: 1, deadlineAt: DEADLINE, now: T0 });
    expect(l.consume("t", { initialBudget: 1, deadlineAt: T0 + 500, now: T0 + 1 })).toEqual({ ok: false, reason: "exhausted" });
    expect(l.peek("t", T0 + 1)).toMatchObject({ deadlineAt: T0 + 500, expiresAt: T0 + 500 + GRACE });
  });

  it("refuses a first attempt whose deadline has passed, without creating an entry", () => {
    const { ledger: l, store } = ledger();
    expect(l.consume("late", { initialBudget: 3, deadlineAt: T0, now: T0 })).toEqual({ ok: false, reason: "expired" });
    expect(store.size).toBe(0);
  });

  it("keeps an entry through its grace period, then treats it as absent", () => {
    const { ledger: l, store } = ledger();
    l.consume("g", { initialBudget: 1, deadlineAt: DEADLINE, now: T0 });
    // Within grace: a reuse of the call id with a fresh deadline is still refused (no refill).
    expect(l.consume("g", { initialBudget: 9, deadlineAt: DEADLINE + 5_000, now: DEADLINE + GRACE - 1 })).toEqual({ ok: false, reason: "expired" });
    expect(l.peek("g", DEADLINE + GRACE - 1)).toMatchObject({ expired: true });
    // Past grace it is gone, whether or not collection ran: peek deletes it on sight.
    expect(l.peek("g", DEADLINE + GRACE)).toBeUndefined();
    expect(store.size).toBe(0);
    // ...and the id starts a new budget (call ids are meant to be unique).
    expect(l.consume("g", { initialBudget: 2, deadlineAt: DEADLINE + 5_000, now: DEADLINE + GRACE })).toEqual({ ok: true, remaining: 1 });
  });

  it("garbage-collects expired entries and reports the next expiry", () => {
    const { ledger: l, store } = ledger();
    l.consume("x1", { initialBudget: 1, deadlineAt: T0 + 100, now: T0 });
    l.consume("x2", { initialBudget: 1, deadlineAt: T0 + 200, now: T0 });
    l.consume("x3", { initialBudget: 1, deadlineAt: T0 + 300, now: T0 });
    expect(l.nextExpiry()).toBe(T0 + 100 + GRACE);
    expect(l.collect(T0 + 100 + GRACE - 1)).toBe(0);
    expect(l.collect(T0 + 200 + GRACE)).toBe(2);
    expect(store.size).toBe(1);
    expect(l.nextExpiry()).toBe(T0 + 300 + GRACE);
    expect(l.collect(T0 + 10 * GRACE)).toBe(1);
    expect(l.nextExpiry()).toBeUndefined();
  });

  it("rejects invalid arguments with a RangeError, touching nothing", () => {
    const { ledger: l, store } = ledger();
    const ok = { initialBudget: 1, deadlineAt: DEADLINE, now: T0 };
    expect(() => l.consume("", ok)).toThrow(/callId/);
    expect(() => l.consume("x".repeat(513), ok)).toThrow(/callId/);
    expect(() => l.consume("c", { ...ok, initialBudget: -1 })).toThrow(/initialBudget/);
    expect(() => l.consume("c", { ...ok, initialBudget: 1.5 })).toThrow(/initialBudget/);
    expect(() => l.consume("c", { ...ok, initialBudget: MAX_ATTEMPT_BUDGET + 1 })).toThrow(RangeError);
    expect(() => l.consume("c", { ...ok, deadlineAt: Number.NaN })).toThrow(/deadlineAt/);
    expect(() => l.consume("c", { ...ok, deadlineAt: DEADLINE + 0.5 })).toThrow(/deadlineAt/);
    expect(() => l.consume("c", { ...ok, now: Number.POSITIVE_INFINITY })).toThrow(/now/);
    expect(() => l.consume("c", undefined as never)).toThrow(RangeError);
    expect(() => new AttemptBudgetLedger(store, { graceMs: -1 })).toThrow(/graceMs/);
    expect(store.size).toBe(0);
  });
});
