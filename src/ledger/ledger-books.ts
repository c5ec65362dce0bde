/**
 * The bookkeeping both the per-attempt rules (`ledger.ts`) and the lease rules
 * (`ledger-leases.ts`) share: windows, counter moves that keep the books balanced, request
 * buckets. Pure functions over a {@link LedgerStore}.
 */
import { BUCKET_UNITS_PER_TOKEN, LEDGER_DAY_MS, type AttemptRecord, type BucketState, type LedgerAmount, type LedgerCharge, type LedgerCounter, type LedgerMetric, type LedgerStore, type RequestLimit, type ScopeLimits, type ScopeLimitsView, type ScopeRef } from "./ledger-types.ts";
import { canonicalLimits } from "./ledger-validate.ts";

/** Start of the epoch-aligned window of length `len` that holds `now`. */
export const windowOf = (now: number, len: number): number => now - (now % len);

/** A counter with nothing booked yet. */
export const emptyCounter = (scope: string, metric: LedgerMetric, windowStart: number, windowEnd: number): LedgerCounter => ({ scope, metric, windowStart, windowEnd, spent: 0, held: 0, pending: 0, overrun: 0 });

/** The part of an amount a counter of `metric` books: tokens for the token counter, micros otherwise. */
export const partOf = (metric: LedgerMetric, a: LedgerAmount): number => (metric === "tokens" ? a.tokens : a.micros);

/** A copy of an amount with only its two fields (nothing else a caller sent is stored). */
export const amountOf = (a: LedgerAmount): LedgerAmount => ({ micros: a.micros, tokens: a.tokens });

/** What `actual` has above `reserved`, per part (0 where it has not). */
export const overrunOf = (actual: LedgerAmount, reserved: LedgerAmount): LedgerAmount => ({ micros: Math.max(0, actual.micros - reserved.micros), tokens: Math.max(0, actual.tokens - reserved.tokens) });

/** How a counter moves. */
export interface CounterDelta {
  readonly held?: number;
  readonly pending?: number;
  readonly spent?: number;
  readonly overrun?: number;
}

/**
 * Moves one charge's counter by `d`. Throws (aborting the caller's transaction) when the move
 * would leave the books out of balance: a negative hold, more pending than held, an inexact sum.
 */
export function adjustCounter(store: LedgerStore, ch: LedgerCharge, d: CounterDelta): void {
  // A charge booked before window ends were recorded has none, but its counter exists: reserve made it.
  const c = store.getCounter(ch.scope, ch.metric, ch.windowStart) ?? emptyCounter(ch.scope, ch.metric, ch.windowStart, ch.windowEnd ?? 0);
  const next = { ...c, held: c.held + (d.held ?? 0), pending: c.pending + (d.pending ?? 0), spent: c.spent + (d.spent ?? 0), overrun: c.overrun + (d.overrun ?? 0) };
  if (next.held < 0 || next.pending < 0 || next.pending > next.held || !Number.isSafeInteger(next.spent)) throw new Error(`ledger books out of balance at ${ch.scope} ${ch.metric}`);
  store.putCounter(next);
}

/**
 * Adds a settled attempt to the usage rollup of each scope on its path, on the UTC day it was
 * admitted: the books charge its cost to the periods of that moment, so a rollup day moves with
 * exactly the settlements that move `spent`. Called in the settlement's own transaction.
 */
export function rollUp(store: LedgerStore, rec: Pick<AttemptRecord, "scopes" | "createdAt" | "currency" | "meta">, actual: LedgerAmount): void {
  const dayStart = windowOf(rec.createdAt, LEDGER_DAY_MS);
  const model = rec.meta?.model ?? "";
  const priceVersion = rec.meta?.priceVersion ?? "";
  for (const scope of new Set(rec.scopes)) store.addRollup({ scope, dayStart, model, priceVersion, currency: rec.currency, attempts: 1, settledMicros: actual.micros, settledTokens: actual.tokens });
}

/**
 * A bucket refilled up to `now`. A new bucket starts full; a bucket whose burst shrank is cut to
 * it; a clock that went back refills nothing.
 */
export function refill(scope: string, b: BucketState | undefined, lim: RequestLimit, now: number): BucketState {
  const cap = lim.burst * BUCKET_UNITS_PER_TOKEN;
  if (b === undefined) return { scope, units: cap, at: now };
  const level = Math.min(b.units, cap);
  if (now <= b.at) return { scope, units: level, at: b.at };
  const deficit = cap - level;
  // Compare the time first: `elapsed * perMinute` is only formed when it is below `deficit`, so it stays exact.
  const full = lim.perMinute > 0 && now - b.at >= Math.ceil(deficit / lim.perMinute);
  return { scope, units: full ? cap : level + (now - b.at) * lim.perMinute, at: now };
}

/** Until the bucket holds one token (ms); undefined when it never will. */
export function bucketWait(b: BucketState, lim: RequestLimit): number | undefined {
  if (b.units >= BUCKET_UNITS_PER_TOKEN) return 0;
  if (lim.perMinute === 0 || lim.burst === 0) return undefined;
  return Math.ceil((BUCKET_UNITS_PER_TOKEN - b.units) / lim.perMinute);
}

const limitsKey = (l: ScopeLimits | undefined) => JSON.stringify(l ?? {});

/** One scope of a path as a reservation sees it: the limits it was given, the stored ones, the effective ones. */
export interface ScopePlan {
  readonly scope: string;
  readonly stored: Omit<ScopeLimitsView, "effective"> | undefined;
  readonly given: ScopeLimits;
  /** The admin override, else the limits given. */
  readonly effective: ScopeLimits;
  /** The given limits differ from the stored configured ones. */
  readonly changed: boolean;
}

/** The path's scopes with their effective limits, root first. */
export function planScopes(store: LedgerStore, scopes: readonly ScopeRef[]): ScopePlan[] {
  return scopes.map((ref) => {
    const stored = store.getLimits(ref.name);
    const given = canonicalLimits(ref.limits ?? {});
    return { scope: ref.name, stored, given, effective: stored?.override ?? given, changed: limitsKey(given) !== limitsKey(stored?.configured) };
  });
}

/**
 * Stores the configured limits a reservation passed where they changed: configuration, not
 * books, so it is stored whether or not the reservation is admitted.
 */
export function storeConfiguredLimits(store: LedgerStore, plans: readonly ScopePlan[]): void {
  for (const p of plans) {
    if (!p.changed) continue;
    store.putLimits(p.scope, { ...(Object.keys(p.given).length === 0 ? {} : { configured: p.given }), ...(p.stored?.override ? { override: p.stored.override } : {}) });
  }
}
