/**
 * Strict budget ledger: hierarchical money, token, request-rate and prepaid-balance limits that
 * admitted work can never exceed.
 *
 * Pure logic over a synchronous store and an explicit `now`: the BudgetLedger Durable Object (one
 * per financial root, i.e. tenant, or per stripe of one: see `ledger-client.ts`) runs every call
 * inside one `transactionSync` with no `await` between read and write, which is what makes
 * check-and-reserve atomic under any concurrency.
 *
 * ## Model
 *
 * - A **scope path** names the financial scopes an attempt is charged to, root first:
 *   `org:acme → team:ml → project:x → key:k1`. Every scope on the path is checked and charged.
 * - A scope's **limits** (all optional): a money budget per period (integer micro-units of an
 *   explicit currency), a token limit per window, a request-rate token bucket, and a prepaid
 *   balance. Periods and windows are aligned to the epoch (`floor(now / periodMs) * periodMs`). A
 *   scope without a money or token limit is unlimited for it but its usage is still counted
 *   (lifetime counter, window start 0).
 * - **Where limits come from**: each reservation passes every scope's configured limits in its
 *   {@link ScopeRef} (omitted = none configured). The effective limits are the admin override
 *   (`setLimits`) if there is one, else the configured ones. When the configured limits differ from
 *   the ones stored for the scope (canonical JSON), they are stored, so `balance` and `limits` show
 *   them without being passed limits. That is configuration, not books: it is stored whether or not
 *   the reservation is admitted. The ledger object's retention travels the same way
 *   (`retentionMs`), except that omitting it keeps the stored one.
 * - A **reservation** is the priced worst case of one attempt (micro-units and tokens). `reserve`
 *   checks every scope and metric first and then charges all of them or none; on refusal the
 *   narrowest (leaf-most) failing scope is reported and no counter or bucket is touched. Usage
 *   already spent, overruns included, counts against the limit: admission needs
 *   `spent + held + amount <= limit` (for a prepaid balance, `<= credited`, the sum of its top-ups).
 * - **Refusals leave no attempt record**: nothing was charged, so there is nothing to settle. The
 *   refusing (narrowest failing) scope counts it in a **refusal tally** per UTC day and reason,
 *   shown in `balance` (today) and `refusals` (by day), kept for the retention.
 * - **Request buckets**: a reservation with `countsRequest` takes one token from the bucket of
 *   every scope with a `requests` limit; a retry (`countsRequest` false) takes none. A bucket refills
 *   continuously and is kept in exact integer units ({@link BUCKET_UNITS_PER_TOKEN} per token).
 *   Tokens are never given back: release and settle do not refund them.
 * - Each attempt id is admitted at most once: a `reserve` with the id of an admitted attempt
 *   returns its grant again, whatever it asks for. A `reserve` with the id of a refused one is
 *   evaluated afresh (the refusal charged nothing and was not kept), so it may be granted now.
 * - Every charge is booked in the period/window in which the attempt was admitted; its settlement
 *   and release go to the same counters, so the books of a period balance on their own.
 *
 * ## Attempt states
 *
 * - `held`: reserved, not yet settled; counted in `held`.
 * - `settled`: `settle` with the actual usage; the reservation is released from `held`, the actual
 *   cost is added to `spent`; actual above the reservation is recorded as an `overrun` (on the
 *   attempt and on each scope's counter) so the price/cap configuration can be flagged.
 * - `pending_reconciliation`: the usage is unknown — `settle(id, "unknown")` — or the lease
 *   expired before any settlement. The full reservation stays held (never zero, never refunded);
 *   it is counted in both `held` and `pending`. A late `settle` after a lease expiry is still the
 *   attempt's one settlement and is accepted. Either way an admin may `resolve` it with the actual
 *   cost (found in `pendingReconciliations`); that settles it and is audited.
 * - `released`: the attempt was never sent (`release`); the reservation is returned in full.
 *   Allowed from `held` and from a lease-expired `pending_reconciliation` (no settlement yet).
 *
 * `settle`, `release`, `resolve` and `topUp` are idempotent: repeating one returns the first answer
 * and changes nothing. A settle after a release (or a release after a settle) is refused as `conflict`.
 *
 * Admin acts (`setLimits`, `topUp`, `resolve`) append to an audit log (`audit`).
 *
 * ## Retention
 *
 * The books do not grow with traffic. `retain` (the object's alarm runs it, in batches) removes,
 * once they are older than the retention ({@link DEFAULT_RETENTION_MS} unless configured):
 * - attempt records that are `settled` or `released`, by creation time. Every settlement (and
 *   resolution) has already added its cost to its scopes' **usage rollups**, in its own
 *   transaction: one row per (scope, UTC day of admission, model, price version, currency), so
 *   they equal the settled spend the books charged. `usageReport` reads whole days from them and
 *   days a range cuts from the attempt records; a range whose edge cuts a day of which attempts
 *   were already removed is refused (`range_cuts_rollup`). Held and pending attempts are never
 *   removed, so every settlement that can still change the books finds its record.
 * - counters of periods/windows that ended before the retention and hold nothing (lifetime
 *   counters and prepaid balances stay), and refusal tallies of days before it.
 * - usage rollups of days older than the **history** ({@link DEFAULT_HISTORY_MS} unless
 *   configured; never shorter than the retention).
 * The audit log, top-ups, limits, buckets and credits are kept. So the rows are bounded by
 * scopes × (retained windows + history days × models × price versions × currencies) + attempts
 * inside the retention + held + pending + audit.
 *
 * A settle or release of an attempt removed by retention answers `unknown_attempt` and changes
 * nothing: the attempt was finished at least the retention ago, which is at least seven times the
 * longest lease ({@link MIN_RETENTION_MS}), and the gateway settles within the lease. A `reserve`
 * reusing such an id is a new reservation; the gateway never reuses attempt ids.
 *
 * ## Arguments
 *
 * The request-path calls (`reserve`, `settle`, `release`) answer a malformed argument with an
 * `invalid_argument` result naming every bad field, so no caller classifies errors across RPC; the
 * admin-path calls throw a RangeError instead (the admin routes check their parameters first, so
 * one reaching them is a gateway bug). Nothing is read or written either way.
 *
 * Integer arithmetic only: every amount is a non-negative safe integer bounded by
 * {@link MAX_LEDGER_AMOUNT}, so sums stay exact.
 */
