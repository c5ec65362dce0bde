/**
 * Cross-layer attempt budget: how many upstream attempts one caller-level call may still cost.
 *
 * An agent calling Sluice announces a call id, its remaining attempt budget and its absolute
 * deadline. Every upstream attempt Sluice makes for that call id, from any replica or isolate, takes
 * one unit; when none is left, further attempts are refused. Retries at the agent and retries in
 * the gateway thereby share one budget instead of multiplying.
 *
 * Pure logic over a synchronous store and an explicit `now`: the AttemptBudget Durable Object runs
 * each call inside one `transactionSync` (no `await` between read and write), which is what makes
 * the decrement atomic under concurrency.
 *
 * ## Rules
 *
 * - The first `consume` for a call id creates its entry with the announced `initialBudget` and
 *   `deadlineAt`. Later announcements never refill it: the entry's own count wins, whatever budget
 *   a later request announces (a replica that saw an older header, or a caller trying to top up,
 *   cannot raise it). An announced budget lower than the entry's count does not lower it either:
 *   the announced number is the caller's view at the time it sent that request, while the entry
 *   already counts every attempt made since the first one.
 * - Deadlines only ever tighten: the effective deadline is the earliest one ever announced for the
 *   call id, so the gateway never extends the caller's deadline.
 * - At or after the effective deadline every `consume` is refused as `"expired"` (this takes
 *   precedence over `"exhausted"`). An entry is kept until `deadlineAt + graceMs`, so that a late
 *   request for the same call id (clock skew between isolates, a caller retrying past its own
 *   deadline with a fresh one) is refused rather than handed a fresh budget; after that it is
 *   garbage-collected and treated as absent whether or not it was physically deleted yet.
 *   Reusing a call id after that point starts a new budget: call ids are meant to be unique.
 * - A refused `consume` changes nothing.
 */

/** One call id's persisted state: plain data. */
export interface AttemptBudgetEntry {
  readonly callId: string;
  /** The budget announced by the first request for this call id. */
  readonly initialBudget: number;
  /** Attempts still allowed. */
  readonly remaining: number;
  /** Effective absolute deadline (epoch ms): the earliest one announced. */
  readonly deadlineAt: number;
  /** When the entry may be deleted (epoch ms): `deadlineAt + graceMs` at the time it was written. */
  readonly expiresAt: number;
  /** When the entry was created (epoch ms). */
  readonly createdAt: number;
}

/**
 * Synchronous storage of entries, keyed by call id. Implementations do no locking of their own:
 * the caller runs each {@link AttemptBudgetLedger} call atomically (one SQLite transaction).
 */
export interface AttemptBudgetStore {
  get(callId: string): AttemptBudgetEntry | undefined;
  put(entry: AttemptBudgetEntry): void;
  delete(callId: string): void;
  /** Deletes every entry with `expiresAt <= now`; returns how many. */
  deleteExpired(now: number): number;
  /** The smallest `expiresAt` of all stored entries; undefined when none is stored. */
  earliestExpiry(): number | undefined;
}

/** What a request announces, plus the time of the decision. */
export interface ConsumeRequest {
  /** The caller's remaining attempt budget (integer, 0..{@link MAX_ATTEMPT_BUDGET}). */
  readonly initialBudget: number;
  /** The caller's absolute deadline, epoch ms (safe integer). */
  readonly deadlineAt: number;
  /** Now, epoch ms (the decision's clock, not the caller's). */
  readonly now: number;
}

export type ConsumeRefusal = "exhausted" | "expired";

/**
 * Answer of {@link AttemptBudgetLedger.consume}: granted, with the attempts left after this one,
 * or refused.
 */
export type ConsumeResult = { readonly ok: true; readonly remaining: number } | { readonly ok: false; readonly reason: ConsumeRefusal };

/** A read-only view of one call id's budget. */
export interface AttemptBudgetView {
  readonly callId: string;
  readonly initialBudget: number;
  readonly remaining: number;
  readonly deadlineAt: number;
  readonly expiresAt: number;
  /** Whether the deadline has passed (the entry is only kept for its grace period). */
  readonly expired: boolean;
}

/** Largest budget a caller may announce. */
export const MAX_ATTEMPT_BUDGET = 1000;

/** Default time an entry is kept past its deadline before it is garbage-collected. */
export const DEFAULT_ATTEMPT_BUDGET_GRACE_MS = 60_000;

/** Longest call id the ledger stores (room for a tenant prefix before a 128-char header value). */
export const MAX_BUDGET_KEY_LENGTH = 512;

export interface AttemptBudgetOptions {
  /** How long an entry is kept past its deadline, in ms (>= 0). */
  readonly graceMs?: number;
}

/**
 * Validates the arguments of a `consume`.
 *
 * @throws RangeError naming every bad field.
 */
