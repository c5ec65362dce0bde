import { DurableObject } from "cloudflare:workers";
import type { BudgetLedgerRpc, ReserveArgs } from "../src/ledger/ledger-client.ts";
import { BudgetLedgerCore, type LedgerAmount, type LedgerCounter, type ReleaseResult, type ReserveResult, type ScopeBalance, type ScopeLimits, type SettleResult } from "../src/ledger/ledger.ts";
import { systemClock, type Clock } from "../src/traffic/deps.ts";
import { SqliteLedgerStore } from "./sqlite-ledger-store.ts";

/**
 * BudgetLedger: one instance per financial root, i.e. tenant (`BUDGET_LEDGER.getByName(root)`).
 * A thin RPC shell: the rules are BudgetLedgerCore, tested without this class.
 *
 * Each call reads, checks and writes inside one `transactionSync` with no `await`, so concurrent
 * reservations are serialized and a strict budget admits exactly the work that fits. Decisions use
 * this object's clock, never the caller's.
 *
 * Lease expiry: an alarm is kept at the earliest lease expiry of the held reservations; it moves
 * every expired one to `pending_reconciliation` (never refunds it) and re-arms for the rest.
 * Records are kept: the ledger is the tenant's books.
 */
export class BudgetLedger extends DurableObject<Env> implements BudgetLedgerRpc {
  readonly #store: SqliteLedgerStore;
  readonly #ledger: BudgetLedgerCore;
  readonly #clock: Clock = systemClock;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#store = new SqliteLedgerStore(ctx.storage);
    this.#ledger = new BudgetLedgerCore(this.#store);
  }

  async setLimits(scope: string, limits: ScopeLimits): Promise<void> {
    this.#store.transaction(() => this.#ledger.setLimits(scope, limits));
  }

  async reserve(attemptId: string, args: ReserveArgs): Promise<ReserveResult> {
    const result = this.#store.transaction(() =>
      this.#ledger.reserve(attemptId, { scopes: args?.scopes, currency: args?.currency, amount: args?.amount, now: this.#clock.now(), ...(args?.leaseMs !== undefined ? { leaseMs: args.leaseMs } : {}) }),
    );
    // The decision is committed; arming the alarm after it cannot change it.
    if (result.ok) await this.#arm();
    return result;
  }

  async settle(attemptId: string, actual: LedgerAmount | "unknown"): Promise<SettleResult> {
    return this.#store.transaction(() => this.#ledger.settle(attemptId, actual, this.#clock.now()));
  }

  async release(attemptId: string): Promise<ReleaseResult> {
    return this.#store.transaction(() => this.#ledger.release(attemptId, this.#clock.now()));
  }

  async balance(scope: string): Promise<ScopeBalance> {
    if (typeof scope !== "string") throw new RangeError("scope must be a string");
    return this.#store.transaction(() => this.#ledger.balance(scope, this.#clock.now()));
  }

  async usage(scope: string): Promise<LedgerCounter[]> {
    if (typeof scope !== "string") throw new RangeError("scope must be a string");
    return this.#store.transaction(() => this.#ledger.usage(scope));
  }

  override async alarm(): Promise<void> {
    const next = this.#store.transaction(() => {
      const now = this.#clock.now();
      while (this.#ledger.expireLeases(now) > 0);
      return this.#ledger.nextLeaseExpiry();
    });
    if (next !== undefined) await this.ctx.storage.setAlarm(next);
  }

  /** Keeps the alarm at (or before) the earliest lease expiry. */
  async #arm(): Promise<void> {
    const next = this.#store.transaction(() => this.#ledger.nextLeaseExpiry());
    if (next === undefined) return;
    const current = await this.ctx.storage.getAlarm();
    if (current === null || current > next) await this.ctx.storage.setAlarm(next);
  }
}