import {
  BUCKET_UNITS_PER_TOKEN,
  DEFAULT_LEASE_MS,
  DEFAULT_HISTORY_MS,
  DEFAULT_RETENTION_MS,
  LEDGER_DAY_MS,
  MAX_LEDGER_CREDIT,
  MAX_LEDGER_KEY_LENGTH,
  RETENTION_BATCH,
  USAGE_REPORT_MAX_ATTEMPTS,
  type AttemptRecord,
  type AttemptState,
  type AuditRecord,
  type BucketState,
  type LedgerActor,
  type LedgerAmount,
  type LedgerCharge,
  type LedgerCounter,
  type LedgerInvalidArgument,
  type LedgerMetric,
  type LedgerStore,
  type LimitBalance,
  type LimitRemaining,
  type RefusalReason,
  type RefusalTally,
  type ReleaseResult,
  type RequestBalance,
  type RequestLimit,
  type ReserveGrant,
  type ReserveRefusal,
  type ReserveRequest,
  type ReserveResult,
  type ResolveResult,
  type RetentionRun,
  type ScopeBalance,
  type ScopeLimits,
  type ScopeLimitsView,
  type SettleDetail,
  type Settlement,
  type SettleResult,
  type TopUpAmount,
  type TopUpBy,
  type TopUpResult,
  type UsageReport,
  type ScopeSpend,
  type UsageRollup,
  type UsageRow,
} from "./ledger-types.ts";
import { adjustCounter, amountOf, bucketWait, emptyCounter, overrunOf, partOf, planScopes, refill, rollUp, storeConfiguredLimits, windowOf, type CounterDelta } from "./ledger-books.ts";
import {
  canonicalLimits,
  isLedgerKey,
  isSeq,
  keyAndNowProblems,
  reserveProblems,
  settleProblems,
  validateKeyAndNow,
  validatePage,
  validateReport,
  validateResolve,
  validateSetLimits,
  validateTopUp,
} from "./ledger-validate.ts";

export type * from "./ledger-types.ts";
export {
  BUCKET_UNITS_PER_TOKEN,
  DEFAULT_HISTORY_MS,
  DEFAULT_LEASE_MS,
  DEFAULT_RETENTION_MS,
  LEDGER_DAY_MS,
  MAX_LEASE_MS,
  MAX_LEASE_SLICES,
  MAX_LEDGER_AMOUNT,
  MAX_LEDGER_CREDIT,
  MAX_LEDGER_KEY_LENGTH,
  MAX_HISTORY_MS,
  MAX_LEDGER_PAGE,
  MAX_REQUEST_RATE,
  MAX_RETENTION_MS,
  MAX_SCOPE_DEPTH,
  MIN_RETENTION_MS,
  RETENTION_BATCH,
  USAGE_REPORT_MAX_ATTEMPTS,
} from "./ledger-types.ts";
export { validateLimits } from "./ledger-validate.ts";

const ATTEMPT_STATES: readonly AttemptState[] = ["held", "settled", "pending_reconciliation", "released"];
const isEmpty = (l: ScopeLimits) => Object.keys(l).length === 0;
const noteOf = (by: LedgerActor | undefined): { note?: string } => (by?.note !== undefined ? { note: by.note } : {});

