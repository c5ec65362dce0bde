/**
 * Strict budget ledger: hierarchical money and token budgets that admitted work can never exceed.
 *
 * Pure logic over a synchronous store and an explicit `now`: the BudgetLedger Durable Object (one
 * per financial root, i.e. tenant) runs every call inside one `transactionSync` with no `await`
 * between read and write, which is what makes check-and-reserve atomic under any concurrency.
 *
 * ## Model
 *
 * - A **scope path** names the financial scopes an attempt is charged to, root first:
 *   `["org:acme", "team:ml", "project:x", "key:k1"]`. Every scope on the path is checked and charged.
 * - A scope may carry **limits**: a money budget per period (integer micro-units of an explicit
 *   currency) and a token limit per window. Periods and windows are aligned to the epoch
 *   (`floor(now / periodMs) * periodMs`). A scope without a limit for a metric is unlimited for it
 *   but its usage is still counted (lifetime counter, window start 0).
 * - A **reservation** is the priced worst case of one attempt (micro-units and tokens). `reserve`
 *   checks every scope and charges all of them or none; on refusal the narrowest (leaf-most)
 *   failing scope is reported and nothing is written but the refusal record. Usage already spent,
 *   overruns included, counts against the limit: admission needs `spent + held + amount <= limit`.
 * - Each attempt id is reserved at most once: a second `reserve` with the same id returns the first
 *   result (granted or refused), whatever it asks for.
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
 *   attempt's one settlement and is accepted; after `settle(id, "unknown")` the attempt is settled
 *   and only reconciliation (an admin act, not this module) may change it.
 * - `released`: the attempt was never sent (`release`); the reservation is returned in full.
 *   Allowed from `held` and from a lease-expired `pending_reconciliation` (no settlement yet).
 * - `refused`: `reserve` refused it; nothing is charged.
 *
 * `settle` and `release` are idempotent: repeating the same one returns the first answer and changes
 * nothing. A settle after a release (or a release after a settle) is refused as `conflict`.
 *
 * Integer arithmetic only: every amount is a non-negative safe integer bounded by
 * {@link MAX_LEDGER_AMOUNT}, so sums stay exact.
 */

/** Largest single amount (micro-units or tokens) and largest limit the ledger accepts: 2^50. */
export const MAX_LEDGER_AMOUNT = 2 ** 50;
/** Longest scope path. */
export const MAX_SCOPE_DEPTH = 8;
/** Longest scope name and attempt id. */
export const MAX_LEDGER_KEY_LENGTH = 256;
/** Default time a reservation is held before its lease expires into reconciliation. */
export const DEFAULT_LEASE_MS = 10 * 60_000;
/** Longest lease a reservation may ask for. */
export const MAX_LEASE_MS = 24 * 60 * 60_000;

const CURRENCY = /^[A-Z]{3}$/;

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

export interface ScopeLimits {
  readonly money?: MoneyLimit;
  readonly tokens?: TokenLimit;
}

/** A priced worst case (reserve) or an actual cost (settle). */
export interface LedgerAmount {
  readonly micros: number;
  readonly tokens: number;
}

export interface ReserveRequest {
  /** Root first; every scope on the path is charged. */
  readonly scopes: ScopePath;
  /** Currency of `amount.micros`. */
  readonly currency: string;
  /** The priced worst case. */
  readonly amount: LedgerAmount;
  /** Now, epoch ms (the ledger's clock). */
  readonly now: number;
  /** How long the reservation may stay held unsettled, ms; {@link DEFAULT_LEASE_MS} when omitted. */
  readonly leaseMs?: number;
}

/** A metric a counter tracks: money in one currency, or tokens. */
export type LedgerMetric = `money:${string}` | "tokens";

/** One counter: a scope's usage of one metric in one period/window. */
export interface LedgerCounter {
  readonly scope: string;
  readonly metric: LedgerMetric;
  /** Start of the period/window (epoch ms); 0 for an unlimited (lifetime) counter. */
  readonly windowStart: number;
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
  readonly reserved: number;
}

export type AttemptState = "held" | "settled" | "pending_reconciliation" | "released" | "refused";
export type PendingReason = "unknown_usage" | "lease_expired";

export type RefusalReason = "money_budget_exceeded" | "token_limit_exceeded" | "currency_mismatch";

