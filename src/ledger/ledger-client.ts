/**
 * What the request path talks to: the tenants' BudgetLedger objects, routed by root scope, with
 * optional striping of a hot tenant over several objects.
 *
 * ## Striping
 *
 * One ledger object serializes every reservation of its root; for a tenant hotter than one object
 * can serve, `stripes(root)` = N > 1 spreads it over N objects: stripe 0 is named `root` itself,
 * stripe i > 0 `${root}#${i}`. Each stripe holds an exact integer share of every limit of every
 * scope of the root — `floor(limit / N)`, plus one for the first `limit % N` stripes (request
 * buckets' `perMinute` and `burst` alike) — so the shares sum to exactly the limit and each stripe
 * enforcing its share strictly keeps the whole strict. The client computes the shares and passes a
 * stripe its share in the {@link ScopeRef} limits, and likewise splits admin overrides and top-ups.
 *
 * A reservation starts at stripe `hash(attemptId) % N` and on a refusal tries the next stripes in
 * order; it answers the first grant, else the last refusal. The attempt then lives in the stripe
 * that granted it: its {@link LedgerHandle} names that object for settle and release.
 *
 * **The cost of striping is fragmentation**: a stripe admits only what fits its own remainder, so a
 * worst case larger than every stripe's remainder is refused although the total remainder would fit
 * it (at worst, usable budget is short by nearly one worst case per stripe), a share smaller than a
 * worst case admits nothing, and a refusal costs up to N round trips. Request buckets fragment the
 * same way (a stripe's `burst` share of 0 admits no counted request). `balance` sums the stripes: a
 * stripe that has not yet seen a scope's configured limits contributes no limit for it. Use striping
 * only where one object's throughput is the bottleneck, with budgets large against the worst case.
 * Refusal tallies are per stripe: a reservation one stripe refused and the next granted is counted
 * as a refusal by the first.
 *
 * ## Invalid arguments
 *
 * `reserve`, `settle` and `release` (the request path) answer a malformed argument — the client's
 * own checks and the ledger object's alike — with an `invalid_argument` result, never a thrown
 * error, so a thrown error always means the ledger could not be reached or failed. The admin
 * methods (`balance`, `topUp`, `setLimits`) throw a RangeError.
 */
import type {
  AttemptMeta,
  AttemptRecord,
  AttemptState,
  AuditRecord,
  LedgerActor,
  LedgerAmount,
  LedgerCounter,
  LedgerInvalidArgument,
  AcquireResult,
  LeaseAsk,
  LeaseResult,
  LeaseUse,
  LimitBalance,
  RefusalTally,
  ReleaseResult,
  RequestBalance,
  ReserveResult,
  ResolveResult,
  ScopeBalance,
  ScopeLimits,
  ScopeLimitsView,
  ScopeRef,
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
} from "./ledger.ts";
import { MAX_LEDGER_KEY_LENGTH } from "./ledger-types.ts";
import { isLedgerKey, limitsProblems } from "./ledger-validate.ts";

/** Most stripes one root may be spread over. */
export const MAX_LEDGER_STRIPES = 64;

/** What a reservation asks for; the ledger object adds its own clock. */
export interface ReserveArgs {
  readonly scopes: readonly ScopeRef[];
  readonly currency: string;
  readonly amount: LedgerAmount;
  readonly countsRequest?: boolean;
  readonly meta?: AttemptMeta;
  readonly leaseMs?: number;
  /** The tenant's retention (stored by the object when it changes; see `ledger.ts`). */
  readonly retentionMs?: number;
  /** The tenant's usage history (stored by the object when it changes). */
  readonly historyMs?: number;
}

/**
 * One ledger object (a root, or one stripe of it), as the BudgetLedger Durable Object serves it
 * over RPC. The object uses its own clock for every decision. An invalid argument is answered
 * `invalid_argument` by `reserve`, `settle` and `release`, and rejected with a RangeError naming
 * the field by the admin methods.
 */