/** The `invalid_argument` answer of a request-path call. */
function invalid(what: string, attemptId: unknown, bad: readonly string[]): LedgerInvalidArgument {
  return { ok: false, attemptId: typeof attemptId === "string" ? attemptId.slice(0, MAX_LEDGER_KEY_LENGTH) : "", reason: "invalid_argument", message: `invalid ledger ${what}: ${bad.join("; ")}` };
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** The ledger rules over one store (see the module comment). */
export class BudgetLedgerCore {
  readonly #store: LedgerStore;

  constructor(store: LedgerStore) {
    this.#store = store;
  }

  /**
   * Sets (`null`: clears) a scope's admin override, which takes precedence over the configured
   * limits its reservations pass. Usage already booked is kept. Audited.
   *
   * @throws RangeError when an argument is invalid.
   */
  setLimits(scope: string, limits: ScopeLimits | null, now: number, by?: LedgerActor): void {
    validateSetLimits(scope, limits, now, by);
    const stored = this.#store.getLimits(scope);
    const override = limits === null ? undefined : canonicalLimits(limits);
    this.#store.putLimits(scope, { ...(stored?.configured ? { configured: stored.configured } : {}), ...(override ? { override } : {}) });
    this.#audit({ action: "set_limits", scope, at: now, actor: by?.actor ?? "unattributed", detail: { override: override ?? null, previous: stored?.override ?? null, ...noteOf(by) } });
  }

  /** A scope's configured limits, admin override, and the effective limits (override, else configured). */
  limits(scope: string): ScopeLimitsView {
    if (!isLedgerKey(scope)) throw new RangeError("invalid ledger scope: scope must be a string of 1..256 chars");
    const stored = this.#store.getLimits(scope);
    const configured = stored?.configured && !isEmpty(stored.configured) ? stored.configured : undefined;
    return { ...(configured ? { configured } : {}), ...(stored?.override ? { override: stored.override } : {}), effective: stored?.override ?? configured ?? {} };
  }

  /**
   * Checks every scope and metric of the path and then reserves the amount in all of them (and
   * takes the request tokens), or in none. A refusal is counted in the refusing scope's tally, not
   * kept as an attempt. An invalid argument is answered `invalid_argument` (nothing is read or written).
   */
  reserve(attemptId: string, req: ReserveRequest): ReserveResult {
    const bad = reserveProblems(attemptId, req);
    if (bad.length > 0) return invalid("reservation", attemptId, bad);
    const existing = this.#store.getAttempt(attemptId);
    if (existing !== undefined) return existing.result;
    const { now, currency, amount } = req;
    if (req.retentionMs !== undefined && req.retentionMs !== this.#store.getRetention()) this.#store.putRetention(req.retentionMs);
    if (req.historyMs !== undefined && req.historyMs !== this.#store.getHistory()) this.#store.putHistory(req.historyMs);
    const money: LedgerMetric = `money:${currency}`;
    const prepaid: LedgerMetric = `balance:${currency}`;
    const plans = planScopes(this.#store, req.scopes);
    const charges: LedgerCharge[] = [];
    const buckets: BucketState[] = [];
    const remaining: LimitRemaining[] = [];
    let refusal: ReserveRefusal | undefined;
    // Leaf first, so the first failure found is the narrowest one; once found, nothing more is checked.
    for (const { scope, effective: lim } of [...plans].reverse()) {
      const refuse = (reason: RefusalReason, metric: LedgerMetric, limit: number, used: number, requested: number, retryAfterMs?: number) => {
        refusal ??= { ok: false, attemptId, reason, scope, metric, limit, used, requested, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) };
      };
      if (refusal === undefined && lim.money && lim.money.currency !== currency) refuse("currency_mismatch", money, lim.money.limitMicros, 0, amount.micros);
      if (refusal === undefined && lim.balance && lim.balance.currency !== currency) refuse("currency_mismatch", prepaid, this.#store.getCredited(scope, lim.balance.currency), 0, amount.micros);
      const periodic: [LedgerMetric, number, { limit: number; len: number } | undefined][] = [
        [money, amount.micros, lim.money ? { limit: lim.money.limitMicros, len: lim.money.periodMs } : undefined],
        ["tokens", amount.tokens, lim.tokens ? { limit: lim.tokens.limit, len: lim.tokens.windowMs } : undefined],
      ];
      for (const [metric, requested, limit] of periodic) {
        const windowStart = limit ? windowOf(now, limit.len) : 0;
        charges.push({ scope, metric, windowStart, windowEnd: limit ? windowStart + limit.len : 0, reserved: requested });
        if (limit === undefined || refusal !== undefined) continue;
        const c = this.#store.getCounter(scope, metric, windowStart);
        const used = c === undefined ? 0 : c.spent + c.held;
        if (used + requested > limit.limit) refuse(metric === "tokens" ? "token_limit_exceeded" : "money_budget_exceeded", metric, limit.limit, used, requested, windowStart + limit.len - now);
        else remaining.push({ scope, metric, remaining: limit.limit - used - requested });
      }
      if (lim.balance) {
        charges.push({ scope, metric: prepaid, windowStart: 0, windowEnd: 0, reserved: amount.micros });
        if (refusal === undefined) {
          const c = this.#store.getCounter(scope, prepaid, 0);
          const credited = this.#store.getCredited(scope, currency);
          const used = c === undefined ? 0 : c.spent + c.held;
          if (used + amount.micros > credited) refuse("balance_exhausted", prepaid, credited, used, amount.micros);
          else remaining.push({ scope, metric: prepaid, remaining: credited - used - amount.micros });
        }
      }
      if (req.countsRequest === true && lim.requests && refusal === undefined) {
        const b = refill(scope, this.#store.getBucket(scope), lim.requests, now);
        if (b.units >= BUCKET_UNITS_PER_TOKEN) {
          buckets.push({ ...b, units: b.units - BUCKET_UNITS_PER_TOKEN });
          remaining.push({ scope, metric: "requests", remaining: Math.floor(b.units / BUCKET_UNITS_PER_TOKEN) - 1 });
        } else refuse("request_rate_exceeded", "requests", lim.requests.burst, lim.requests.burst - Math.floor(b.units / BUCKET_UNITS_PER_TOKEN), 1, bucketWait(b, lim.requests));
      }
    }
    storeConfiguredLimits(this.#store, plans);
    const leaseExpiresAt = now + (req.leaseMs ?? DEFAULT_LEASE_MS);
    const meta = req.meta ? { ...(req.meta.requestId !== undefined ? { requestId: req.meta.requestId } : {}), ...(req.meta.model !== undefined ? { model: req.meta.model } : {}), ...(req.meta.priceVersion !== undefined ? { priceVersion: req.meta.priceVersion } : {}) } : undefined;
    const base = { attemptId, scopes: plans.map((p) => p.scope), currency, amount: amountOf(amount), createdAt: now, leaseExpiresAt, ...(meta ? { meta } : {}) };
    if (refusal !== undefined) {
      this.#store.addRefusal(refusal.scope, windowOf(now, LEDGER_DAY_MS), refusal.reason);
      return refusal;
    }
    for (const ch of charges) this.#adjust(ch, { held: ch.reserved });
    for (const b of buckets) this.#store.putBucket(b);
    // Collected leaf first; reported root first, like the path.
    const result: ReserveGrant = { ok: true, attemptId, leaseExpiresAt, remaining: remaining.reverse() };
    this.#store.putAttempt({ ...base, state: "held", charges, result });
    return result;
  }

  /**
   * Settles an attempt exactly once with its actual cost, or `"unknown"` (held for reconciliation).
   * `detail` is recorded on the settlement; an estimate does not change what is held. An invalid
   * argument is answered `invalid_argument`.
   */
  settle(attemptId: string, actual: LedgerAmount | "unknown", now: number, detail?: SettleDetail): SettleResult {
    const bad = settleProblems(attemptId, actual, now, detail);
    if (bad.length > 0) return invalid("settlement", attemptId, bad);
    const rec = this.#store.getAttempt(attemptId);
    if (rec === undefined) return { ok: false, attemptId, reason: "unknown_attempt" };
    // A lease is settled through the attempts admitted from it and closed by its holder, never settled itself.
    if (rec.lease !== undefined) return { ok: false, attemptId, reason: "conflict", state: rec.state };
    if (rec.settlement !== undefined) return { ok: true, attemptId, state: rec.state as "settled" | "pending_reconciliation", settlement: rec.settlement };
    if (rec.state === "released") return { ok: false, attemptId, reason: "conflict", state: rec.state };
    const wasPending = rec.state === "pending_reconciliation";
    const extra = { ...(detail?.estimate ? { estimate: amountOf(detail.estimate) } : {}), ...(detail?.usage ? { usage: { ...detail.usage } } : {}) };
    if (actual === "unknown") {
      const settlement: Settlement = { actual, overrun: { micros: 0, tokens: 0 }, settledAt: now, ...extra };
      if (!wasPending) for (const ch of rec.charges) this.#adjust(ch, { pending: ch.reserved });
      this.#store.putAttempt({ ...rec, state: "pending_reconciliation", pendingReason: "unknown_usage", settlement });
      return { ok: true, attemptId, state: "pending_reconciliation", settlement };
    }
    this.#book(rec, actual, wasPending);
    const settlement: Settlement = { actual: amountOf(actual), overrun: overrunOf(actual, rec.amount), settledAt: now, ...extra };
    const { pendingReason: _dropped, ...rest } = rec;
    this.#store.putAttempt({ ...rest, state: "settled", settlement });
    return { ok: true, attemptId, state: "settled", settlement };
  }

  /**
   * Returns the whole reservation of an attempt that was never sent. Idempotent. Request tokens
   * it took are not given back. An invalid argument is answered `invalid_argument`.
   */
  release(attemptId: string, now: number): ReleaseResult {
    const bad = keyAndNowProblems("attemptId", attemptId, now);
    if (bad.length > 0) return invalid("release", attemptId, bad);
    const rec = this.#store.getAttempt(attemptId);
    if (rec === undefined) return { ok: false, attemptId, reason: "unknown_attempt" };
    if (rec.lease !== undefined) return { ok: false, attemptId, reason: "conflict", state: rec.state };
    if (rec.state === "released") return { ok: true, attemptId, state: "released", releasedAt: rec.releasedAt ?? now };
    if (rec.settlement !== undefined) return { ok: false, attemptId, reason: "conflict", state: rec.state };
    const wasPending = rec.state === "pending_reconciliation";
    for (const ch of rec.charges) this.#adjust(ch, { held: -ch.reserved, pending: wasPending ? -ch.reserved : 0 });
    const { pendingReason: _dropped, ...rest } = rec;
    this.#store.putAttempt({ ...rest, state: "released", releasedAt: now });
    return { ok: true, attemptId, state: "released", releasedAt: now };
  }

  /**
   * Moves held reservations whose lease expired to `pending_reconciliation` (never refunds them).
   * Returns how many were moved (at most `max` per call).
   */
  expireLeases(now: number, max = 1000): number {
    const expired = this.#store.expiredLeases(now, max);
    for (const rec of expired) {
      if (rec.lease !== undefined && rec.amount.micros === 0 && rec.amount.tokens === 0) {
        // A lease its attempts used up holds nothing that could be owed.
        this.#store.putAttempt({ ...rec, state: "released", releasedAt: now });
        continue;
      }
      for (const ch of rec.charges) this.#adjust(ch, { pending: ch.reserved });
      this.#store.putAttempt({ ...rec, state: "pending_reconciliation", pendingReason: "lease_expired" });
    }
    return expired.length;
  }

  /** When the next held lease expires; undefined when nothing is held. */
  nextLeaseExpiry(): number | undefined {
    return this.#store.earliestLease();
  }

  /** The retention of this ledger: the one last given with a reservation, else {@link DEFAULT_RETENTION_MS}. */
  retention(): number {
    return this.#store.getRetention() ?? DEFAULT_RETENTION_MS;
  }

  /**
   * How long the daily usage rollups are kept: the history last given with a reservation, else
   * {@link DEFAULT_HISTORY_MS}; never less than the retention, so every day whose attempts are
   * still kept also has its rollups.
   */
  history(): number {
    return Math.max(this.#store.getHistory() ?? DEFAULT_HISTORY_MS, this.retention());
  }

  /**
   * Removes, at most `max` rows per call, what is older than the retention (see the module
   * comment): finished attempts (their settlements are already in the rollups), counters of
   * windows that ended and hold nothing, refusal tallies; and rollups of days older than the
   * history. `more` says whether to call again.
   */
  retain(now: number, max = RETENTION_BATCH): RetentionRun {
    const before = now - this.retention();
    const finished = this.#store.finishedBefore(before, max);
    let retired = this.#store.getRetiredBefore() ?? 0;
    for (const a of finished) {
      retired = Math.max(retired, a.createdAt + 1);
      this.#store.deleteAttempt(a);
    }
    if (finished.length > 0 && retired !== this.#store.getRetiredBefore()) this.#store.putRetiredBefore(retired);
    let left = max - finished.length;
    const counters = left > 0 ? this.#store.deleteClosedCounters(before, left) : 0;
    left -= counters;
    // A day's tally goes once the whole day is older than the retention.
    const refusals = left > 0 ? this.#store.deleteRefusalsBefore(before - LEDGER_DAY_MS, left) : 0;
    left -= refusals;
    // A day's rollups go once the whole day is older than the history.
    const rollups = left > 0 ? this.#store.deleteRollupsBefore(now - this.history() - LEDGER_DAY_MS + 1, left) : 0;
    left -= rollups;
    return { attempts: finished.length, counters, refusals, rollups, more: left <= 0 };
  }

  /**
   * When the work a `reserve` answer leaves falls due: a grant's lease expiry, or when a refusal's
   * tally ages out; undefined for an invalid argument (nothing was written).
   */
  wakeFor(result: ReserveResult, now: number): number | undefined {
    if (result.ok) return result.leaseExpiresAt;
    if (result.reason === "invalid_argument") return undefined;
    return windowOf(now, LEDGER_DAY_MS) + LEDGER_DAY_MS + this.retention() + 1;
  }

  /** When the alarm should next run: the earliest lease expiry, or when retention next has work; undefined when neither. */
  nextAlarm(): number | undefined {
    const lease = this.#store.earliestLease();
    const oldest = this.#store.oldestRemovable();
    // Removal is strictly older than the retention: due one millisecond after it.
    const day = this.#store.oldestRollupDay();
    const due = [
      lease,
      oldest === undefined ? undefined : oldest + this.retention() + 1,
      // A rollup day is removed once all of it is older than the history.
      day === undefined ? undefined : day + LEDGER_DAY_MS + this.history(),
    ].filter((t): t is number => t !== undefined);
    return due.length === 0 ? undefined : Math.min(...due);
  }

  /** One attempt's record; undefined when this ledger has none. */
  attempt(attemptId: string): AttemptRecord | undefined {
    return this.#store.getAttempt(attemptId);
  }

  /** Attempts pending reconciliation (either reason), by attempt id, after `afterAttemptId` (paging). */
  pendingReconciliations(limit: number, afterAttemptId?: string): AttemptRecord[] {
    return this.attemptsIn("pending_reconciliation", limit, afterAttemptId);
  }

  /** Attempts in one state, by attempt id, after `afterAttemptId` (paging). */
  attemptsIn(state: AttemptState, limit: number, afterAttemptId?: string): AttemptRecord[] {
    if (!ATTEMPT_STATES.includes(state)) throw new RangeError(`invalid ledger page: state must be one of ${ATTEMPT_STATES.join(", ")}`);
    validatePage(limit, afterAttemptId, "afterAttemptId", isLedgerKey);
    return this.#store.attemptsInState(state, limit, afterAttemptId);
  }

  /**
   * Reconciles an attempt pending reconciliation with its actual cost: the hold is released, the
   * actual added to spent (an overrun recorded as in settle) and the attempt settled, with who
   * resolved it. Repeating it returns the first answer. Audited.
   *
   * @throws RangeError when an argument is invalid.
   */
  resolve(attemptId: string, actual: LedgerAmount, by: LedgerActor, now: number): ResolveResult {
    validateResolve(attemptId, actual, by, now);
    const rec = this.#store.getAttempt(attemptId);
    if (rec === undefined) return { ok: false, attemptId, reason: "unknown_attempt" };
    if (rec.state === "settled" && rec.settlement?.resolvedBy) return { ok: true, attemptId, state: "settled", settlement: rec.settlement };
    if (rec.state !== "pending_reconciliation") return { ok: false, attemptId, reason: "not_pending", state: rec.state };
    this.#book(rec, actual, true);
    const overrun = overrunOf(actual, rec.amount);
    // What an unknown-usage settlement recorded (estimate, usage) stays on the record.
    const earlier = { ...(rec.settlement?.estimate ? { estimate: rec.settlement.estimate } : {}), ...(rec.settlement?.usage ? { usage: rec.settlement.usage } : {}) };
    const settlement: Settlement = { ...earlier, actual: amountOf(actual), overrun, settledAt: now, resolvedBy: { actor: by.actor, ...noteOf(by), at: now } };
    const { pendingReason, ...rest } = rec;
    this.#store.putAttempt({ ...rest, state: "settled", settlement });
    this.#audit({
      action: "resolve",
      attemptId,
      at: now,
      actor: by.actor,
      detail: { scopes: rec.scopes, reserved: rec.amount, actual: amountOf(actual), overrun, ...(pendingReason ? { pendingReason } : {}), ...noteOf(by) },
    });
    return { ok: true, attemptId, state: "settled", settlement };
  }

  /**
   * Credits a scope's prepaid balance in one currency. Idempotent by `by.opId`: a repeated op id
   * returns the first answer and changes nothing. Audited.
   *
   * @throws RangeError when an argument is invalid or the credit would pass {@link MAX_LEDGER_CREDIT}.
   */
  topUp(scope: string, amount: TopUpAmount, by: TopUpBy, now: number): TopUpResult {
    validateTopUp(scope, amount, by, now);
    const prior = this.#store.getTopUp(by.opId);
    if (prior !== undefined) return { ok: true, opId: prior.opId, credited: prior.credited };
    const { currency, micros } = amount;
    const credited = this.#store.getCredited(scope, currency) + micros;
    if (credited > MAX_LEDGER_CREDIT) throw new RangeError(`invalid ledger top-up: amount.micros would credit ${scope} past 2^52`);
    this.#store.putCredited(scope, currency, credited);
    this.#store.putTopUp({ opId: by.opId, scope, currency, micros, credited, at: now, actor: by.actor, ...noteOf(by) });
    this.#audit({ action: "top_up", scope, at: now, actor: by.actor, detail: { opId: by.opId, currency, micros, credited, ...noteOf(by) } });
    return { ok: true, opId: by.opId, credited };
  }

  /** Audit records after `afterSeq` (0: from the first), oldest first. */
  audit(limit: number, afterSeq?: number): AuditRecord[] {
    validatePage(limit, afterSeq, "afterSeq", isSeq);
    return this.#store.auditAfter(afterSeq ?? 0, limit);
  }

  /**
   * A scope's effective limits, its figures in the current period/window of each limited metric,
   * and what it refused today.
   */
  balance(scope: string, now: number): ScopeBalance {
    validateKeyAndNow("balance", "scope", scope, now);
    const limits = this.limits(scope).effective;
    const figures = (metric: LedgerMetric, limit: number, len: number): LimitBalance => {
      const windowStart = len > 0 ? windowOf(now, len) : 0;
      const c = this.#store.getCounter(scope, metric, windowStart) ?? emptyCounter(scope, metric, windowStart, 0);
      return { metric, limit, windowStart, windowEnd: len > 0 ? windowStart + len : 0, spent: c.spent, held: c.held, pending: c.pending, overrun: c.overrun, remaining: Math.max(0, limit - c.spent - c.held) };
    };
    const requests = (lim: RequestLimit): RequestBalance => {
      const b = refill(scope, this.#store.getBucket(scope), lim, now);
      const wait = bucketWait(b, lim);
      return { metric: "requests", perMinute: lim.perMinute, burst: lim.burst, available: Math.floor(b.units / BUCKET_UNITS_PER_TOKEN), ...(wait !== undefined ? { retryAfterMs: wait } : {}) };
    };
    const cur = limits.balance?.currency;
    const today = windowOf(now, LEDGER_DAY_MS);
    const refusals = this.#tallies(scope, today, today + LEDGER_DAY_MS)[0];
    return {
      scope,
      limits,
      ...(limits.money ? { money: figures(`money:${limits.money.currency}`, limits.money.limitMicros, limits.money.periodMs) } : {}),
      ...(limits.tokens ? { tokens: figures("tokens", limits.tokens.limit, limits.tokens.windowMs) } : {}),
      ...(cur ? { balance: figures(`balance:${cur}`, this.#store.getCredited(scope, cur), 0) } : {}),
      ...(limits.requests ? { requests: requests(limits.requests) } : {}),
      ...(refusals ? { refusals } : {}),
    };
  }

  /** The reservations a scope refused (as the narrowest failing scope) on each UTC day overlapping `[fromMs, toMs)` that has any. */
  refusals(scope: string, fromMs: number, toMs: number): RefusalTally[] {
    validateReport(scope, fromMs, toMs, "refusal report");
    return this.#tallies(scope, windowOf(fromMs, LEDGER_DAY_MS), toMs);
  }

  /** Every counter of a scope (all periods, windows, lifetime counters and prepaid balances). */
  usage(scope: string): LedgerCounter[] {
    if (!isLedgerKey(scope)) throw new RangeError("invalid ledger scope: scope must be a string of 1..256 chars");
    return this.#store.countersOf(scope);
  }

  /**
   * Usage of the attempts that charged `scope` and were created in `[fromMs, toMs)`, by model,
   * price version and currency (`""` where the attempt carried none): settled attempts at their
   * actual cost, held and pending ones at their reservation; released attempts are left out.
   * Settled usage of the whole UTC days in the range comes from the daily rollups (so it outlives
   * the attempt records, for the history); that of a day the range cuts, from the attempt records.
   * A range whose edge cuts a day of which retention already removed attempts of this scope is
   * refused (`range_cuts_rollup`). Bounded: only the earliest {@link USAGE_REPORT_MAX_ATTEMPTS}
   * attempt records of the range are scanned, so a busier range must be asked for in shorter pieces.
   *
   * @throws RangeError when an argument is invalid.
   */
  usageReport(scope: string, fromMs: number, toMs: number): UsageReport {
    validateReport(scope, fromMs, toMs);
    const retired = this.#store.getRetiredBefore() ?? 0;
    // Whole days: [wholeFrom, wholeTo); the cut parts on either side are read from the attempts.
    const wholeFrom = Math.min(toMs, fromMs === windowOf(fromMs, LEDGER_DAY_MS) ? fromMs : windowOf(fromMs, LEDGER_DAY_MS) + LEDGER_DAY_MS);
    const wholeTo = Math.max(wholeFrom, windowOf(toMs, LEDGER_DAY_MS));
    for (const [partFrom, partTo] of [[fromMs, wholeFrom], [wholeTo, toMs]] as const) {
      const dayStart = windowOf(partFrom, LEDGER_DAY_MS);
      if (partFrom >= partTo || partFrom >= retired || !this.#store.hasRollup(scope, dayStart)) continue;
      const day = new Date(dayStart).toISOString().slice(0, 10);
      return { ok: false, reason: "range_cuts_rollup", dayStart, message: `the range cuts through ${day} (UTC), of which ${scope}'s usage is kept only as a daily total: start and end the range at 00:00 UTC` };
    }
    const rows = new Map<string, { -readonly [K in keyof UsageRow]: UsageRow[K] }>();
    const rowOf = (model: string, priceVersion: string, currency: string) => {
      const key = JSON.stringify([model, priceVersion, currency]);
      let row = rows.get(key);
      if (row === undefined) rows.set(key, (row = { model, priceVersion, currency, attempts: 0, settledMicros: 0, settledTokens: 0, pendingMicros: 0, pendingTokens: 0 }));
      return row;
    };
    for (const a of this.#store.attemptsCharging(scope, fromMs, toMs, USAGE_REPORT_MAX_ATTEMPTS)) {
      // A whole day's settlements are counted by its rollups.
      const cut = a.createdAt < wholeFrom || a.createdAt >= wholeTo;
      const settled = cut && a.state === "settled" && a.settlement !== undefined && a.settlement.actual !== "unknown" ? a.settlement.actual : undefined;
      // An open lease's slice is capacity lent to an isolate, not usage; an expired one may be owed.
      if (a.lease !== undefined && a.state === "held") continue;
      const pending = a.state === "held" || a.state === "pending_reconciliation" ? a.amount : undefined;
      if (settled === undefined && pending === undefined) continue;
      const row = rowOf(a.meta?.model ?? "", a.meta?.priceVersion ?? "", a.currency);
      row.attempts++;
      if (settled) (row.settledMicros += settled.micros), (row.settledTokens += settled.tokens);
      if (pending) (row.pendingMicros += pending.micros), (row.pendingTokens += pending.tokens);
    }
    for (const r of wholeFrom < wholeTo ? this.#store.rollupsOf(scope, wholeFrom, wholeTo) : []) {
      const row = rowOf(r.model, r.priceVersion, r.currency);
      row.attempts += r.attempts;
      row.settledMicros += r.settledMicros;
      row.settledTokens += r.settledTokens;
    }
    return { ok: true, rows: [...rows.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, r]) => r) };
  }

  /**
   * A scope's settled usage per UTC day, model, price version and currency, of the days starting
   * in `[fromMs, toMs)` (the day holding `fromMs` included): its daily rollups, oldest day first.
   * They equal the settled spend the books charged for attempts admitted that day, and are kept
   * for the history ({@link history}). Bounded by the history's days times the models priced.
   *
   * @throws RangeError when an argument is invalid.
   */
  dailyUsage(scope: string, fromMs: number, toMs: number): UsageRollup[] {
    validateReport(scope, fromMs, toMs, "daily usage");
    return this.#store
      .rollupsOf(scope, windowOf(fromMs, LEDGER_DAY_MS), toMs)
      .sort((a, b) => a.dayStart - b.dayStart || (a.model < b.model ? -1 : a.model > b.model ? 1 : 0) || (a.priceVersion < b.priceVersion ? -1 : a.priceVersion > b.priceVersion ? 1 : 0) || (a.currency < b.currency ? -1 : a.currency > b.currency ? 1 : 0));
  }

  /**
   * Every scope's settled usage over the days starting in `[fromMs, toMs)` (the day holding
   * `fromMs` included), per model and currency: the daily rollups summed, so the answer is as
   * large as the scopes and models that spent, whatever the days. Ordered by scope, model, currency.
   *
   * @throws RangeError when an argument is invalid.
   */
  spendByScope(fromMs: number, toMs: number): ScopeSpend[] {
    validateReport("all", fromMs, toMs, "spend by scope");
    const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
    return this.#store.rollupTotals(windowOf(fromMs, LEDGER_DAY_MS), toMs).sort((a, b) => cmp(a.scope, b.scope) || cmp(a.model, b.model) || cmp(a.currency, b.currency));
  }

  /** The refusal tallies of the days starting in `[fromDay, toMs)`, oldest first. */
  #tallies(scope: string, fromDay: number, toMs: number): RefusalTally[] {
    const days = new Map<number, { dayStart: number; dayEnd: number; total: number; byReason: Partial<Record<RefusalReason, number>> }>();
    for (const r of this.#store.refusalsOf(scope, fromDay, toMs)) {
      let d = days.get(r.dayStart);
      if (d === undefined) days.set(r.dayStart, (d = { dayStart: r.dayStart, dayEnd: r.dayStart + LEDGER_DAY_MS, total: 0, byReason: {} }));
      d.total += r.count;
      d.byReason[r.reason] = (d.byReason[r.reason] ?? 0) + r.count;
    }
    return [...days.values()].sort((a, b) => a.dayStart - b.dayStart);
  }

  /** Books an actual cost against an attempt's charges, releasing its hold (and its pending part). */
  #book(rec: AttemptRecord, actual: LedgerAmount, wasPending: boolean): void {
    for (const ch of rec.charges) {
      const spent = partOf(ch.metric, actual);
      this.#adjust(ch, { held: -ch.reserved, pending: wasPending ? -ch.reserved : 0, spent, overrun: Math.max(0, spent - ch.reserved) });
    }
    rollUp(this.#store, rec, actual);
  }

  #audit(entry: DistributiveOmit<AuditRecord, "seq">): void {
    this.#store.putAudit({ ...entry, seq: this.#store.nextAuditSeq() } as AuditRecord);
  }

  #adjust(ch: LedgerCharge, d: CounterDelta): void {
    adjustCounter(this.#store, ch, d);
  }

}