export type ReserveResult =
  | { readonly ok: true; readonly attemptId: string; readonly leaseExpiresAt: number }
  | {
      readonly ok: false;
      readonly attemptId: string;
      readonly reason: RefusalReason;
      /** The narrowest failing scope. */
      readonly scope: string;
      readonly metric: LedgerMetric;
      /** The limit, and what was already spent + held in its current period/window. */
      readonly limit: number;
      readonly used: number;
      readonly requested: number;
      /** Until the period/window ends (ms); absent for a currency mismatch. */
      readonly retryAfterMs?: number;
    };

export interface Settlement {
  /** The actual cost, or `"unknown"` when the usage was not reported. */
  readonly actual: LedgerAmount | "unknown";
  /** Actual above the reservation (0 when none or unknown). */
  readonly overrun: LedgerAmount;
  readonly settledAt: number;
}

export type SettleResult =
  | { readonly ok: true; readonly attemptId: string; readonly state: "settled" | "pending_reconciliation"; readonly settlement: Settlement }
  | { readonly ok: false; readonly attemptId: string; readonly reason: "unknown_attempt" | "not_reserved" | "conflict"; readonly state?: AttemptState };

export type ReleaseResult =
  | { readonly ok: true; readonly attemptId: string; readonly state: "released"; readonly releasedAt: number }
  | { readonly ok: false; readonly attemptId: string; readonly reason: "unknown_attempt" | "not_reserved" | "conflict"; readonly state?: AttemptState };

/** One attempt's persisted record: plain data. */
export interface AttemptRecord {
  readonly attemptId: string;
  readonly state: AttemptState;
  readonly scopes: ScopePath;
  readonly currency: string;
  readonly amount: LedgerAmount;
  readonly charges: readonly LedgerCharge[];
  readonly createdAt: number;
  /** Epoch ms; meaningful while `held`. */
  readonly leaseExpiresAt: number;
  /** The first `reserve` answer, returned again to a repeated reserve. */
  readonly result: ReserveResult;
  readonly pendingReason?: PendingReason;
  readonly settlement?: Settlement;
  readonly releasedAt?: number;
}

/**
 * Synchronous storage. Implementations do no locking of their own: the caller runs each
 * {@link BudgetLedgerCore} call atomically (one SQLite transaction).
 */
export interface LedgerStore {
  getLimits(scope: string): ScopeLimits | undefined;
  putLimits(scope: string, limits: ScopeLimits): void;
  getCounter(scope: string, metric: LedgerMetric, windowStart: number): LedgerCounter | undefined;
  putCounter(counter: LedgerCounter): void;
  /** Every counter of a scope. */
  countersOf(scope: string): LedgerCounter[];
  getAttempt(attemptId: string): AttemptRecord | undefined;
  putAttempt(record: AttemptRecord): void;
  /** Attempts in state `held` whose lease expired (`leaseExpiresAt <= now`), at most `limit`. */
  expiredLeases(now: number, limit: number): AttemptRecord[];
  /** The smallest `leaseExpiresAt` of the attempts in state `held`; undefined when none. */
  earliestLease(): number | undefined;
}

/** A scope's figures for one limited metric in the current period/window. */
export interface LimitBalance {
  readonly metric: LedgerMetric;
  readonly limit: number;
  readonly windowStart: number;
  readonly windowEnd: number;
  readonly spent: number;
  readonly held: number;
  readonly pending: number;
  readonly overrun: number;
  /** `limit - spent - held`, never below 0. */
  readonly remaining: number;
}

export interface ScopeBalance {
  readonly scope: string;
  readonly limits: ScopeLimits;
  readonly money?: LimitBalance;
  readonly tokens?: LimitBalance;
}

const isAmount = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0 && (n as number) <= MAX_LEDGER_AMOUNT;
const isKey = (s: unknown): s is string => typeof s === "string" && s.length > 0 && s.length <= MAX_LEDGER_KEY_LENGTH;
const isPositiveMs = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) > 0;

/** @throws RangeError naming every bad field. */
export function validateLimits(scope: string, limits: ScopeLimits): void {
  const bad: string[] = [];
  if (!isKey(scope)) bad.push(`scope must be a string of 1..${MAX_LEDGER_KEY_LENGTH} chars`);
  if (limits === null || typeof limits !== "object") bad.push("limits must be an object");
  else {
    const m = limits.money;
    if (m !== undefined) {
      if (!CURRENCY.test(String(m?.currency))) bad.push("money.currency must be an ISO 4217 code (3 capital letters)");
      if (!isAmount(m?.limitMicros)) bad.push(`money.limitMicros must be an integer in 0..2^50, got ${String(m?.limitMicros)}`);
      if (!isPositiveMs(m?.periodMs)) bad.push(`money.periodMs must be a positive integer, got ${String(m?.periodMs)}`);
    }
    const t = limits.tokens;
    if (t !== undefined) {
      if (!isAmount(t?.limit)) bad.push(`tokens.limit must be an integer in 0..2^50, got ${String(t?.limit)}`);
      if (!isPositiveMs(t?.windowMs)) bad.push(`tokens.windowMs must be a positive integer, got ${String(t?.windowMs)}`);
    }
  }
  if (bad.length > 0) throw new RangeError(`invalid ledger limits: ${bad.join("; ")}`);
}

