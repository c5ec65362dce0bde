import { DurableObject } from "cloudflare:workers";
import type { BudgetLedgerRpc, ReserveArgs } from "../src/ledger/ledger-client.ts";
import {
  BudgetLedgerCore,
  type AttemptRecord,
  type AttemptState,
  type AuditRecord,
  type LedgerActor,
  type LedgerAmount,
  type LedgerCounter,
  type ReleaseResult,
  type ReserveResult,
  type ResolveResult,
  type ScopeBalance,
  type ScopeLimits,
  type ScopeLimitsView,
  type SettleDetail,
  type SettleResult,
  type TopUpAmount,
  type TopUpBy,
  type TopUpResult,
  type UsageRow,
} from "../src/ledger/ledger.ts";
import { systemClock, type Clock } from "../src/deps/clock.ts";
import { SqliteLedgerStore } from "./sqlite-ledger-store.ts";

/**
 * BudgetLedger: one instance per financial root, i.e. tenant (`BUDGET_LEDGER.getByName(root)`), or
 * per stripe of a hot one (`${root}#${i}`, see ledger-client.ts). A thin RPC shell: the rules are
 * BudgetLedgerCore, tested without this class, and so is the checking of every RPC argument (a
 * RangeError naming the bad field).
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
  /**
   * When the alarm is known to fire at or before this object's earliest lease, as last set by
   * this instance; undefined when unknown (a fresh instance, or while the alarm runs).
   */
  #alarmAt: number | undefined;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#store = new SqliteLedgerStore(ctx.storage);
    this.#ledger = new BudgetLedgerCore(this.#store);
  }

  async setLimits(scope: string, limits: ScopeLimits | null, by?: LedgerActor): Promise<void> {
    this.#store.transaction(() => this.#ledger.setLimits(scope, limits, this.#clock.now(), by));
  }

  async limits(scope: string): Promise<ScopeLimitsView> {
    return this.#store.transaction(() => this.#ledger.limits(scope));
  }

  async reserve(attemptId: string, args: ReserveArgs): Promise<ReserveResult> {
    if (args === null || typeof args !== "object") throw new RangeError("invalid ledger reservation: args must be an object");
    const result = this.#store.transaction(() => this.#ledger.reserve(attemptId, { ...args, now: this.#clock.now() }));
    // The decision is committed; arming the alarm after it cannot change it.
    if (result.ok) await this.#arm(result.leaseExpiresAt);
    return result;
  }

  async settle(attemptId: string, actual: LedgerAmount | "unknown", detail?: SettleDetail): Promise<SettleResult> {
    return this.#store.transaction(() => this.#ledger.settle(attemptId, actual, this.#clock.now(), detail));
  }

  async release(attemptId: string): Promise<ReleaseResult> {
    return this.#store.transaction(() => this.#ledger.release(attemptId, this.#clock.now()));
  }

  async balance(scope: string): Promise<ScopeBalance> {
    return this.#store.transaction(() => this.#ledger.balance(scope, this.#clock.now()));
  }

  async usage(scope: string): Promise<LedgerCounter[]> {
    return this.#store.transaction(() => this.#ledger.usage(scope));
  }

  async topUp(scope: string, amount: TopUpAmount, by: TopUpBy): Promise<TopUpResult> {
    return this.#store.transaction(() => this.#ledger.topUp(scope, amount, by, this.#clock.now()));
  }

  async attempt(attemptId: string): Promise<AttemptRecord | undefined> {
    if (typeof attemptId !== "string") throw new RangeError("attemptId must be a string");
    return this.#store.transaction(() => this.#ledger.attempt(attemptId));
  }

  async attemptsIn(state: AttemptState, limit: number, afterAttemptId?: string): Promise<AttemptRecord[]> {
    return this.#store.transaction(() => this.#ledger.attemptsIn(state, limit, afterAttemptId));
  }

  async pendingReconciliations(limit: number, afterAttemptId?: string): Promise<AttemptRecord[]> {
    return this.#store.transaction(() => this.#ledger.pendingReconciliations(limit, afterAttemptId));
  }

  async resolve(attemptId: string, actual: LedgerAmount, by: LedgerActor): Promise<ResolveResult> {
    return this.#store.transaction(() => this.#ledger.resolve(attemptId, actual, by, this.#clock.now()));
  }

  async audit(limit: number, afterSeq?: number): Promise<AuditRecord[]> {
    return this.#store.transaction(() => this.#ledger.audit(limit, afterSeq));
  }

  async usageReport(scope: string, fromMs: number, toMs: number): Promise<UsageRow[]> {
    return this.#store.transaction(() => this.#ledger.usageReport(scope, fromMs, toMs));
  }

  override async alarm(): Promise<void> {
    this.#alarmAt = undefined;
    const next = this.#store.transaction(() => {
      const now = this.#clock.now();
      while (this.#ledger.expireLeases(now) > 0);
      return this.#ledger.nextLeaseExpiry();
    });
    if (next !== undefined) await this.#setAlarm(next);
  }

  /**
   * Keeps the alarm at (or before) the earliest lease expiry. Leases of one object mostly grow
   * with time, so a known earlier alarm settles it without a storage read: the common
   * reservation costs no alarm work at all.
   */
  async #arm(leaseExpiresAt: number): Promise<void> {
    if (this.#alarmAt !== undefined && this.#alarmAt <= leaseExpiresAt) return;
    const next = this.#store.transaction(() => this.#ledger.nextLeaseExpiry());
    if (next === undefined) return;
    const current = await this.ctx.storage.getAlarm();
    if (current === null || current > next) await this.#setAlarm(next);
    else this.#alarmAt = current;
  }

  async #setAlarm(at: number): Promise<void> {
    await this.ctx.storage.setAlarm(at);
    this.#alarmAt = at;
  }
}