export function validateConsume(callId: string, req: ConsumeRequest): void {
  const bad: string[] = [];
  if (typeof callId !== "string" || callId.length === 0 || callId.length > MAX_BUDGET_KEY_LENGTH) bad.push(`callId must be a string of 1..${MAX_BUDGET_KEY_LENGTH} chars`);
  if (!(Number.isInteger(req?.initialBudget) && req.initialBudget >= 0 && req.initialBudget <= MAX_ATTEMPT_BUDGET)) bad.push(`initialBudget must be an integer in 0..${MAX_ATTEMPT_BUDGET}, got ${String(req?.initialBudget)}`);
  if (!Number.isSafeInteger(req?.deadlineAt)) bad.push(`deadlineAt must be a safe integer (epoch ms), got ${String(req?.deadlineAt)}`);
  if (!Number.isFinite(req?.now)) bad.push(`now must be a finite number, got ${String(req?.now)}`);
  if (bad.length > 0) throw new RangeError(`invalid attempt budget request: ${bad.join("; ")}`);
}

/** The attempt-budget rules over one store (see the module comment). */
export class AttemptBudgetLedger {
  readonly #store: AttemptBudgetStore;
  readonly #graceMs: number;

  constructor(store: AttemptBudgetStore, options: AttemptBudgetOptions = {}) {
    const graceMs = options.graceMs ?? DEFAULT_ATTEMPT_BUDGET_GRACE_MS;
    if (!(Number.isFinite(graceMs) && graceMs >= 0)) throw new RangeError(`graceMs must be a finite number >= 0, got ${graceMs}`);
    this.#store = store;
    this.#graceMs = graceMs;
  }

  /**
   * Takes one attempt from `callId`'s budget, creating the entry on first use.
   *
   * @throws RangeError when an argument is invalid (nothing is read or written).
   */
  consume(callId: string, req: ConsumeRequest): ConsumeResult {
    validateConsume(callId, req);
    const { now } = req;
    const entry = this.#live(callId, now);
    if (entry === undefined) {
      // Nothing to remember for a call that is already over: refuse without creating an entry.
      if (req.deadlineAt <= now) return { ok: false, reason: "expired" };
      const granted = req.initialBudget > 0;
      this.#store.put({
        callId,
        initialBudget: req.initialBudget,
        remaining: granted ? req.initialBudget - 1 : 0,
        deadlineAt: req.deadlineAt,
        expiresAt: req.deadlineAt + this.#graceMs,
        createdAt: now,
      });
      return granted ? { ok: true, remaining: req.initialBudget - 1 } : { ok: false, reason: "exhausted" };
    }
    const deadlineAt = Math.min(entry.deadlineAt, req.deadlineAt);
    // Tighten (never extend) the stored deadline, even when this request is refused.
    const tightened = deadlineAt < entry.deadlineAt ? { ...entry, deadlineAt, expiresAt: Math.min(entry.expiresAt, deadlineAt + this.#graceMs) } : entry;
    let result: ConsumeResult;
    if (deadlineAt <= now) result = { ok: false, reason: "expired" };
    else if (tightened.remaining <= 0) result = { ok: false, reason: "exhausted" };
    else result = { ok: true, remaining: tightened.remaining - 1 };
    if (result.ok) this.#store.put({ ...tightened, remaining: result.remaining });
    else if (tightened !== entry) this.#store.put(tightened);
    return result;
  }

  /** The budget of `callId` at `now`; undefined when none exists (or it was past its grace). */
  peek(callId: string, now: number): AttemptBudgetView | undefined {
    const e = this.#live(callId, now);
    if (e === undefined) return undefined;
    return { callId: e.callId, initialBudget: e.initialBudget, remaining: e.remaining, deadlineAt: e.deadlineAt, expiresAt: e.expiresAt, expired: e.deadlineAt <= now };
  }

  /** Deletes every entry past its grace period; returns how many. */
  collect(now: number): number {
    return this.#store.deleteExpired(now);
  }

  /** When the next entry becomes collectable (to schedule garbage collection); undefined when none. */
  nextExpiry(): number | undefined {
    return this.#store.earliestExpiry();
  }

  /** The stored entry unless it is past its grace period (which is deleted on sight). */
  #live(callId: string, now: number): AttemptBudgetEntry | undefined {
    const e = this.#store.get(callId);
    if (e === undefined || e.expiresAt > now) return e;
    this.#store.delete(callId);
    return undefined;
  }
}

/** An in-memory {@link AttemptBudgetStore} (tests; single-isolate use). */
export class MemoryAttemptBudgetStore implements AttemptBudgetStore {
  readonly #entries = new Map<string, AttemptBudgetEntry>();

  get(callId: string): AttemptBudgetEntry | undefined {
    return this.#entries.get(callId);
  }

  put(entry: AttemptBudgetEntry): void {
    this.#entries.set(entry.callId, { ...entry });
  }

  delete(callId: string): void {
    this.#entries.delete(callId);
  }

  deleteExpired(now: number): number {
    let n = 0;
    for (const [id, e] of this.#entries) {
      if (e.expiresAt <= now) {
        this.#entries.delete(id);
        n++;
      }
    }
    return n;
  }

  earliestExpiry(): number | undefined {
    let min: number | undefined;
    for (const e of this.#entries.values()) if (min === undefined || e.expiresAt < min) min = e.expiresAt;
    return min;
  }

  get size(): number {
    return this.#entries.size;
  }
}
