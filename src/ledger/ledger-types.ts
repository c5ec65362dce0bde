/**
 * The strict budget ledger's data: limits, requests, answers, records and the storage contract.
 * Plain data only (every value crosses RPC and is stored as JSON). The rules are in `ledger.ts`.
 */

/** Largest single amount (micro-units or tokens) and largest limit the ledger accepts: 2^50. */
export const MAX_LEDGER_AMOUNT = 2 ** 50;
/** Largest total a prepaid balance may be credited (the sum of its top-ups): 2^52, still exact. */
export const MAX_LEDGER_CREDIT = 2 ** 52;
/** Largest request rate (`perMinute`) and bucket size (`burst`): 2^30. */
export const MAX_REQUEST_RATE = 2 ** 30;
/**
 * Bucket units per request token. Refilling `perMinute` tokens a minute adds exactly `perMinute`
 * units a millisecond, so a bucket's level stays an exact integer at any elapsed time.
 */
export const BUCKET_UNITS_PER_TOKEN = 60_000;
/** Longest scope path. */
export const MAX_SCOPE_DEPTH = 8;
/** Longest scope name, attempt id, op id, actor and metadata string. */
export const MAX_LEDGER_KEY_LENGTH = 256;
/** Longest admin note. */
export const MAX_NOTE_LENGTH = 1_024;
/** Most entries in a settlement's usage breakdown. */
export const MAX_USAGE_ENTRIES = 32;
/** Largest page of `pendingReconciliations` and `audit`. */
export const MAX_LEDGER_PAGE = 1_000;
/**
 * Most attempts one `usageReport` scans (the earliest created in its range), which bounds its cost
 * in the request-serving object; a busier range must be asked for in shorter pieces.
 */
export const USAGE_REPORT_MAX_ATTEMPTS = 10_000;
/** Default time a reservation is held before its lease expires into reconciliation. */
export const DEFAULT_LEASE_MS = 10 * 60_000;
/** Longest lease a reservation may ask for. */
export const MAX_LEASE_MS = 24 * 60 * 60_000;
/** One UTC day: the bucket of usage rollups and refusal tallies. */
export const LEDGER_DAY_MS = 24 * 60 * 60_000;
/** How long finished attempts, closed counters and refusal tallies are kept when no retention was given. */
export const DEFAULT_RETENTION_MS = 30 * LEDGER_DAY_MS;
/**
 * Shortest retention: seven times the longest lease, so no settlement the gateway can still send
 * (it settles within the lease, and a lease-expired attempt is never removed) finds its attempt gone.
 */
export const MIN_RETENTION_MS = 7 * MAX_LEASE_MS;
/** Longest retention (about ten years). */
export const MAX_RETENTION_MS = 3_650 * LEDGER_DAY_MS;
/** How long daily usage rollups are kept when no history was given. */
export const DEFAULT_HISTORY_MS = 90 * LEDGER_DAY_MS;
/** Longest usage history (about ten years, like the retention). */
export const MAX_HISTORY_MS = 3_650 * LEDGER_DAY_MS;
/** Most rows one retention run removes; more is left for the next run. */
export const RETENTION_BATCH = 500;

/** Scope names, root first. */
export type ScopePath = readonly string[];

/** A strict money budget per period. */
export interface MoneyLimit {
  /** ISO 4217 code, e.g. `"USD"`. */
  readonly currency: string;
  /** Budget per period in integer micro-units of `currency` (1 USD = 1_000_000). */
  readonly limitMicros: number;
  /** Period length, ms (integer > 0). */
  readonly periodMs: number;
}

/** A token limit per window. */
export interface TokenLimit {
  readonly limit: number;
  /** Window length, ms (integer > 0). */
  readonly windowMs: number;
}

/**
 * A request-rate token bucket: refills `perMinute` tokens a minute continuously, holds at most
 * `burst`. Configured values are positive integers; the ledger also accepts 0, which is what a
 * stripe's share of a limit smaller than the stripe count comes to (it admits no counted request).
 */
export interface RequestLimit {
  readonly perMinute: number;
  readonly burst: number;
}

/** A prepaid balance (not periodic): admitted while `spent + held + amount <= credited`. */
export interface BalanceLimit {
  /** ISO 4217 code of the balance; top-ups in other currencies do not count for it. */
  readonly currency: string;
}

