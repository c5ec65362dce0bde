import { DurableObject } from "cloudflare:workers";
import { BudgetLedgerService } from "../src/ledger/budget-ledger-service.ts";
import type { BudgetLedgerRpc, ReserveArgs } from "../src/ledger/ledger-client.ts";
import type {
  AcquireResult,
  AttemptRecord,
  AttemptState,
  AuditRecord,
  LeaseAsk,
  LeaseResult,
  LedgerActor,
  LedgerAmount,
  LedgerCounter,
  RefusalTally,
  ReleaseResult,
  ReserveResult,
  ResolveResult,
  ScopeBalance,
  ScopeLimits,
  ScopeLimitsView,
  SettleDetail,
  SettleResult,
  SettlementItem,
  SettlementItemResult,
  TopUpAmount,
  TopUpBy,
  TopUpResult,
  UsageReport,
  ScopeSpend,
  UsageRollup,
} from "../src/ledger/ledger.ts";
import { systemClock } from "../src/deps/clock.ts";
import { SqliteLedgerStore } from "../src/ledger/ledger-sqlite-store.ts";

/**
 * BudgetLedger: one instance per financial root, i.e. tenant (`BUDGET_LEDGER.getByName(root)`), or
 * per stripe of a hot one (`${root}#${i}`, see ledger-client.ts). A thin RPC shell: what it serves
 * is BudgetLedgerService over the rules of BudgetLedgerCore, tested without this class, and so is
 * the checking of every RPC argument (`invalid_argument` answers on the request path, RangeErrors
 * on the admin path).
 *
 * Each call reads, checks and writes inside one `transactionSync` with no `await`, so concurrent
 * reservations are serialized and a strict budget admits exactly the work that fits. Decisions use
 * this object's clock, never the caller's.
 *
 * One alarm serves lease expiry and retention: it is kept at the earliest of the next lease
 * expiry and the moment retention next has work. It moves every expired lease to
 * `pending_reconciliation` (never refunds it), then runs one bounded retention batch in its own
 * transaction, and re-arms: at once while retention has more, else for what comes next.
 */
export class BudgetLedger extends DurableObject<Env> implements BudgetLedgerRpc {
  readonly #ledger: BudgetLedgerService;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#ledger = new BudgetLedgerService(new SqliteLedgerStore(ctx.storage), ctx.storage, systemClock);
  }

  async setLimits(scope: string, limits: ScopeLimits | null, by?: LedgerActor): Promise<void> {
    await this.#ledger.setLimits(scope, limits, by);
  }

  async limits(scope: string): Promise<ScopeLimitsView> {
    return this.#ledger.limits(scope);
  }

  async reserve(attemptId: string, args: ReserveArgs): Promise<ReserveResult> {
    return this.#ledger.reserve(attemptId, args);
  }

  async acquire(attemptId: string, args: ReserveArgs, lease: LeaseAsk): Promise<AcquireResult> {
    return this.#ledger.acquire(attemptId, args, lease);
  }

  async lease(args: ReserveArgs, ask: LeaseAsk): Promise<LeaseResult> {
    return this.#ledger.lease(args, ask);
  }

  async settleBatch(items: readonly SettlementItem[]): Promise<SettlementItemResult[]> {
    return this.#ledger.settleBatch(items);
  }

  async settle(attemptId: string, actual: LedgerAmount | "unknown", detail?: SettleDetail): Promise<SettleResult> {
    return this.#ledger.settle(attemptId, actual, detail);
  }

  async release(attemptId: string): Promise<ReleaseResult> {
    return this.#ledger.release(attemptId);
  }

  async balance(scope: string): Promise<ScopeBalance> {
    return this.#ledger.balance(scope);
  }

  async usage(scope: string): Promise<LedgerCounter[]> {
    return this.#ledger.usage(scope);
  }

  async topUp(scope: string, amount: TopUpAmount, by: TopUpBy): Promise<TopUpResult> {
    return this.#ledger.topUp(scope, amount, by);
  }

  async attempt(attemptId: string): Promise<AttemptRecord | undefined> {
    return this.#ledger.attempt(attemptId);
  }

  async attemptsIn(state: AttemptState, limit: number, afterAttemptId?: string): Promise<AttemptRecord[]> {
    return this.#ledger.attemptsIn(state, limit, afterAttemptId);
  }

  async pendingReconciliations(limit: number, afterAttemptId?: string): Promise<AttemptRecord[]> {
    return this.#ledger.pendingReconciliations(limit, afterAttemptId);
  }

  async resolve(attemptId: string, actual: LedgerAmount, by: LedgerActor): Promise<ResolveResult> {
    return this.#ledger.resolve(attemptId, actual, by);
  }

  async audit(limit: number, afterSeq?: number): Promise<AuditRecord[]> {
    return this.#ledger.audit(limit, afterSeq);
  }

  async usageReport(scope: string, fromMs: number, toMs: number): Promise<UsageReport> {
    return this.#ledger.usageReport(scope, fromMs, toMs);
  }

  async dailyUsage(scope: string, fromMs: number, toMs: number): Promise<UsageRollup[]> {
    return this.#ledger.dailyUsage(scope, fromMs, toMs);
  }

  async spendByScope(fromMs: number, toMs: number): Promise<ScopeSpend[]> {
    return this.#ledger.spendByScope(fromMs, toMs);
  }

  async refusals(scope: string, fromMs: number, toMs: number): Promise<RefusalTally[]> {
    return this.#ledger.refusals(scope, fromMs, toMs);
  }

  override async alarm(): Promise<void> {
    await this.#ledger.alarm();
  }
}
