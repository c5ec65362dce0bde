/**
 * Budget leases: a slice of every scope on one path, held in the ledger like a reservation, from
 * which one isolate admits attempts locally; and settlement batches, which report those attempts
 * (and settle per-attempt reservations) many at a time.
 *
 * ## Why a lease keeps the cap exact
 *
 * A lease is granted in one transaction, all scopes of its path or none, and its slice counts as
 * `held` on every counter it charges, exactly like a reservation. The holder admits an attempt
 * only while the attempt's worst case fits what is left of its slice, so everything admitted —
 * from slices and one by one — is covered by something held, and `spent + held` never passes a
 * limit. A settlement moves the attempt's actual cost from the slice's hold to `spent`; the rest
 * of its worst case stays in the slice for the next attempt. Closing a lease returns what is left.
 *
 * ## Near a limit
 *
 * A lease asks for `slices` worst cases of the attempt that needs it. It is granted the largest
 * whole number of them that leaves at least as much again on every limit of the path (money,
 * tokens, prepaid balance, request bucket), and only when that is at least two. Otherwise it
 * answers `near_limit`, writes nothing, and the attempt reserves on its own: close to a limit,
 * every attempt goes to the ledger one by one, so the last worst cases that fit are admitted
 * exactly as without leases.
 *
 * ## A holder that disappears
 *
 * The ledger learns of an attempt admitted from a lease only when a batch reports it. So a lease
 * that was never closed cannot tell its unspent part from attempts its holder admitted and never
 * reported: when it expires, what is left of it moves to `pending_reconciliation` (reason
 * `lease_expired`) like any unsettled reservation, and is never refunded. Attempts reported
 * afterwards still settle against it (taking their cost out of the pending part), and a late
 * `close` — the holder's statement that every attempt it admitted is reported — returns the rest.
 * An operator resolves the remainder from the provider's records.
 *
 * ## Batches
 *
 * A batch is applied in order in one transaction: per-attempt `settle` and `release` exactly as
 * the single calls; attempts from a lease are recorded (state, settlement, the lease they came
 * from) the first time their id is seen and answered with their first result afterwards, so a
 * retried batch changes nothing it already changed.
 */
import { adjustCounter, amountOf, overrunOf, partOf, planScopes, refill, rollUp, storeConfiguredLimits, windowOf } from "./ledger-books.ts";
import type { BudgetLedgerCore } from "./ledger.ts";
import {
  BUCKET_UNITS_PER_TOKEN,
  DEFAULT_LEASE_MS,
  MAX_LEASE_SLICES,
  MAX_LEDGER_KEY_LENGTH,
  type AcquireResult,
  type AttemptRecord,
  type CloseResult,
  type LeaseAsk,
  type LeaseGrant,
  type LeaseRequest,
  type LeaseResult,
  type LeaseUse,
  type LedgerAmount,
  type LedgerCharge,
  type LedgerInvalidArgument,
  type LedgerMetric,
  type LedgerStore,
  type LimitRemaining,
  type ReleaseResult,
  type ReserveRequest,
  type SettleDetail,
  type SettleResult,
  type SettlementItem,
  type SettlementItemResult,
} from "./ledger-types.ts";
import { amountProblems, isLedgerKey, reserveProblems, settleProblems } from "./ledger-validate.ts";

const ZERO: LedgerAmount = { micros: 0, tokens: 0 };
const minAmount = (a: LedgerAmount, b: LedgerAmount): LedgerAmount => ({ micros: Math.min(a.micros, b.micros), tokens: Math.min(a.tokens, b.tokens) });
const minus = (a: LedgerAmount, b: LedgerAmount): LedgerAmount => ({ micros: a.micros - b.micros, tokens: a.tokens - b.tokens });
const times = (a: LedgerAmount, n: number): LedgerAmount => ({ micros: a.micros * n, tokens: a.tokens * n });
const isCount = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0;