/** A scope's limits; every one is optional (a scope without a limit for a metric is unlimited). */
export interface ScopeLimits {
  readonly money?: MoneyLimit;
  readonly tokens?: TokenLimit;
  readonly requests?: RequestLimit;
  readonly balance?: BalanceLimit;
}

/** A scope on a reservation's path, with the limits its configuration gives it. */
export interface ScopeRef {
  readonly name: string;
  /** The configured limits; omitted means none configured. An admin override takes precedence. */
  readonly limits?: ScopeLimits;
}

/** A scope's limits as stored: `effective` is `override ?? configured ?? {}`. */
export interface ScopeLimitsView {
  /** The limits the request path last passed in a {@link ScopeRef}. */
  readonly configured?: ScopeLimits;
  /** The admin override set by `setLimits`. */
  readonly override?: ScopeLimits;
  readonly effective: ScopeLimits;
}

/** A priced worst case (reserve) or an actual cost (settle). */
export interface LedgerAmount {
  readonly micros: number;
  readonly tokens: number;
}

/** What the gateway knows about an attempt, kept on its record for reports. */
export interface AttemptMeta {
  readonly requestId?: string;
  readonly model?: string;
  readonly priceVersion?: string;
}

/** One reservation: the priced worst case of one attempt, charged to every scope of its path. */
export interface ReserveRequest {
  /** Root first; every scope on the path is checked and charged. */
  readonly scopes: readonly ScopeRef[];
  /** Currency of `amount.micros`. */
  readonly currency: string;
  /** The priced worst case. */
  readonly amount: LedgerAmount;
  /** Now, epoch ms (the ledger's clock). */
  readonly now: number;
  /** How long the reservation may stay held unsettled, ms; {@link DEFAULT_LEASE_MS} when omitted. */
  readonly leaseMs?: number;
  /** Takes one request token from every scope with a `requests` limit; retries pass false. */
  readonly countsRequest?: boolean;
  readonly meta?: AttemptMeta;
  /**
   * The retention of this ledger object (ms, {@link MIN_RETENTION_MS}..{@link MAX_RETENTION_MS});
   * stored when it differs from the stored one. Omitted: the stored one stays
   * ({@link DEFAULT_RETENTION_MS} when none was ever given).
   */
  readonly retentionMs?: number;
  /**
   * How long this ledger object keeps its daily usage rollups (ms, whole UTC days,
   * {@link LEDGER_DAY_MS}..{@link MAX_HISTORY_MS}); stored when it differs from the stored one.
   * Omitted: the stored one stays ({@link DEFAULT_HISTORY_MS} when none was ever given). They are
   * never removed before the retention has passed, whatever this says.
   */
  readonly historyMs?: number;
}

/** A metric a counter tracks: periodic money in one currency, tokens, a prepaid balance, or request tokens. */
export type LedgerMetric = `money:${string}` | "tokens" | `balance:${string}` | "requests";

/** One counter: a scope's usage of one metric in one period/window. */
export interface LedgerCounter {
  readonly scope: string;
  readonly metric: LedgerMetric;
  /** Start of the period/window (epoch ms); 0 for a lifetime counter (unlimited metric, prepaid balance). */
  readonly windowStart: number;
  /**
   * End of the period/window (epoch ms); 0 for a lifetime counter, and for a counter booked before
   * window ends were recorded whose period could not be recovered. Retention removes a counter only
   * once its window has ended (and it holds nothing); a 0 is never removed.
   */
  readonly windowEnd: number;
  /** Actual usage settled (overruns included). */
  readonly spent: number;
  /** Reservations not yet settled, pending reconciliation included. */
  readonly held: number;
  /** The part of `held` that is pending reconciliation. */
  readonly pending: number;
  /** The part of `spent` above its reservations. */
  readonly overrun: number;
}

/** One counter an attempt charged, and how much it reserved there. */
export interface LedgerCharge {
  readonly scope: string;
  readonly metric: LedgerMetric;
  readonly windowStart: number;
  /** The counter's window end (0: lifetime); absent on records booked before window ends were recorded. */
  readonly windowEnd?: number;
  readonly reserved: number;
}

