import type { AlarmStorage } from "../deps/alarm-storage.ts";
import type { Clock } from "../deps/clock.ts";
import type { BudgetLedgerRpc, ReserveArgs } from "./ledger-client.ts";
import { LeaseRules } from "./ledger-leases.ts";
import {
  BudgetLedgerCore,
  type AcquireResult,
  type AttemptRecord,
  type AttemptState,
  type AuditRecord,
  type LeaseAsk,
  type LeaseResult,
  type LedgerActor,
  type LedgerAmount,
  type LedgerCounter,
  type LedgerStore,
  type RefusalTally,
  type ReleaseResult,
  type ReserveRequest,
  type ReserveResult,
  type ResolveResult,
  type ScopeBalance,
  type ScopeLimits,
  type ScopeLimitsView,
  type SettleDetail,
  type SettleResult,
  type SettlementItem,
  type SettlementItemResult,
  type TopUpAmount,
  type TopUpBy,
  type TopUpResult,
  type UsageReport,
  type ScopeSpend,
  type UsageRollup,
} from "./ledger.ts";

/** A {@link LedgerStore} with atomic transactions (`SqliteLedgerStore`: one `transactionSync`). */
export interface LedgerObjectStore extends LedgerStore {
  /** Runs `fn` atomically: it must not await, so no other call interleaves. */
  transaction<T>(fn: () => T): T;
}

/** RPC arguments with the decision's time; anything but an object is left for the ledger to answer as invalid. */
function withNow(args: ReserveArgs, now: number): ReserveRequest {
  return (args !== null && typeof args === "object" ? { ...args, now } : args) as ReserveRequest;
}

/**
 * What the BudgetLedger object serves over RPC and runs on its alarm, runnable without it: the
 * rules (BudgetLedgerCore, LeaseRules) run inside one transaction per call, on this service's
 * clock, never the caller's; the checking of every RPC argument is the rules' own.
 *
 * One alarm serves lease expiry and retention: it is kept at the earliest of the next lease
 * expiry and the moment retention next has work. It moves every expired lease to
 * `pending_reconciliation` (never refunds it), then runs one bounded retention batch in its own
 * transaction, and re-arms: at once while retention has more, else for what comes next. The
 * service remembers the alarm it set, so the common reservation costs no alarm work.
 */
export class BudgetLedgerService implements BudgetLedgerRpc {
  readonly #store: LedgerObjectStore;
  readonly #ledger: BudgetLedgerCore;
  readonly #leases: LeaseRules;
  readonly #alarm: AlarmStorage;
  readonly #clock: Clock;
  /**
   * When the alarm is known to fire at or before this object's earliest lease, as last set by
   * this instance; undefined when unknown (a fresh instance, or while the alarm runs).
   */
  #alarmAt: number | undefined;

  constructor(store: LedgerObjectStore, alarm: AlarmStorage, clock: Clock) {
    this.#store = store;
    this.#ledger = new BudgetLedgerCore(store);
    this.#leases = new LeaseRules(store, this.#ledger);
    this.#alarm = alarm;
    this.#clock = clock;
  }

  async setLimits(scope: string, limits: ScopeLimits | null, by?: LedgerActor): Promise<void> {
    this.#store.transaction(() => this.#ledger.setLimits(scope, limits, this.#clock.now(), by));
  }

  async limits(scope: string): Promise<ScopeLimitsView> {
    return this.#store.transaction(() => this.#ledger.limits(scope));
  }