function validateAmount(what: string, a: LedgerAmount, bad: string[]): void {
  if (!isAmount(a?.micros)) bad.push(`${what}.micros must be an integer in 0..2^50, got ${String(a?.micros)}`);
  if (!isAmount(a?.tokens)) bad.push(`${what}.tokens must be an integer in 0..2^50, got ${String(a?.tokens)}`);
}

/** @throws RangeError naming every bad field. */
export function validateReserve(attemptId: string, req: ReserveRequest): void {
  const bad: string[] = [];
  if (!isKey(attemptId)) bad.push(`attemptId must be a string of 1..${MAX_LEDGER_KEY_LENGTH} chars`);
  const s = req?.scopes;
  if (!Array.isArray(s) || s.length === 0 || s.length > MAX_SCOPE_DEPTH || !s.every(isKey) || new Set(s).size !== s.length) {
    bad.push(`scopes must be 1..${MAX_SCOPE_DEPTH} distinct strings of 1..${MAX_LEDGER_KEY_LENGTH} chars, root first`);
  }
  if (!CURRENCY.test(String(req?.currency))) bad.push("currency must be an ISO 4217 code (3 capital letters)");
  validateAmount("amount", req?.amount, bad);
  if (!Number.isSafeInteger(req?.now) || req.now < 0) bad.push(`now must be a non-negative integer (epoch ms), got ${String(req?.now)}`);
  if (req?.leaseMs !== undefined && !(isPositiveMs(req.leaseMs) && req.leaseMs <= MAX_LEASE_MS)) bad.push(`leaseMs must be an integer in 1..${MAX_LEASE_MS}`);
  if (bad.length > 0) throw new RangeError(`invalid ledger reservation: ${bad.join("; ")}`);
}

const windowOf = (now: number, len: number) => now - (now % len);
const emptyCounter = (scope: string, metric: LedgerMetric, windowStart: number): LedgerCounter => ({ scope, metric, windowStart, spent: 0, held: 0, pending: 0, overrun: 0 });

/** The ledger rules over one store (see the module comment). */
export class BudgetLedgerCore {
  readonly #store: LedgerStore;

  constructor(store: LedgerStore) {
    this.#store = store;
  }

  /** Sets (replaces) a scope's limits. Usage already booked is kept. */
  setLimits(scope: string, limits: ScopeLimits): void {
    validateLimits(scope, limits);
    const clean: ScopeLimits = {
      ...(limits.money ? { money: { currency: limits.money.currency, limitMicros: limits.money.limitMicros, periodMs: limits.money.periodMs } } : {}),
      ...(limits.tokens ? { tokens: { limit: limits.tokens.limit, windowMs: limits.tokens.windowMs } } : {}),
    };
    this.#store.putLimits(scope, clean);
  }

  limits(scope: string): ScopeLimits {
    return this.#store.getLimits(scope) ?? {};
  }