/** A scope's request bucket, in {@link BUCKET_UNITS_PER_TOKEN} units, as of `at` (epoch ms). */
export interface BucketState {
  readonly scope: string;
  readonly units: number;
  readonly at: number;
}

/**
 * Where an admitted attempt is in its life (see the module comment of `ledger.ts`). A refused
 * reservation has no state: it leaves no attempt record, only a count in its scope's refusal tally.
 */
export type AttemptState = "held" | "settled" | "pending_reconciliation" | "released";
/** Why an attempt is pending reconciliation: usage settled as unknown, or the lease expired unsettled. */
export type PendingReason = "unknown_usage" | "lease_expired";

/** Why `reserve` refused: the limit (or balance, or bucket) that does not cover the attempt. */
export type RefusalReason = "money_budget_exceeded" | "token_limit_exceeded" | "currency_mismatch" | "request_rate_exceeded" | "balance_exhausted";

/** What one limit of one scope has left after a granted reservation. */
export interface LimitRemaining {
  readonly scope: string;
  readonly metric: LedgerMetric;
  /** Micro-units or tokens under the limit (prepaid: under the credit); whole request tokens in the bucket. */
  readonly remaining: number;
}

/** A granted reservation: the attempt is held until settled, released or its lease expires. */
export interface ReserveGrant {
  readonly ok: true;
  readonly attemptId: string;
  readonly leaseExpiresAt: number;
  /** Every limit on the path, root first, after this reservation (of this ledger object: a stripe's share). */
  readonly remaining?: readonly LimitRemaining[];
}

/** A refused reservation: nothing was charged, and nothing is kept of it but its scope's refusal tally. */
export interface ReserveRefusal {
  readonly ok: false;
  readonly attemptId: string;
  readonly reason: RefusalReason;
  /** The narrowest failing scope. */
  readonly scope: string;
  readonly metric: LedgerMetric;
  /**
   * The limit and what was already used of it: spent + held in the current period/window, or
   * of the prepaid balance (limit = credited); for requests, the burst and the tokens taken.
   */
  readonly limit: number;
  readonly used: number;
  readonly requested: number;
  /**
   * Until the period/window ends, or until one request token is available (ms). Absent for a
   * currency mismatch, an exhausted balance and a bucket that never refills.
   */
  readonly retryAfterMs?: number;
}

/**
 * A request-path call (`reserve`, `settle`, `release`) the ledger did not read because an argument
 * is malformed: nothing was read or written. It is the caller's bug, answered as a result so that
 * no caller has to recognise an error by its class or text across RPC.
 */
export interface LedgerInvalidArgument {
  readonly ok: false;
  /** The attempt id as given (empty when it is not a string; cut to 256 chars). */
  readonly attemptId: string;
  readonly reason: "invalid_argument";
  /** Names every bad field. */
  readonly message: string;
}

/** The answer of `reserve`: granted with its lease, refused at the narrowest failing scope, or invalid. */
export type ReserveResult = ReserveGrant | ReserveRefusal | LedgerInvalidArgument;

/** What settle may record besides the actual cost. */
export interface SettleDetail {
  /** The gateway's estimate when usage is unknown; recorded only, it does not change what is held. */
  readonly estimate?: LedgerAmount;
  /** The token breakdown the provider reported (non-negative integers by kind). */
  readonly usage?: Readonly<Record<string, number>>;
}

/** Who did an admin act. */
export interface LedgerActor {
  readonly actor: string;
  readonly note?: string;
}

/** How an attempt was settled (or resolved). */
export interface Settlement extends SettleDetail {
  /** The actual cost, or `"unknown"` when the usage was not reported. */
  readonly actual: LedgerAmount | "unknown";
  /** Actual above the reservation (0 when none or unknown). */
  readonly overrun: LedgerAmount;
  readonly settledAt: number;
  /** Set when reconciliation resolved the attempt. */
  readonly resolvedBy?: LedgerActor & { readonly at: number };
}

/**
 * The answer of `settle`; a repeated settle returns the first answer. `unknown_attempt`: this
 * object never admitted the id, or the attempt was finished and removed by retention.
 */