export interface BudgetLedgerRpc {
  /** Sets (`null`: clears) a scope's admin override. Audited. */
  setLimits(scope: string, limits: ScopeLimits | null, by?: LedgerActor): Promise<void>;
  limits(scope: string): Promise<ScopeLimitsView>;
  reserve(attemptId: string, args: ReserveArgs): Promise<ReserveResult>;
  /**
   * One step for an attempt that has no lease to come from: grants a lease for its path (see
   * `ledger-leases.ts`), or, near a limit, reserves the attempt on its own.
   */
  acquire(attemptId: string, args: ReserveArgs, lease: LeaseAsk): Promise<AcquireResult>;
  /** Grants a lease for the path of `args` (`args.amount` is one worst case), or answers `near_limit`. */
  lease(args: ReserveArgs, ask: LeaseAsk): Promise<LeaseResult>;
  /** Applies a settlement batch in one transaction; one answer per item, in order. */
  settleBatch(items: readonly SettlementItem[]): Promise<SettlementItemResult[]>;
  settle(attemptId: string, actual: LedgerAmount | "unknown", detail?: SettleDetail): Promise<SettleResult>;
  release(attemptId: string): Promise<ReleaseResult>;
  balance(scope: string): Promise<ScopeBalance>;
  usage(scope: string): Promise<LedgerCounter[]>;
  /** Credits a prepaid balance; idempotent by `by.opId`. Audited. */
  topUp(scope: string, amount: TopUpAmount, by: TopUpBy): Promise<TopUpResult>;
  /** One attempt's record; undefined when this object has none. */
  attempt(attemptId: string): Promise<AttemptRecord | undefined>;
  /** Attempts in one state, by attempt id, after `afterAttemptId` (paging; at most 1000). */
  attemptsIn(state: AttemptState, limit: number, afterAttemptId?: string): Promise<AttemptRecord[]>;
  /** Attempts pending reconciliation (either reason), by attempt id, after `afterAttemptId`. */
  pendingReconciliations(limit: number, afterAttemptId?: string): Promise<AttemptRecord[]>;
  /** Settles an attempt pending reconciliation with its actual cost. Audited. */
  resolve(attemptId: string, actual: LedgerAmount, by: LedgerActor): Promise<ResolveResult>;
  audit(limit: number, afterSeq?: number): Promise<AuditRecord[]>;
  /** Usage by model and price version of the attempts that charged `scope`, created in `[fromMs, toMs)`. */
  usageReport(scope: string, fromMs: number, toMs: number): Promise<UsageReport>;
  /** `scope`'s settled usage per UTC day, model, price version and currency, of the days starting in `[fromMs, toMs)` (kept for the history). */
  dailyUsage(scope: string, fromMs: number, toMs: number): Promise<UsageRollup[]>;
  /** Every scope's settled usage per model and currency, summed over the days starting in `[fromMs, toMs)`. */
  spendByScope(fromMs: number, toMs: number): Promise<ScopeSpend[]>;
  /** What `scope` refused, per UTC day overlapping `[fromMs, toMs)` (kept for the retention). */
  refusals(scope: string, fromMs: number, toMs: number): Promise<RefusalTally[]>;
}

/**
 * Which ledger object holds an attempt: the stripe that granted it (or last refused it, or found
 * it invalid; `""` when the client refused it before asking any).
 */
export interface LedgerHandle {
  readonly object: string;
  /** How the attempt used a lease, when it was admitted from one (see leasing-ledger-client.ts). */
  readonly lease?: LeaseUse;
  /** The leasing client's key of the attempt's path. */
  readonly path?: string;
}

/** A settlement a batching client has queued: its answer goes to {@link SettleOptions.report}. */
export interface QueuedSettlement {
  readonly ok: true;
  readonly attemptId: string;
  readonly state: "queued";
}

/** How the caller of a batched settlement hears of it. */
export interface SettleOptions {
  readonly keepAlive?: (p: Promise<unknown>) => void;
  /** Called once with the ledger's answer, or with the error that ended the batch's tries. */
  readonly report?: (result: SettleResult | ReleaseResult | { readonly error: unknown }) => void;
}

/** All tenants' ledgers, striped where configured (see the module comment). */
export interface BudgetLedgerClient {
  /** Reserves in the stripes of the root `args.scopes[0]` (see the module comment). */
  /**
   * `keepAlive` keeps the isolate alive for work the reservation starts in the background (a
   * leasing client's next lease, a close); the plain client starts none.
   */
  reserve(attemptId: string, args: ReserveArgs, keepAlive?: (p: Promise<unknown>) => void): Promise<{ readonly result: ReserveResult; readonly handle: LedgerHandle }>;
  /**
   * Settles an attempt. A client that batches answers `queued` at once and hands the ledger's
   * answer (or the error that ended its tries) to `opts.report` when the batch is written;
   * `opts.keepAlive` keeps the isolate alive until then.
   */
  settle(handle: LedgerHandle, attemptId: string, actual: LedgerAmount | "unknown", detail?: SettleDetail, opts?: SettleOptions): Promise<SettleResult | QueuedSettlement>;
  /** Releases a reservation that was never sent; queued like `settle`. */
  release(handle: LedgerHandle, attemptId: string, opts?: SettleOptions): Promise<ReleaseResult | QueuedSettlement>;
  /** Writes every settlement a batching client has queued (the plain client queues none). */
  settleNow(closeIdle: boolean): Promise<void>;
  /** A scope's balance summed over the root's stripes (limit, spent, held, pending, overrun, remaining). */
  balance(root: string, scope: string): Promise<ScopeBalance>;
  /**
   * Credits a prepaid balance, split over the stripes like a limit (op ids `${opId}#${i}`; a stripe
   * whose share is 0 is skipped). `credited` sums the credit of the stripes credited. Retrying with
   * the same op id is safe.
   */
  topUp(root: string, scope: string, amount: TopUpAmount, by: TopUpBy): Promise<TopUpResult>;
  /** Sets (`null`: clears) a scope's admin override, each stripe its share. */
  setLimits(root: string, scope: string, limits: ScopeLimits | null, by?: LedgerActor): Promise<void>;
}