  /**
   * Checks every scope of the path and reserves the amount in all of them, or in none.
   *
   * @throws RangeError when an argument is invalid (nothing is read or written).
   */
  reserve(attemptId: string, req: ReserveRequest): ReserveResult {
    validateReserve(attemptId, req);
    const existing = this.#store.getAttempt(attemptId);
    if (existing !== undefined) return existing.result;
    const { now, currency, amount } = req;
    const money: LedgerMetric = `money:${currency}`;
    const charges: LedgerCharge[] = [];
    let refusal: ReserveResult | undefined;
    // Leaf first, so the first failure found is the narrowest one.
    for (const scope of [...req.scopes].reverse()) {
      const limits = this.limits(scope);
      const checks: [LedgerMetric, number, { limit: number; len: number } | undefined][] = [
        [money, amount.micros, limits.money ? { limit: limits.money.limitMicros, len: limits.money.periodMs } : undefined],
        ["tokens", amount.tokens, limits.tokens ? { limit: limits.tokens.limit, len: limits.tokens.windowMs } : undefined],
      ];
      if (limits.money && limits.money.currency !== currency && refusal === undefined) {
        refusal = { ok: false, attemptId, reason: "currency_mismatch", scope, metric: money, limit: limits.money.limitMicros, used: 0, requested: amount.micros };
      }
      for (const [metric, requested, limit] of checks) {
        const windowStart = limit ? windowOf(now, limit.len) : 0;
        charges.push({ scope, metric, windowStart, reserved: requested });
        if (limit === undefined || refusal !== undefined) continue;
        const c = this.#store.getCounter(scope, metric, windowStart) ?? emptyCounter(scope, metric, windowStart);
        const used = c.spent + c.held;
        if (used + requested > limit.limit) {
          const reason: RefusalReason = metric === "tokens" ? "token_limit_exceeded" : "money_budget_exceeded";
          refusal = { ok: false, attemptId, reason, scope, metric, limit: limit.limit, used, requested, retryAfterMs: windowStart + limit.len - now };
        }
      }
    }
    const leaseExpiresAt = now + (req.leaseMs ?? DEFAULT_LEASE_MS);
    const base = { attemptId, scopes: [...req.scopes], currency, amount: { micros: amount.micros, tokens: amount.tokens }, createdAt: now, leaseExpiresAt };
    if (refusal !== undefined) {
      this.#store.putAttempt({ ...base, state: "refused", charges: [], result: refusal });
      return refusal;
    }
    for (const ch of charges) this.#adjust(ch, { held: ch.reserved });
    const result: ReserveResult = { ok: true, attemptId, leaseExpiresAt };
    this.#store.putAttempt({ ...base, state: "held", charges, result });
    return result;
  }

  /**
   * Settles an attempt exactly once with its actual cost, or `"unknown"` (held for reconciliation).
   *
   * @throws RangeError when an argument is invalid.
   */
  settle(attemptId: string, actual: LedgerAmount | "unknown", now: number): SettleResult {
    const bad: string[] = [];
    if (!isKey(attemptId)) bad.push(`attemptId must be a string of 1..${MAX_LEDGER_KEY_LENGTH} chars`);
    if (actual !== "unknown") validateAmount("actual", actual, bad);
    if (!Number.isSafeInteger(now)) bad.push("now must be an integer (epoch ms)");
    if (bad.length > 0) throw new RangeError(`invalid ledger settlement: ${bad.join("; ")}`);
    const rec = this.#store.getAttempt(attemptId);
    if (rec === undefined) return { ok: false, attemptId, reason: "unknown_attempt" };
    if (rec.settlement !== undefined) return { ok: true, attemptId, state: rec.state as "settled" | "pending_reconciliation", settlement: rec.settlement };
    if (rec.state === "refused") return { ok: false, attemptId, reason: "not_reserved", state: rec.state };
    if (rec.state === "released") return { ok: false, attemptId, reason: "conflict", state: rec.state };
    const wasPending = rec.state === "pending_reconciliation";
    if (actual === "unknown") {
      const settlement: Settlement = { actual, overrun: { micros: 0, tokens: 0 }, settledAt: now };
      if (!wasPending) for (const ch of rec.charges) this.#adjust(ch, { pending: ch.reserved });
      this.#store.putAttempt({ ...rec, state: "pending_reconciliation", pendingReason: "unknown_usage", settlement });
      return { ok: true, attemptId, state: "pending_reconciliation", settlement };
    }
    const overrun = { micros: Math.max(0, actual.micros - rec.amount.micros), tokens: Math.max(0, actual.tokens - rec.amount.tokens) };
    for (const ch of rec.charges) {
      const spent = ch.metric === "tokens" ? actual.tokens : actual.micros;
      this.#adjust(ch, { held: -ch.reserved, pending: wasPending ? -ch.reserved : 0, spent, overrun: Math.max(0, spent - ch.reserved) });
    }
    const settlement: Settlement = { actual: { micros: actual.micros, tokens: actual.tokens }, overrun, settledAt: now };
    const { pendingReason: _dropped, ...rest } = rec;
    this.#store.putAttempt({ ...rest, state: "settled", settlement });
    return { ok: true, attemptId, state: "settled", settlement };
  }