export type SettleResult =
  | { readonly ok: true; readonly attemptId: string; readonly state: "settled" | "pending_reconciliation"; readonly settlement: Settlement }
  | { readonly ok: false; readonly attemptId: string; readonly reason: "unknown_attempt" | "conflict"; readonly state?: AttemptState }
  | LedgerInvalidArgument;

/** The answer of `release`; a repeated release returns the first answer. `unknown_attempt` as for settle. */
export type ReleaseResult =
  | { readonly ok: true; readonly attemptId: string; readonly state: "released"; readonly releasedAt: number }
  | { readonly ok: false; readonly attemptId: string; readonly reason: "unknown_attempt" | "conflict"; readonly state?: AttemptState }
  | LedgerInvalidArgument;

/** The answer of `resolve`: only an attempt pending reconciliation can be resolved; a repeat returns the first answer. */
export type ResolveResult =
  | { readonly ok: true; readonly attemptId: string; readonly state: "settled"; readonly settlement: Settlement }
  | { readonly ok: false; readonly attemptId: string; readonly reason: "unknown_attempt" | "not_pending"; readonly state?: AttemptState };

/** One attempt's persisted record: plain data. */
export interface AttemptRecord {
  readonly attemptId: string;
  readonly state: AttemptState;
  /** Scope names, root first. */
  readonly scopes: ScopePath;
  readonly currency: string;
  readonly amount: LedgerAmount;
  /** The counters it holds or held; empty on a finished attempt reported from a lease (it books nothing more). */
  readonly charges: readonly LedgerCharge[];
  readonly createdAt: number;
  /** Epoch ms; meaningful while `held`. */
  readonly leaseExpiresAt: number;
  /** The `reserve` answer, returned again to a repeated reserve. */
  readonly result: ReserveGrant;
  readonly meta?: AttemptMeta;
  readonly pendingReason?: PendingReason;
  readonly settlement?: Settlement;
  readonly releasedAt?: number;
  /** Set on a budget lease's own record: the slice as granted (its `amount` and charges are what is left of it). */
  readonly lease?: LeaseTerms;
  /** Set on an attempt an isolate admitted from a lease: the lease's id. */
  readonly fromLease?: string;
}

/** Most worst cases one lease may ask for. */
export const MAX_LEASE_SLICES = 4_096;

/**
 * What a budget lease's record holds besides an attempt's fields. A lease is a slice of every
 * scope on one path, held like a reservation, from which one isolate admits attempts locally
 * (see `ledger-leases.ts`).
 */
export interface LeaseTerms {
  /** The slice as granted. */
  readonly granted: LedgerAmount;
  /** Request tokens taken from every limited bucket on the path; -1 when no scope on it limits requests. */
  readonly requests: number;
  /** Until when the holder may admit attempts from it (epoch ms). */
  readonly admitUntil: number;
  /** When its holder closed it (every attempt admitted from it reported, the rest returned). */
  readonly closedAt?: number;
}

/** A lease asked for: the attempt's reservation, and how many such worst cases the slice should hold. */
export interface LeaseRequest extends ReserveRequest {
  /** The slice: `slices` times `amount` (2..{@link MAX_LEASE_SLICES}); less is granted nearer a limit. */
  readonly slices: number;
  /** How long the holder may admit from the slice, ms (at most the lease). */
  readonly admitMs: number;
}

/** A granted lease. */
export interface LeaseGrant {
  readonly ok: true;
  readonly leaseId: string;
  /** The slice held: a whole number of the asked worst cases, at least two. */
  readonly amount: LedgerAmount;
  /** Request tokens taken from every limited bucket of the path; -1 when none limits requests. */
  readonly requests: number;
  readonly leaseExpiresAt: number;
  readonly admitUntil: number;
  /** Every limit on the path, root first, after the slice is held. */
  readonly remaining: readonly LimitRemaining[];
}

/**
 * The answer of `lease`. `near_limit`: what remains on some limit of the path cannot hold two
 * worst cases and leave as much again for others, so nothing was written and attempts on this
 * path reserve one by one.
 */
export type LeaseResult = LeaseGrant | { readonly ok: false; readonly leaseId: string; readonly reason: "near_limit" } | LedgerInvalidArgument;

/** What `acquire` asks for beside the attempt's reservation: a lease for its path. */
export interface LeaseAsk {
  readonly leaseId: string;
  /** How many of the attempt's worst case the slice should hold. */
  readonly slices: number;
  readonly admitMs: number;
}