/** Options of {@link budgetLedgerClient}. */
export interface BudgetLedgerClientOptions {
  /** How many stripes a root is spread over (1..{@link MAX_LEDGER_STRIPES}); 1 when omitted. */
  readonly stripes?: (root: string) => number;
}

/** The object name of stripe `i` of `root`. */
export function stripeObjectName(root: string, i: number): string {
  return i === 0 ? root : `${root}#${i}`;
}

/** Stripe `i`'s share of `total` over `n` stripes: the shares of all stripes sum to exactly `total`. */
export function stripeShareOf(total: number, i: number, n: number): number {
  return Math.floor(total / n) + (i < total % n ? 1 : 0);
}

/** Stripe `i`'s share of every limit (see the module comment). */
export function stripeLimits(limits: ScopeLimits, i: number, n: number): ScopeLimits {
  const s = (x: number) => stripeShareOf(x, i, n);
  const { money: m, tokens: t, requests: r, balance: b } = limits;
  return {
    ...(m ? { money: { currency: m.currency, limitMicros: s(m.limitMicros), periodMs: m.periodMs } } : {}),
    ...(t ? { tokens: { limit: s(t.limit), windowMs: t.windowMs } } : {}),
    ...(r ? { requests: { perMinute: s(r.perMinute), burst: s(r.burst) } } : {}),
    ...(b ? { balance: { currency: b.currency } } : {}),
  };
}

/** The stripe scopes of a path: each scope's configured limits cut to stripe `i`'s share. */
export function stripeScopes(scopes: readonly ScopeRef[], i: number, n: number): ScopeRef[] {
  return scopes.map((ref) => ({ name: ref.name, ...(ref.limits !== undefined ? { limits: stripeLimits(ref.limits, i, n) } : {}) }));
}

