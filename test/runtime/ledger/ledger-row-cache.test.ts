import { env, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { BudgetLedger } from "../../../durable-objects/budget-ledger.ts";
import { SqliteLedgerStore } from "../../../src/ledger/ledger-sqlite-store.ts";
import { LedgerRowCache } from "../../../src/ledger/ledger-row-cache.ts";

describe("LedgerRowCache", () => {
  it("loads a row once, remembers misses too, and starts over past its bound", () => {
    const cache = new LedgerRowCache(3);
    let loads = 0;
    const load = (v: number | undefined) => () => {
      loads++;
      return v;
    };
    expect(cache.get("a", load(1))).toBe(1);
    expect(cache.get("a", load(2))).toBe(1);
    expect(cache.get("missing", load(undefined))).toBeUndefined();
    expect(cache.get("missing", load(7))).toBeUndefined();
    expect(loads).toBe(2);
    cache.set("b", 2);
    expect(cache.size).toBe(3);
    cache.set("c", 3);
    expect(cache.size).toBe(1);
    expect(cache.get("a", load(9))).toBe(9);
  });
});

describe("SqliteLedgerStore with its row cache", () => {
  it("forgets what a rolled-back transaction wrote, and serves committed rows without a SELECT", async () => {
    const stub = env.BUDGET_LEDGER.getByName("org:cache");
    await runInDurableObject(stub, (_i: BudgetLedger, state) => {
      const store = new SqliteLedgerStore(state.storage);
      const row = { scope: "s", metric: "tokens" as const, windowStart: 0, windowEnd: 0, spent: 1, held: 2, pending: 0, overrun: 0 };
      store.transaction(() => store.putCounter(row));
      expect(() =>
        store.transaction(() => {
          store.putCounter({ ...row, spent: 99 });
          throw new Error("books out of balance");
        }),
      ).toThrow(/books/);
      expect(store.transaction(() => store.getCounter("s", "tokens", 0))).toEqual(row);
      // Another writer behind the store's back is not seen: it is the database's only writer.
      state.storage.sql.exec("UPDATE ledger_counters SET spent = 5 WHERE scope = 's'");
      expect(store.transaction(() => store.getCounter("s", "tokens", 0))?.spent).toBe(1);
    });
  });
});