/** The answer of `acquire`: a lease to admit the attempt from, or the attempt's own reservation (near a limit). */
export type AcquireResult = { readonly lease: LeaseGrant } | { readonly reserved: ReserveResult };

/** How an attempt admitted from a lease used it. */
export interface LeaseUse {
  readonly leaseId: string;
  /** The attempt's worst case, as taken from the slice. */
  readonly amount: LedgerAmount;
  /** When the isolate admitted it (epoch ms; kept within the lease's life). */
  readonly admittedAt: number;
  readonly meta?: AttemptMeta;
}

/** One entry of a settlement batch, applied in order in one transaction. */
export type SettlementItem =
  | { readonly op: "settle"; readonly attemptId: string; readonly actual: LedgerAmount | "unknown"; readonly detail?: SettleDetail; readonly lease?: LeaseUse }
  | { readonly op: "release"; readonly attemptId: string; readonly lease?: LeaseUse }
  /** Every attempt admitted from the lease is in this batch or an earlier one: return what is left. */
  | { readonly op: "close"; readonly leaseId: string; readonly unusedRequests: number };

/** The answer of a `close`: what went back (a repeat returns nothing more). */
export type CloseResult =
  | { readonly ok: true; readonly leaseId: string; readonly state: "released"; readonly returned: LedgerAmount }
  | { readonly ok: false; readonly leaseId: string; readonly reason: "unknown_lease" }
  | LedgerInvalidArgument;

/** The answer of one {@link SettlementItem}, in the batch's order. */
export type SettlementItemResult = SettleResult | ReleaseResult | CloseResult;

/** A top-up of a prepaid balance. */
export interface TopUpAmount {
  readonly currency: string;
  /** Integer micro-units, at least 1. */
  readonly micros: number;
}

/** Who tops up, under which idempotency key. */
export interface TopUpBy extends LedgerActor {
  /** A repeated `opId` returns the first answer and changes nothing. */
  readonly opId: string;
}

/** The answer of `topUp` (the first answer again for a repeated op id). */
export interface TopUpResult {
  readonly ok: true;
  readonly opId: string;
  /** The balance's total credit (sum of its top-ups) after this top-up. */
  readonly credited: number;
}

/** A stored top-up: the idempotency record of its `opId`. */
export interface TopUpRecord extends TopUpAmount {
  readonly opId: string;
  readonly scope: string;
  readonly credited: number;
  readonly at: number;
  readonly actor: string;
  readonly note?: string;
}

/** What every audit record has. */
export interface AuditBase {
  /** 1, 2, 3, … in the order the acts happened. */
  readonly seq: number;
  readonly at: number;
  readonly actor: string;
  /** The scope acted on (top-ups, limits). */
  readonly scope?: string;
  /** The attempt acted on (resolutions). */
  readonly attemptId?: string;
}

/** A prepaid balance was credited. */
export interface TopUpAudit extends AuditBase {
  readonly action: "top_up";
  readonly scope: string;
  readonly detail: TopUpAmount & { readonly opId: string; readonly credited: number; readonly note?: string };
}

/** An attempt pending reconciliation was resolved with its actual cost. */
export interface ResolveAudit extends AuditBase {
  readonly action: "resolve";
  readonly attemptId: string;
  readonly detail: { readonly scopes: ScopePath; readonly reserved: LedgerAmount; readonly actual: LedgerAmount; readonly overrun: LedgerAmount; readonly pendingReason?: PendingReason; readonly note?: string };
}

/** A scope's admin override was set or cleared. */
export interface SetLimitsAudit extends AuditBase {
  readonly action: "set_limits";
  readonly scope: string;
  /** The new override (null: cleared) and the one it replaced. */
  readonly detail: { readonly override: ScopeLimits | null; readonly previous: ScopeLimits | null; readonly note?: string };
}

/** One admin act on the books. */
export type AuditRecord = TopUpAudit | ResolveAudit | SetLimitsAudit;