/** FNV-1a over UTF-16 code units: cheap, stable across isolates, and spreads ids evenly enough. */
export function hash(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** The problems of full (unsplit) limits: valid, with positive request rates. */
function fullLimitsProblems(limits: unknown, at: string): string[] {
  const bad = limitsProblems(limits, at);
  const r = (limits as ScopeLimits | null)?.requests;
  if (bad.length === 0 && r && (r.perMinute < 1 || r.burst < 1)) bad.push(`${at}.requests.perMinute and burst must be positive integers`);
  return bad;
}

/** @throws RangeError naming the bad field. */
function checkLimits(limits: unknown, at: string): void {
  const bad = fullLimitsProblems(limits, at);
  if (bad.length > 0) throw new RangeError(`invalid ledger limits: ${bad.join("; ")}`);
}

const invalid = (what: string, attemptId: unknown, problem: string): LedgerInvalidArgument => ({
  ok: false,
  attemptId: typeof attemptId === "string" ? attemptId.slice(0, MAX_LEDGER_KEY_LENGTH) : "",
  reason: "invalid_argument",
  message: `invalid ledger ${what}: ${problem}`,
});

const sumLimits = (parts: readonly ScopeLimits[]): ScopeLimits => {
  const first = <K extends keyof ScopeLimits>(k: K) => parts.find((p) => p[k] !== undefined)?.[k];
  const sum = (f: (l: ScopeLimits) => number | undefined) => parts.reduce((n, l) => n + (f(l) ?? 0), 0);
  const [m, t, r, b] = [first("money"), first("tokens"), first("requests"), first("balance")];
  return {
    ...(m ? { money: { ...m, limitMicros: sum((l) => l.money?.limitMicros) } } : {}),
    ...(t ? { tokens: { ...t, limit: sum((l) => l.tokens?.limit) } } : {}),
    ...(r ? { requests: { perMinute: sum((l) => l.requests?.perMinute), burst: sum((l) => l.requests?.burst) } } : {}),
    ...(b ? { balance: { ...b } } : {}),
  };
};

function sumFigures(parts: readonly (LimitBalance | undefined)[]): LimitBalance | undefined {
  const got = parts.filter((p): p is LimitBalance => p !== undefined);
  if (got.length === 0) return undefined;
  const sum = (k: "limit" | "spent" | "held" | "pending" | "overrun" | "remaining") => got.reduce((n, p) => n + p[k], 0);
  return { ...got[0]!, limit: sum("limit"), spent: sum("spent"), held: sum("held"), pending: sum("pending"), overrun: sum("overrun"), remaining: sum("remaining") };
}

function sumRequests(parts: readonly (RequestBalance | undefined)[]): RequestBalance | undefined {
  const got = parts.filter((p): p is RequestBalance => p !== undefined);
  if (got.length === 0) return undefined;
  const waits = got.flatMap((p) => (p.retryAfterMs === undefined ? [] : [p.retryAfterMs]));
  const sum = (k: "perMinute" | "burst" | "available") => got.reduce((n, p) => n + p[k], 0);
  // The soonest any stripe has a token: a reservation may land on any of them.
  return { metric: "requests", perMinute: sum("perMinute"), burst: sum("burst"), available: sum("available"), ...(waits.length > 0 ? { retryAfterMs: Math.min(...waits) } : {}) };
}

/** One balance over all stripes of a root. */
export function sumBalances(scope: string, parts: readonly ScopeBalance[]): ScopeBalance {
  const money = sumFigures(parts.map((p) => p.money));
  const tokens = sumFigures(parts.map((p) => p.tokens));
  const balance = sumFigures(parts.map((p) => p.balance));
  const requests = sumRequests(parts.map((p) => p.requests));
  const refusals = sumTallies(parts.flatMap((p) => (p.refusals ? [p.refusals] : [])))[0];
  return {
    scope,
    limits: sumLimits(parts.map((p) => p.limits)),
    ...(money ? { money } : {}),
    ...(tokens ? { tokens } : {}),
    ...(balance ? { balance } : {}),
    ...(requests ? { requests } : {}),
    ...(refusals ? { refusals } : {}),
  };
}

/** Refusal tallies of several stripes added up per day, oldest first. */
export function sumTallies(parts: readonly RefusalTally[]): RefusalTally[] {
  const days = new Map<number, { dayStart: number; dayEnd: number; total: number; byReason: Record<string, number> }>();
  for (const t of parts) {
    let d = days.get(t.dayStart);
    if (d === undefined) days.set(t.dayStart, (d = { dayStart: t.dayStart, dayEnd: t.dayEnd, total: 0, byReason: {} }));
    d.total += t.total;
    for (const [reason, n] of Object.entries(t.byReason)) d.byReason[reason] = (d.byReason[reason] ?? 0) + (n ?? 0);
  }
  return [...days.values()].sort((a, b) => a.dayStart - b.dayStart);
}

/**
 * A {@link BudgetLedgerClient} over named ledger objects. `objectFor` is called on every call,
 * because a Durable Object stub is an I/O object bound to the request that made it (in the Worker:
 * `(name) => env.BUDGET_LEDGER.getByName(name)`).
 *
 * Invalid arguments (and an invalid stripe count) are found before any call: `reserve`, `settle`
 * and `release` answer them `invalid_argument`, the other methods throw a RangeError.
 */
export function budgetLedgerClient(objectFor: (objectName: string) => BudgetLedgerRpc, opts?: BudgetLedgerClientOptions): BudgetLedgerClient {
  /** The stripe count of a root, or what is wrong with the root or its count. */
  const stripeCount = (root: unknown): number | string => {
    // A '#' in a root could name another root's stripe.
    if (!isLedgerKey(root) || root.includes("#")) return `root must be a string of 1..${MAX_LEDGER_KEY_LENGTH} chars without '#'`;
    const n = opts?.stripes?.(root) ?? 1;
    if (!(Number.isSafeInteger(n) && n >= 1 && n <= MAX_LEDGER_STRIPES)) return `stripes for ${root} must be an integer in 1..${MAX_LEDGER_STRIPES}, got ${String(n)}`;
    return n;
  };
  const stripesOf = (root: unknown): number => {
    const n = stripeCount(root);
    if (typeof n === "string") throw new RangeError(`invalid ledger root: ${n}`);
    return n;
  };
  const badHandle = (handle: LedgerHandle, attemptId: unknown, what: string) => (isLedgerKey(handle?.object) ? undefined : invalid(what, attemptId, "handle.object must name a ledger object"));
  const amountOf = (a: LedgerAmount): LedgerAmount => ({ micros: a.micros, tokens: a.tokens });
  const refused = (result: LedgerInvalidArgument) => ({ result, handle: { object: "" } });

  return {
    async reserve(attemptId, args) {
      const scopes: unknown = args?.scopes;
      if (!Array.isArray(scopes) || scopes.length === 0) return refused(invalid("reservation", attemptId, "scopes must name a root scope first"));
      const root = (scopes[0] as ScopeRef | null)?.name;
      const n = stripeCount(root);
      if (typeof n === "string") return refused(invalid("reservation", attemptId, n));
      const bad = (scopes as ScopeRef[]).flatMap((ref, i) => (ref?.limits !== undefined ? fullLimitsProblems(ref.limits, `scopes[${i}].limits`) : []));
      if (bad.length > 0) return refused(invalid("reservation", attemptId, bad.join("; ")));
      const start = hash(String(attemptId)) % n;
      let last: { result: ReserveResult; handle: LedgerHandle } | undefined;
      for (let k = 0; k < n; k++) {
        const i = (start + k) % n;
        const object = stripeObjectName(root!, i);
        const result = await objectFor(object).reserve(attemptId, {
          scopes: stripeScopes(scopes as ScopeRef[], i, n),
          currency: args.currency,
          amount: amountOf(args.amount),
          ...(args.countsRequest !== undefined ? { countsRequest: args.countsRequest } : {}),
          ...(args.meta !== undefined ? { meta: { ...args.meta } } : {}),
          ...(args.leaseMs !== undefined ? { leaseMs: args.leaseMs } : {}),
          ...(args.retentionMs !== undefined ? { retentionMs: args.retentionMs } : {}),
          ...(args.historyMs !== undefined ? { historyMs: args.historyMs } : {}),
        });
        last = { result, handle: { object } };
        // Every stripe would refuse a currency mismatch, or an invalid argument, alike.
        if (result.ok || result.reason === "currency_mismatch" || result.reason === "invalid_argument") break;
      }
      return last!;
    },
    async settle(handle, attemptId, actual, detail) {
      const bad = badHandle(handle, attemptId, "settlement");
      if (bad) return bad;
      // An amount that is not an object is left for the ledger object to name.
      const a = actual === "unknown" || actual === null || typeof actual !== "object" ? actual : amountOf(actual);
      return await objectFor(handle.object).settle(attemptId, a, detail === undefined ? undefined : { ...detail });
    },
    async release(handle, attemptId) {
      return badHandle(handle, attemptId, "release") ?? (await objectFor(handle.object).release(attemptId));
    },
    async settleNow() {},
    async balance(root, scope) {
      const n = stripesOf(root);
      const parts = await Promise.all(Array.from({ length: n }, (_, i) => objectFor(stripeObjectName(root, i)).balance(scope)));
      return n === 1 ? parts[0]! : sumBalances(scope, parts);
    },
    async topUp(root, scope, amount, by) {
      const n = stripesOf(root);
      const micros = amount?.micros;
      if (!(Number.isSafeInteger(micros) && micros >= 1)) throw new RangeError(`invalid ledger top-up: amount.micros must be a positive integer, got ${String(micros)}`);
      if (!isLedgerKey(by?.opId) || by.opId.length + 3 > MAX_LEDGER_KEY_LENGTH) throw new RangeError(`invalid ledger top-up: by.opId must be a string of 1..${MAX_LEDGER_KEY_LENGTH - 3} chars`);
      const shares = Array.from({ length: n }, (_, i) => stripeShareOf(micros, i, n));
      const answers = await Promise.all(
        shares.flatMap((share, i) => (share === 0 ? [] : [objectFor(stripeObjectName(root, i)).topUp(scope, { currency: amount.currency, micros: share }, { ...by, opId: `${by.opId}#${i}` })])),
      );
      return { ok: true, opId: by.opId, credited: answers.reduce((sum, a) => sum + a.credited, 0) };
    },
    async setLimits(root, scope, limits, by) {
      const n = stripesOf(root);
      if (limits !== null) checkLimits(limits, "limits");
      await Promise.all(Array.from({ length: n }, (_, i) => objectFor(stripeObjectName(root, i)).setLimits(scope, limits === null ? null : stripeLimits(limits, i, n), by)));
    },
  };
}