  async reserve(attemptId: string, args: ReserveArgs): Promise<ReserveResult> {
    const now = this.#clock.now();
    const req = withNow(args, now);
    const [result, wake] = this.#store.transaction(() => {
      const r = this.#ledger.reserve(attemptId, req);
      return [r, this.#ledger.wakeFor(r, now)] as const;
    });
    // The decision is committed; arming the alarm after it cannot change it.
    if (wake !== undefined) await this.#arm(wake);
    return result;
  }

  async acquire(attemptId: string, args: ReserveArgs, lease: LeaseAsk): Promise<AcquireResult> {
    const now = this.#clock.now();
    const req = withNow(args, now);
    const [result, wake] = this.#store.transaction(() => {
      const r = this.#leases.acquire(attemptId, req, lease);
      return [r, "lease" in r ? r.lease.leaseExpiresAt : this.#ledger.wakeFor(r.reserved, now)] as const;
    });
    if (wake !== undefined) await this.#arm(wake);
    return result;
  }

  async lease(args: ReserveArgs, ask: LeaseAsk): Promise<LeaseResult> {
    const now = this.#clock.now();
    const req = withNow(args, now);
    const r = this.#store.transaction(() => this.#leases.lease(ask?.leaseId, { ...req, slices: ask?.slices, admitMs: ask?.admitMs }));
    if (r.ok) await this.#arm(r.leaseExpiresAt);
    return r;
  }

  async settleBatch(items: readonly SettlementItem[]): Promise<SettlementItemResult[]> {
    const now = this.#clock.now();
    const results = this.#store.transaction(() => this.#leases.apply(items, now));
    // Finished attempts become due for retention; an alarm already set for sooner covers it.
    await this.#arm(now + this.#ledger.retention() + 1);
    return results;
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
    const result = this.#store.transaction(() => this.#ledger.resolve(attemptId, actual, by, this.#clock.now()));
    // A resolved attempt is finished: retention may be due for it sooner than the alarm.
    if (result.ok) await this.#arm();
    return result;
  }

  async audit(limit: number, afterSeq?: number): Promise<AuditRecord[]> {
    return this.#store.transaction(() => this.#ledger.audit(limit, afterSeq));
  }

  async usageReport(scope: string, fromMs: number, toMs: number): Promise<UsageReport> {
    return this.#store.transaction(() => this.#ledger.usageReport(scope, fromMs, toMs));
  }

  async dailyUsage(scope: string, fromMs: number, toMs: number): Promise<UsageRollup[]> {
    return this.#store.transaction(() => this.#ledger.dailyUsage(scope, fromMs, toMs));
  }

  async spendByScope(fromMs: number, toMs: number): Promise<ScopeSpend[]> {
    return this.#store.transaction(() => this.#ledger.spendByScope(fromMs, toMs));
  }

  async refusals(scope: string, fromMs: number, toMs: number): Promise<RefusalTally[]> {
    return this.#store.transaction(() => this.#ledger.refusals(scope, fromMs, toMs));
  }

  /** Expires leases, runs one retention batch and re-arms (see the class comment). */
  async alarm(): Promise<void> {
    this.#alarmAt = undefined;
    const now = this.#clock.now();
    this.#store.transaction(() => {
      while (this.#ledger.expireLeases(now) > 0);
    });
    const { more } = this.#store.transaction(() => this.#ledger.retain(now));
    const next = more ? now : this.#store.transaction(() => this.#ledger.nextAlarm());
    if (next !== undefined) await this.#setAlarm(next);
  }

  /**
   * Keeps the alarm at (or before) the next thing due: a lease expiry or retention work. `due` is
   * when the call's own work falls due (a lease, a refusal tally's age-out); a known alarm at or
   * before it settles it without a storage read, so the common reservation costs no alarm work.
   * Without `due`, the alarm is recomputed.
   */
  async #arm(due?: number): Promise<void> {
    if (due !== undefined && this.#alarmAt !== undefined && this.#alarmAt <= due) return;
    const next = this.#store.transaction(() => this.#ledger.nextAlarm());
    if (next === undefined) return;
    const current = await this.#alarm.getAlarm();
    if (current === null || current > next) await this.#setAlarm(next);
    else this.#alarmAt = current;
  }

  async #setAlarm(at: number): Promise<void> {
    await this.#alarm.setAlarm(at);
    this.#alarmAt = at;
  }
}