function invalid(what: string, id: unknown, bad: readonly string[]): LedgerInvalidArgument {
  return { ok: false, attemptId: typeof id === "string" ? id.slice(0, MAX_LEDGER_KEY_LENGTH) : "", reason: "invalid_argument", message: `invalid ledger ${what}: ${bad.join("; ")}` };
}

function leaseUseProblems(use: unknown): string[] {
  if (use === undefined) return [];
  if (use === null || typeof use !== "object") return ["lease must be an object"];
  const u = use as Record<string, unknown>;
  return [
    ...(isLedgerKey(u.leaseId) ? [] : ["lease.leaseId must name a lease"]),
    ...amountProblems(u.amount, "lease.amount"),
    ...(isCount(u.admittedAt) ? [] : ["lease.admittedAt must be epoch ms"]),
  ];
}

/** The lease rules over one store, beside the per-attempt rules they fall back to. */
export class LeaseRules {
  readonly #store: LedgerStore;
  readonly #core: BudgetLedgerCore;
  /** Lease records a batch changed, written once at its end (a batch may hold hundreds of their attempts). */
  #batchLeases: Map<string, AttemptRecord> | undefined;

  constructor(store: LedgerStore, core: BudgetLedgerCore) {
    this.#store = store;
    this.#core = core;
  }

