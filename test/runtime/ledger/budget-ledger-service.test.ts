import { describe, expect, it } from "vitest";
import { BudgetLedgerService, type LedgerObjectStore } from "../../../src/ledger/budget-ledger-service.ts";
import type { ReserveArgs } from "../../../src/ledger/ledger-client.ts";
import { MemoryLedgerStore } from "../../../src/ledger/ledger-memory-store.ts";
import { DEFAULT_LEASE_MS, DEFAULT_RETENTION_MS, LEDGER_DAY_MS, type ScopeLimits } from "../../../src/ledger/ledger.ts";
import { FakeAlarmStorage } from "../support/fake-alarm-storage.ts";
import { FakeClock } from "../support/fixtures.ts";

/** The memory store with the object's transactions (counted). */
class MemoryObjectStore extends MemoryLedgerStore implements LedgerObjectStore {
  transactions = 0;
  transaction<T>(fn: () => T): T {
    this.transactions++;
    return fn();
  }
}

const usd = (limitMicros: number): ScopeLimits => ({ money: { currency: "USD", limitMicros, periodMs: LEDGER_DAY_MS } });
const args = (limitMicros: number, micros: number, over: Partial<ReserveArgs> = {}): ReserveArgs => ({ scopes: [{ name: "org", limits: usd(limitMicros) }], currency: "USD", amount: { micros, tokens: 0 }, ...over });

describe("BudgetLedgerService", () => {
  const make = (alarmAt: number | null = null) => {
    const store = new MemoryObjectStore();
    const alarm = new FakeAlarmStorage(alarmAt);
    const clock = new FakeClock();
    return { store, alarm, clock, ledger: new BudgetLedgerService(store, alarm, clock) };
  };

  it("arms the alarm at a grant's lease expiry, then remembers it: a later lease costs no alarm read or write", async () => {
    const { alarm, clock, ledger } = make();
    const first = await ledger.reserve("a1", args(1_000, 10, { leaseMs: 600_000 }));
    expect(first).toMatchObject({ ok: true, leaseExpiresAt: clock.now() + 600_000 });
    expect(alarm.log).toEqual(["get", `set ${clock.now() + 600_000}`]);
    await ledger.reserve("a2", args(1_000, 10, { leaseMs: 900_000 }));
    expect(alarm.log).toHaveLength(2);
    await ledger.reserve("a3", args(1_000, 10, { leaseMs: 60_000 }));
    expect(alarm.at).toBe(clock.now() + 60_000);
  });

  it("on a fresh instance reads an earlier alarm once and keeps it", async () => {
    const { alarm, ledger } = make(1);
    await ledger.reserve("a1", args(1_000, 10));
    await ledger.reserve("a2", args(1_000, 10));
    expect(alarm.log).toEqual(["get"]);
    expect(alarm.at).toBe(1);
  });

  it("arms for a refusal's tally to age out, and not at all for an invalid argument", async () => {
    const { alarm, clock, ledger } = make();
    expect(await ledger.reserve("big", args(100, 1_000))).toMatchObject({ ok: false, reason: "money_budget_exceeded" });
    const day = clock.now() - (clock.now() % LEDGER_DAY_MS);
    expect(alarm.at).toBe(day + LEDGER_DAY_MS + DEFAULT_RETENTION_MS + 1);

    const other = make();
    expect(await other.ledger.reserve("bad", "nonsense" as unknown as ReserveArgs)).toMatchObject({ ok: false, reason: "invalid_argument" });
    expect(other.alarm.log).toEqual([]);
  });

  it("decides on its own clock, in one transaction per call", async () => {
    const { store, clock, ledger } = make();
    await ledger.reserve("a1", args(1_000, 10));
    clock.advance(5_000);
    expect(await ledger.settle("a1", { micros: 4, tokens: 0 })).toMatchObject({ ok: true, state: "settled" });
    expect((await ledger.attempt("a1"))?.createdAt).toBe(clock.now() - 5_000);
    expect((await ledger.balance("org")).money).toMatchObject({ spent: 4, held: 0 });
    // reserve: its own and the alarm's next-due read; then settle, attempt, balance.
    expect(store.transactions).toBe(5);
  });

  it("arms for retention after a settlement batch unless a known alarm comes sooner", async () => {
    const { alarm, clock, ledger } = make();
    await ledger.reserve("a1", args(1_000, 10));
    alarm.log.length = 0;
    await ledger.settleBatch([{ op: "settle", attemptId: "a1", actual: { micros: 5, tokens: 0 } }]);
    // The lease's alarm (sooner than the retention) already covers it.
    expect(alarm.log).toEqual([]);
    expect(alarm.at).toBe(clock.now() + DEFAULT_LEASE_MS);
  });

  it("on its alarm moves expired leases to reconciliation and re-arms for what comes next", async () => {
    const { alarm, clock, ledger } = make();
    await ledger.reserve("short", args(1_000, 300, { leaseMs: 60_000 }));
    const long = await ledger.reserve("long", args(1_000, 200, { leaseMs: 3_600_000 }));
    clock.advance(60_000);
    await ledger.alarm();
    expect(await ledger.attempt("short")).toMatchObject({ state: "pending_reconciliation", pendingReason: "lease_expired" });
    expect((await ledger.balance("org")).money).toMatchObject({ held: 500, pending: 300 });
    expect(alarm.at).toBe(long.ok ? long.leaseExpiresAt : -1);
  });

  it("recomputes the alarm when a resolution finishes an attempt", async () => {
    const { alarm, clock, ledger } = make();
    await ledger.reserve("u", args(1_000, 300));
    await ledger.settle("u", "unknown");
    alarm.log.length = 0;
    expect(await ledger.resolve("u", { micros: 100, tokens: 0 }, { actor: "ops", note: "invoice" })).toMatchObject({ ok: true });
    expect(alarm.log).toEqual(["get"]);
    expect(alarm.at).toBe(clock.now() + DEFAULT_LEASE_MS);
  });

  it("refuses an attempt id that is not a string before any transaction", async () => {
    const { store, ledger } = make();
    await expect(ledger.attempt(42 as never)).rejects.toThrow(new RangeError("attemptId must be a string"));
    expect(store.transactions).toBe(0);
  });
});