/** One row of a usage report: the attempts of one model, price version and currency. */
export interface UsageRow {
  /** `""` when the attempts carried no such metadata. */
  readonly model: string;
  readonly priceVersion: string;
  readonly currency: string;
  readonly attempts: number;
  /** Actual cost of the settled attempts. */
  readonly settledMicros: number;
  readonly settledTokens: number;
  /** Reservations still held (held or pending reconciliation). */
  readonly pendingMicros: number;
  readonly pendingTokens: number;
}

/**
 * The settled usage of one scope, UTC day, model, price version and currency: written in the
 * transaction of each settlement (or resolution) it counts, on the UTC day the attempt was
 * admitted (where the books charge it), and kept for the history.
 */
/** A scope's settled usage of one model in one currency, summed over a range of days. */
export interface ScopeSpend {
  readonly scope: string;
  readonly model: string;
  readonly currency: string;
  readonly attempts: number;
  readonly settledMicros: number;
  readonly settledTokens: number;
}

export interface UsageRollup {
  readonly scope: string;
  /** Start of the UTC day the attempts were created in. */
  readonly dayStart: number;
  readonly model: string;
  readonly priceVersion: string;
  readonly currency: string;
  /** Settled attempts: upstream requests (a retry is an attempt of its own). */
  readonly attempts: number;
  readonly settledMicros: number;
  readonly settledTokens: number;
}

/**
 * The answer of `usageReport`. Refused (`range_cuts_rollup`) when an edge of the range falls
 * inside a UTC day of which some of the scope's attempts are only kept as a daily total: that
 * day can only be reported whole.
 */
export type UsageReport =
  | { readonly ok: true; readonly rows: readonly UsageRow[] }
  | {
      readonly ok: false;
      readonly reason: "range_cuts_rollup";
      /** Start of the UTC day the edge cuts through. */
      readonly dayStart: number;
      readonly message: string;
    };

/** The reservations one scope refused in one UTC day, by reason (the scope was the narrowest failing one). */
export interface RefusalTally {
  readonly dayStart: number;
  readonly dayEnd: number;
  readonly total: number;
  readonly byReason: Readonly<Partial<Record<RefusalReason, number>>>;
}

/** One stored refusal count. */
export interface RefusalCount {
  readonly dayStart: number;
  readonly reason: RefusalReason;
  readonly count: number;
}

/** What one retention run did. */
export interface RetentionRun {
  /** Attempt records removed (settled ones live on in the usage rollups). */
  readonly attempts: number;
  /** Usage rollups of days past the history removed. */
  readonly rollups: number;
  /** Counter rows and refusal tallies of windows and days past the retention removed. */
  readonly counters: number;
  readonly refusals: number;
  /** True when the run stopped at its batch size: call again. */
  readonly more: boolean;
}

/** A scope's figures for one limited metric in the current period/window. */
export interface LimitBalance {
  readonly metric: LedgerMetric;
  /** The limit; for a prepaid balance, what was credited. */
  readonly limit: number;
  /** 0 for a prepaid balance (no window). */
  readonly windowStart: number;
  /** 0 for a prepaid balance (no window). */
  readonly windowEnd: number;
  readonly spent: number;
  readonly held: number;
  readonly pending: number;
  readonly overrun: number;
  /** `limit - spent - held`, never below 0. */
  readonly remaining: number;
}

/** A scope's request bucket now. */
export interface RequestBalance {
  readonly metric: "requests";
  readonly perMinute: number;
  readonly burst: number;
  /** Whole tokens available now. */
  readonly available: number;
  /** Until one token is available (0 when one is); absent when the bucket never refills. */
  readonly retryAfterMs?: number;
}

/** A scope's effective limits and where it stands on each of them now. */
export interface ScopeBalance {
  readonly scope: string;
  /** The effective limits. */
  readonly limits: ScopeLimits;
  readonly money?: LimitBalance;
  readonly tokens?: LimitBalance;
  readonly balance?: LimitBalance;
  readonly requests?: RequestBalance;
  /** The reservations this scope refused today (UTC); absent when none. */
  readonly refusals?: RefusalTally;
}

/**
 * Synchronous storage. Implementations do no locking of their own: the caller runs each
 * `BudgetLedgerCore` call atomically (one SQLite transaction).
 */