  /** Returns the whole reservation of an attempt that was never sent. Idempotent. */
  release(attemptId: string, now: number): ReleaseResult {
    if (!isKey(attemptId)) throw new RangeError(`invalid ledger release: attemptId must be a string of 1..${MAX_LEDGER_KEY_LENGTH} chars`);
    if (!Number.isSafeInteger(now)) throw new RangeError("invalid ledger release: now must be an integer (epoch ms)");
    const rec = this.#store.getAttempt(attemptId);
    if (rec === undefined) return { ok: false, attemptId, reason: "unknown_attempt" };
    if (rec.state === "released") return { ok: true, attemptId, state: "released", releasedAt: rec.releasedAt ?? now };
    if (rec.state === "refused") return { ok: false, attemptId, reason: "not_reserved", state: rec.state };
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
      for (const ch of rec.charges) this.#adjust(ch, { pending: ch.reserved });
      this.#store.putAttempt({ ...rec, state: "pending_reconciliation", pendingReason: "lease_expired" });
    }
    return expired.length;
  }

  /** When the next held lease expires (to schedule the alarm); undefined when nothing is held. */
  nextLeaseExpiry(): number | undefined {
    return this.#store.earliestLease();
  }

  attempt(attemptId: string): AttemptRecord | undefined {
    return this.#store.getAttempt(attemptId);
  }

  /** A scope's limits and its figures in the current period/window of each limited metric. */
  balance(scope: string, now: number): ScopeBalance {
    const limits = this.limits(scope);
    const figures = (metric: LedgerMetric, limit: number, len: number): LimitBalance => {
      const windowStart = windowOf(now, len);
      const c = this.#store.getCounter(scope, metric, windowStart) ?? emptyCounter(scope, metric, windowStart);
      return { metric, limit, windowStart, windowEnd: windowStart + len, spent: c.spent, held: c.held, pending: c.pending, overrun: c.overrun, remaining: Math.max(0, limit - c.spent - c.held) };
    };
    return {
      scope,
      limits,
      ...(limits.money ? { money: figures(`money:${limits.money.currency}`, limits.money.limitMicros, limits.money.periodMs) } : {}),
      ...(limits.tokens ? { tokens: figures("tokens", limits.tokens.limit, limits.tokens.windowMs) } : {}),
    };
  }

  /** Every counter of a scope (all periods, windows and lifetime counters). */
  usage(scope: string): LedgerCounter[] {
    return this.#store.countersOf(scope);
  }

  #adjust(ch: LedgerCharge, d: { held?: number; pending?: number; spent?: number; overrun?: number }): void {
    const c = this.#store.getCounter(ch.scope, ch.metric, ch.windowStart) ?? emptyCounter(ch.scope, ch.metric, ch.windowStart);
    const next = { ...c, held: c.held + (d.held ?? 0), pending: c.pending + (d.pending ?? 0), spent: c.spent + (d.spent ?? 0), overrun: c.overrun + (d.overrun ?? 0) };
    if (next.held < 0 || next.pending < 0 || next.pending > next.held || !Number.isSafeInteger(next.spent)) throw new Error(`ledger books out of balance at ${ch.scope} ${ch.metric}`);
    this.#store.putCounter(next);
  }
}

/** An in-memory {@link LedgerStore} (tests; single-isolate use). */
export class MemoryLedgerStore implements LedgerStore {
  readonly #limits = new Map<string, ScopeLimits>();
  readonly #counters = new Map<string, LedgerCounter>();
  readonly #attempts = new Map<string, AttemptRecord>();

  getLimits(scope: string): ScopeLimits | undefined {
    return this.#limits.get(scope);
  }
  putLimits(scope: string, limits: ScopeLimits): void {
    this.#limits.set(scope, structuredClone(limits));
  }
  getCounter(scope: string, metric: LedgerMetric, windowStart: number): LedgerCounter | undefined {
    return this.#counters.get(JSON.stringify([scope, metric, windowStart]));
  }
  putCounter(c: LedgerCounter): void {
    this.#counters.set(JSON.stringify([c.scope, c.metric, c.windowStart]), { ...c });
  }
  countersOf(scope: string): LedgerCounter[] {
    return [...this.#counters.values()].filter((c) => c.scope === scope);
  }
  getAttempt(attemptId: string): AttemptRecord | undefined {
    return this.#attempts.get(attemptId);
  }
  putAttempt(record: AttemptRecord): void {
    this.#attempts.set(record.attemptId, structuredClone(record));
  }
  expiredLeases(now: number, limit: number): AttemptRecord[] {
    return [...this.#attempts.values()].filter((a) => a.state === "held" && a.leaseExpiresAt <= now).slice(0, limit);
  }
  earliestLease(): number | undefined {
    let min: number | undefined;
    for (const a of this.#attempts.values()) if (a.state === "held" && (min === undefined || a.leaseExpiresAt < min)) min = a.leaseExpiresAt;
    return min;
  }
  /** Every attempt record (tests). */
  attempts(): AttemptRecord[] {
    return [...this.#attempts.values()];
  }
}
