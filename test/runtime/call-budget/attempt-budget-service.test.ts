import { describe, expect, it } from "vitest";
import { MemoryAttemptBudgetStore } from "../../../src/call-budget/attempt-budget.ts";
import { AttemptBudgetService, type AttemptBudgetObjectStore } from "../../../src/call-budget/attempt-budget-service.ts";
import { FakeAlarmStorage } from "../support/fake-alarm-storage.ts";
import { FakeClock } from "../support/fixtures.ts";

const GRACE_MS = 60_000;

/** Entries in memory, with the object's transactions (counted) and drop. */
class MemoryObjectStore extends MemoryAttemptBudgetStore implements AttemptBudgetObjectStore {
  transactions = 0;
  drops = 0;
  transaction<T>(fn: () => T): T {
    this.transactions++;
    return fn();
  }
  async drop(): Promise<void> {
    this.drops++;
    this.deleteExpired(Number.POSITIVE_INFINITY);
  }
}

describe("AttemptBudgetService", () => {
  const make = (alarmAt: number | null = null) => {
    const store = new MemoryObjectStore();
    const alarm = new FakeAlarmStorage(alarmAt);
    const clock = new FakeClock();
    return { store, alarm, clock, budget: new AttemptBudgetService(store, alarm, clock) };
  };

  it("consumes on its own clock and arms the alarm at the entry's expiry", async () => {
    const { alarm, clock, budget } = make();
    const deadlineAt = clock.now() + 10_000;
    expect(await budget.consume("c", { initialBudget: 2, deadlineAt })).toEqual({ ok: true, remaining: 1 });
    expect(alarm.at).toBe(deadlineAt + GRACE_MS);
    expect(budget.peek("c")).toMatchObject({ callId: "c", remaining: 1, expiresAt: deadlineAt + GRACE_MS, expired: false });
  });

  it("keeps an alarm already set at or before the earliest expiry, and brings a later one forward", async () => {
    const early = make(1);
    await early.budget.consume("c", { initialBudget: 1, deadlineAt: early.clock.now() + 10_000 });
    expect(early.alarm.at).toBe(1);
    expect(early.alarm.log).toEqual(["get"]);

    const late = make(Number.MAX_SAFE_INTEGER);
    const deadlineAt = late.clock.now() + 10_000;
    await late.budget.consume("c", { initialBudget: 1, deadlineAt });
    expect(late.alarm.at).toBe(deadlineAt + GRACE_MS);
  });

  it("arms nothing when a refused consume stored nothing", async () => {
    const { alarm, clock, budget } = make();
    expect(await budget.consume("c", { initialBudget: 1, deadlineAt: clock.now() - 1 })).toEqual({ ok: false, reason: "expired" });
    expect(alarm.log).toEqual([]);
  });

  it("on its alarm deletes what expired and re-arms for the rest", async () => {
    const { store, alarm, clock, budget } = make();
    const t0 = clock.now();
    await budget.consume("soon", { initialBudget: 1, deadlineAt: t0 + 1_000 });
    await budget.consume("later", { initialBudget: 1, deadlineAt: t0 + 5_000 });
    clock.advance(1_000 + GRACE_MS);
    await budget.alarm();
    expect(store.get("soon")).toBeUndefined();
    expect(store.get("later")).toBeDefined();
    expect(alarm.at).toBe(t0 + 5_000 + GRACE_MS);
    expect(store.drops).toBe(0);
  });

  it("drops the whole store when its alarm leaves nothing, and sets no alarm", async () => {
    const { store, alarm, clock, budget } = make();
    await budget.consume("c", { initialBudget: 1, deadlineAt: clock.now() + 1_000 });
    alarm.log.length = 0;
    clock.advance(1_000 + GRACE_MS);
    await budget.alarm();
    expect(store.drops).toBe(1);
    expect(alarm.log).toEqual([]);
  });

  it("refuses a peek of anything but a string, before any transaction", () => {
    const { store, budget } = make();
    expect(() => budget.peek(42 as never)).toThrow(new RangeError("callId must be a string"));
    expect(store.transactions).toBe(0);
    expect(budget.peek("unknown")).toBeUndefined();
  });
});