export interface LedgerStore {
  getLimits(scope: string): Omit<ScopeLimitsView, "effective"> | undefined;
  putLimits(scope: string, limits: Omit<ScopeLimitsView, "effective">): void;
  getCounter(scope: string, metric: LedgerMetric, windowStart: number): LedgerCounter | undefined;
  putCounter(counter: LedgerCounter): void;
  /** Every counter of a scope. */
  countersOf(scope: string): LedgerCounter[];
  getBucket(scope: string): BucketState | undefined;
  putBucket(bucket: BucketState): void;
  /** The sum of a scope's top-ups in one currency (0 when none). */
  getCredited(scope: string, currency: string): number;
  putCredited(scope: string, currency: string, credited: number): void;
  getTopUp(opId: string): TopUpRecord | undefined;
  putTopUp(record: TopUpRecord): void;
  getAttempt(attemptId: string): AttemptRecord | undefined;
  putAttempt(record: AttemptRecord): void;
  /** Attempts in state `held` whose lease expired (`leaseExpiresAt <= now`), at most `limit`. */
  expiredLeases(now: number, limit: number): AttemptRecord[];
  /** The smallest `leaseExpiresAt` of the attempts in state `held`; undefined when none. */
  earliestLease(): number | undefined;
  /** Attempts in `state` with an id above `afterAttemptId`, by id, at most `limit`. */
  attemptsInState(state: AttemptState, limit: number, afterAttemptId?: string): AttemptRecord[];
  /** Attempts that charged `scope` created in `[fromMs, toMs)`, by creation time, at most `limit`. */
  attemptsCharging(scope: string, fromMs: number, toMs: number, limit: number): AttemptRecord[];
  /** The `seq` the next audit record gets. */
  nextAuditSeq(): number;
  putAudit(record: AuditRecord): void;
  /** Audit records with `seq > afterSeq`, in order, at most `limit`. */
  auditAfter(afterSeq: number, limit: number): AuditRecord[];
  /** The retention last stored; undefined when none was. */
  getRetention(): number | undefined;
  putRetention(ms: number): void;
  /** Adds one to the refusal count of (scope, day, reason). */
  addRefusal(scope: string, dayStart: number, reason: RefusalReason): void;
  /** A scope's refusal counts of the days starting in `[fromDay, toMs)`, by day and reason. */
  refusalsOf(scope: string, fromDay: number, toMs: number): RefusalCount[];
  /** Attempts `settled` or `released` created before `before`, at most `limit` (in any order). */
  finishedBefore(before: number, limit: number): AttemptRecord[];
  /** Removes an attempt record and its usage-report index rows. */
  deleteAttempt(record: AttemptRecord): void;
  /** The usage history last stored; undefined when none was. */
  getHistory(): number | undefined;
  putHistory(ms: number): void;
  /** Before when attempts may have been removed by retention (exclusive); undefined when none was. */
  getRetiredBefore(): number | undefined;
  putRetiredBefore(ms: number): void;
  /** Adds `row`'s figures to the rollup of its (scope, day, model, price version, currency). */
  addRollup(row: UsageRollup): void;
  /** A scope's rollups of the days starting in `[fromMs, toMs)`. */
  rollupsOf(scope: string, fromMs: number, toMs: number): UsageRollup[];
  /** Every scope's rollups of the days starting in `[fromMs, toMs)`, summed per scope, model and currency. */
  rollupTotals(fromMs: number, toMs: number): ScopeSpend[];
  /** Whether the scope has a rollup of the day starting at `dayStart`. */
  hasRollup(scope: string, dayStart: number): boolean;
  /** Removes up to `limit` usage rollups of days starting before `before`; returns how many. */
  deleteRollupsBefore(before: number, limit: number): number;
  /** The start of the oldest rollup day; undefined when there is none. */
  oldestRollupDay(): number | undefined;
  /** Removes up to `limit` periodic counters that hold nothing and whose window ended before `before`; returns how many. */
  deleteClosedCounters(before: number, limit: number): number;
  /** Removes up to `limit` refusal counts of days starting before `before`; returns how many. */
  deleteRefusalsBefore(before: number, limit: number): number;
  /**
   * The earliest moment from which something may age out: the creation of the oldest finished
   * attempt, the window end of the earliest-ending periodic counter that holds nothing, or the end
   * of the oldest refusal day. Undefined when there is none.
   */
  oldestRemovable(): number | undefined;
}