  /**
   * Grants a slice of `req.slices` worst cases (`req.amount` each), fewer nearer a limit, or
   * answers `near_limit` (see the module comment). Idempotent by lease id.
   */
  lease(leaseId: string, req: LeaseRequest): LeaseResult {
    const bad = reserveProblems(leaseId, req);
    if (req !== null && typeof req === "object") {
      if (!(Number.isSafeInteger(req.slices) && req.slices >= 2 && req.slices <= MAX_LEASE_SLICES)) bad.push(`slices must be an integer in 2..${MAX_LEASE_SLICES}`);
      if (!(Number.isSafeInteger(req.admitMs) && req.admitMs >= 1 && req.admitMs <= (req.leaseMs ?? DEFAULT_LEASE_MS))) bad.push("admitMs must be an integer in 1..leaseMs");
    }
    if (bad.length > 0) return invalid("lease", leaseId, bad);
    const existing = this.#store.getAttempt(leaseId);
    if (existing !== undefined) return existing.lease ? grantOf(existing) : invalid("lease", leaseId, ["leaseId names an attempt"]);
    const { now, currency, amount } = req;
    if (req.retentionMs !== undefined && req.retentionMs !== this.#store.getRetention()) this.#store.putRetention(req.retentionMs);
    if (req.historyMs !== undefined && req.historyMs !== this.#store.getHistory()) this.#store.putHistory(req.historyMs);
    const plans = planScopes(this.#store, req.scopes);
    storeConfiguredLimits(this.#store, plans);
    const nearLimit = { ok: false, leaseId, reason: "near_limit" } as const;
    const money: LedgerMetric = `money:${currency}`;
    const prepaid: LedgerMetric = `balance:${currency}`;
    // How many worst cases fit with as much again left, on the tightest limit of the path.
    let n = req.slices;
    let requestTokens = Infinity;
    const room: { scope: string; metric: LedgerMetric; available: number; part: number; windowStart: number; windowEnd: number; limited: boolean }[] = [];
    for (const { scope, effective: lim } of plans) {
      if ((lim.money && lim.money.currency !== currency) || (lim.balance && lim.balance.currency !== currency)) return nearLimit;
      const periodic: [LedgerMetric, number, { limit: number; len: number } | undefined][] = [
        [money, amount.micros, lim.money ? { limit: lim.money.limitMicros, len: lim.money.periodMs } : undefined],
        ["tokens", amount.tokens, lim.tokens ? { limit: lim.tokens.limit, len: lim.tokens.windowMs } : undefined],
      ];
      for (const [metric, part, limit] of periodic) {
        const windowStart = limit ? windowOf(now, limit.len) : 0;
        const c = limit ? this.#store.getCounter(scope, metric, windowStart) : undefined;
        const available = limit ? limit.limit - (c === undefined ? 0 : c.spent + c.held) : Infinity;
        room.push({ scope, metric, available, part, windowStart, windowEnd: limit ? windowStart + limit.len : 0, limited: limit !== undefined });
      }
      if (lim.balance) {
        const c = this.#store.getCounter(scope, prepaid, 0);
        const available = this.#store.getCredited(scope, currency) - (c === undefined ? 0 : c.spent + c.held);
        room.push({ scope, metric: prepaid, available, part: amount.micros, windowStart: 0, windowEnd: 0, limited: true });
      }
      if (lim.requests) requestTokens = Math.min(requestTokens, Math.floor(refill(scope, this.#store.getBucket(scope), lim.requests, now).units / BUCKET_UNITS_PER_TOKEN));
    }
    for (const r of room) if (r.limited && r.part > 0) n = Math.min(n, Math.floor(Math.max(0, r.available) / (2 * r.part)));
    const requests = requestTokens === Infinity ? -1 : Math.min(n, Math.floor(requestTokens / 2));
    if (n < 2 || (requests !== -1 && requests < 2)) return nearLimit;
    const slice = times(amount, n);
    const charges: LedgerCharge[] = room.map((r) => ({ scope: r.scope, metric: r.metric, windowStart: r.windowStart, windowEnd: r.windowEnd, reserved: partOf(r.metric, slice) }));
    for (const ch of charges) adjustCounter(this.#store, ch, { held: ch.reserved });
    const remaining: LimitRemaining[] = room.filter((r) => r.limited).map((r) => ({ scope: r.scope, metric: r.metric, remaining: r.available - partOf(r.metric, slice) }));
    if (requests !== -1) {
      for (const { scope, effective: lim } of plans) {
        if (!lim.requests) continue;
        const b = refill(scope, this.#store.getBucket(scope), lim.requests, now);
        this.#store.putBucket({ ...b, units: b.units - requests * BUCKET_UNITS_PER_TOKEN });
        remaining.push({ scope, metric: "requests", remaining: Math.floor(b.units / BUCKET_UNITS_PER_TOKEN) - requests });
      }
    }
    const leaseExpiresAt = now + (req.leaseMs ?? DEFAULT_LEASE_MS);
    // Attempts are booked in the windows the lease charged: it admits nothing past the first of them to end.
    const windowEnds = charges.map((c) => c.windowEnd ?? 0).filter((e) => e > 0);
    const admitUntil = Math.min(now + req.admitMs, ...windowEnds);
    const meta = req.meta?.requestId !== undefined ? { meta: { requestId: req.meta.requestId } } : {};
    this.#store.putAttempt({
      attemptId: leaseId,
      state: "held",
      scopes: plans.map((p) => p.scope),
      currency,
      amount: slice,
      charges,
      createdAt: now,
      leaseExpiresAt,
      result: { ok: true, attemptId: leaseId, leaseExpiresAt, remaining },
      ...meta,
      lease: { granted: slice, requests, admitUntil },
    });
    return { ok: true, leaseId, amount: slice, requests, leaseExpiresAt, admitUntil, remaining };
  }

  /**
   * One step for an attempt with no lease to come from: a lease for its path, or near a limit
   * (or when the ask is malformed) the attempt's own reservation, which names any problem.
   */
  acquire(attemptId: string, req: ReserveRequest, ask: LeaseAsk): AcquireResult {
    const granted = this.lease(ask?.leaseId, { ...req, slices: ask?.slices, admitMs: ask?.admitMs });
    return granted.ok ? { lease: granted } : { reserved: this.#core.reserve(attemptId, req) };
  }

  /** Applies a settlement batch in order (see the module comment); one answer per item. */
  apply(items: readonly SettlementItem[], now: number): SettlementItemResult[] {
    if (!Array.isArray(items)) return [invalid("settlement batch", "", ["items must be an array"])];
    this.#batchLeases = new Map();
    try {
      const results = items.map((item) => this.#applyOne(item, now));
      for (const rec of this.#batchLeases.values()) this.#store.putAttempt(rec);
      return results;
    } finally {
      this.#batchLeases = undefined;
    }
  }

  #getLease(leaseId: string): AttemptRecord | undefined {
    const rec = this.#batchLeases?.get(leaseId) ?? this.#store.getAttempt(leaseId);
    return rec?.lease === undefined ? undefined : rec;
  }

  #putLease(rec: AttemptRecord): void {
    if (this.#batchLeases) this.#batchLeases.set(rec.attemptId, rec);
    else this.#store.putAttempt(rec);
  }

  #applyOne(item: SettlementItem, now: number): SettlementItemResult {
    if (item === null || typeof item !== "object") return invalid("settlement batch", "", ["each item must be an object"]);
    switch (item.op) {
      case "close":
        return this.#close(item.leaseId, item.unusedRequests, now);
      case "settle": {
        if (item.lease === undefined) return this.#core.settle(item.attemptId, item.actual, now, item.detail);
        const bad = [...settleProblems(item.attemptId, item.actual, now, item.detail), ...leaseUseProblems(item.lease)];
        return bad.length > 0 ? invalid("settlement", item.attemptId, bad) : this.#fromLease(item.attemptId, item.lease, now, item.actual, item.detail);
      }
      case "release": {
        if (item.lease === undefined) return this.#core.release(item.attemptId, now);
        const bad = [...(isLedgerKey(item.attemptId) ? [] : ["attemptId must name an attempt"]), ...leaseUseProblems(item.lease)];
        return bad.length > 0 ? invalid("release", item.attemptId, bad) : this.#fromLease(item.attemptId, item.lease, now, "released");
      }
      default:
        return invalid("settlement batch", "", [`op must be settle, release or close, got ${String((item as { op?: unknown }).op).slice(0, 32)}`]);
    }
  }

  /** Records an attempt admitted from a lease, once, and books it against the lease. */
  #fromLease(attemptId: string, use: LeaseUse, now: number, actual: LedgerAmount | "unknown" | "released", detail?: SettleDetail): SettleResult | ReleaseResult {
    const done = this.#store.getAttempt(attemptId);
    if (done !== undefined) return repeatOf(done, actual === "released");
    const lease = this.#getLease(use.leaseId);
    if (lease === undefined) return { ok: false, attemptId, reason: "unknown_attempt" };
    const base = {
      attemptId,
      scopes: lease.scopes,
      currency: lease.currency,
      amount: amountOf(use.amount),
      createdAt: Math.min(now, Math.max(lease.createdAt, use.admittedAt)),
      leaseExpiresAt: lease.leaseExpiresAt,
      result: { ok: true as const, attemptId, leaseExpiresAt: lease.leaseExpiresAt },
      fromLease: use.leaseId,
      ...(use.meta ? { meta: { ...(use.meta.requestId !== undefined ? { requestId: use.meta.requestId } : {}), ...(use.meta.model !== undefined ? { model: use.meta.model } : {}), ...(use.meta.priceVersion !== undefined ? { priceVersion: use.meta.priceVersion } : {}) } } : {}),
    };
    const chargesOf = (a: LedgerAmount) => lease.charges.map((ch) => ({ ...ch, reserved: partOf(ch.metric, a) }));
    if (actual === "released") {
      // Nothing was sent: the worst case went back to the slice, which the ledger never lent out.
      // A finished record books nothing more: its charges are not kept (its scopes are).
      this.#store.putAttempt({ ...base, state: "released", charges: [], releasedAt: now });
      return { ok: true, attemptId, state: "released", releasedAt: now };
    }
    const open = lease.state !== "released";
    const wasPending = lease.state === "pending_reconciliation";
    const extra = { ...(detail?.estimate ? { estimate: amountOf(detail.estimate) } : {}), ...(detail?.usage ? { usage: { ...detail.usage } } : {}) };
    // What moves out of the slice: the actual cost (settled) or the whole worst case (unknown), as far as the slice holds it.
    const take = open ? minAmount(actual === "unknown" ? use.amount : actual, lease.amount) : ZERO;
    for (const ch of lease.charges) {
      const t = partOf(ch.metric, take);
      if (actual === "unknown") adjustCounter(this.#store, ch, { pending: wasPending ? 0 : t });
      else {
        const spent = partOf(ch.metric, actual);
        adjustCounter(this.#store, ch, { held: -t, pending: wasPending ? -t : 0, spent, overrun: Math.max(0, spent - partOf(ch.metric, use.amount)) });
      }
    }
    this.#putLease({ ...lease, amount: minus(lease.amount, take), charges: lease.charges.map((ch) => ({ ...ch, reserved: ch.reserved - partOf(ch.metric, take) })) });
    if (actual === "unknown") {
      const settlement = { actual, overrun: ZERO, settledAt: now, ...extra };
      this.#store.putAttempt({ ...base, state: "pending_reconciliation", pendingReason: "unknown_usage", charges: chargesOf(take), settlement });
      return { ok: true, attemptId, state: "pending_reconciliation", settlement };
    }
    const settlement = { actual: amountOf(actual), overrun: overrunOf(actual, use.amount), settledAt: now, ...extra };
    rollUp(this.#store, base, actual);
    this.#store.putAttempt({ ...base, state: "settled", charges: [], settlement });
    return { ok: true, attemptId, state: "settled", settlement };
  }

  /** Returns what is left of a lease, and the request tokens its holder did not use. Idempotent. */
  #close(leaseId: string, unusedRequests: number, now: number): CloseResult {
    if (!isLedgerKey(leaseId) || !isCount(unusedRequests)) return invalid("lease close", leaseId, ["leaseId must name a lease and unusedRequests be a non-negative integer"]);
    const lease = this.#getLease(leaseId);
    if (lease?.lease === undefined) return { ok: false, leaseId, reason: "unknown_lease" };
    if (lease.state === "released") return { ok: true, leaseId, state: "released", returned: ZERO };
    const wasPending = lease.state === "pending_reconciliation";
    for (const ch of lease.charges) adjustCounter(this.#store, ch, { held: -ch.reserved, pending: wasPending ? -ch.reserved : 0 });
    const unused = Math.min(unusedRequests, Math.max(0, lease.lease.requests));
    if (unused > 0) {
      for (const scope of lease.scopes) {
        const lim = this.#core.limits(scope).effective.requests;
        if (!lim) continue;
        const b = refill(scope, this.#store.getBucket(scope), lim, now);
        this.#store.putBucket({ ...b, units: Math.min(lim.burst * BUCKET_UNITS_PER_TOKEN, b.units + unused * BUCKET_UNITS_PER_TOKEN) });
      }
    }
    const { pendingReason: _dropped, ...rest } = lease;
    this.#putLease({ ...rest, state: "released", releasedAt: now, charges: lease.charges.map((ch) => ({ ...ch, reserved: 0 })), amount: ZERO, lease: { ...lease.lease, closedAt: now } });
    return { ok: true, leaseId, state: "released", returned: lease.amount };
  }
}

/** A lease record's grant, answered again to a repeated `lease`. */
function grantOf(rec: AttemptRecord): LeaseGrant {
  const terms = rec.lease!;
  return { ok: true, leaseId: rec.attemptId, amount: terms.granted, requests: terms.requests, leaseExpiresAt: rec.leaseExpiresAt, admitUntil: terms.admitUntil, remaining: rec.result.remaining ?? [] };
}

/** The first answer of an attempt already recorded, for a repeated batch item. */
function repeatOf(rec: AttemptRecord, asRelease: boolean): SettleResult | ReleaseResult {
  if (asRelease) return rec.state === "released" ? { ok: true, attemptId: rec.attemptId, state: "released", releasedAt: rec.releasedAt ?? rec.createdAt } : { ok: false, attemptId: rec.attemptId, reason: "conflict", state: rec.state };
  if (rec.settlement !== undefined) return { ok: true, attemptId: rec.attemptId, state: rec.state as "settled" | "pending_reconciliation", settlement: rec.settlement };
  return { ok: false, attemptId: rec.attemptId, reason: "conflict", state: rec.state };
}
