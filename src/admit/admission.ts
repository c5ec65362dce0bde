import type { Clock } from "../deps/clock.ts";
import type { Scheduler } from "../deps/scheduler.ts";

/**
 * Isolate-local admission control: bounded concurrency per process, tenant, logical model and
 * backend, with a bounded, tenant-fair, deadline- and cancellation-aware wait queue.
 *
 * Pure and isolate-local: no I/O, no cross-isolate coordination, time only through the injected
 * {@link Clock} and timers only through the injected {@link Scheduler}. Each isolate
 * enforces its limits on its own traffic, so a limit is "per isolate", not global across the
 * deployment.
 *
 * ## Levels
 *
 * A request occupies one slot at each level that applies to it: the process-wide level, its
 * tenant, its logical model and (once chosen) its backend. A level whose limit is undefined is
 * unlimited and is not counted against. A request is admitted only when every limited level has
 * room; the slots are taken together, so there is never a partial admission.
 *
 * ## Backend level: two-step
 *
 * The backend is picked after the tenant/model checks, so the backend level is applied by a
 * second, non-blocking step on the lease: {@link AdmissionLease.acquireBackend}. It never waits:
 * a request that already holds tenant/model slots must not sit on them while it waits for one
 * backend; the caller should pick another backend (filter candidates with
 * {@link AdmissionController.hasBackendRoom} first) or fail the request as overloaded. Calling it
 * again with another id moves the slot (failover). A caller that already knows the backend may
 * instead pass `backend` to {@link AdmissionController.admit}, which then waits for all four levels
 * at once.
 *
 * ## Queue policy
 *
 * - Bounded: at most `maxQueue` waiters overall and `maxQueuePerTenant` per tenant; past that the
 *   request is refused with `queue_full` at once.
 * - Fair across tenants: each tenant has its own FIFO sub-queue and slots are handed out
 *   round-robin between tenants, so one tenant's burst delays another tenant by at most one
 *   grant per competing tenant.
 * - FIFO within a tenant among waiters that can run: the oldest waiter of a tenant that fits is
 *   admitted first. A waiter that does not fit (e.g. its model is full) may be overtaken by a
 *   younger one that does (e.g. another model of the same tenant), so one full model does not
 *   block a tenant's traffic to every other model.
 * - Bounded overtaking: being overtaken while blocked, by a request that took a slot at a limited
 *   level the waiter also needs, counts as one bypass. After `maxBypass` bypasses the waiter is
 *   "starving" and reserves one slot at each of its limited levels: from then on no younger
 *   request may take the last free slot at any of those levels. Its blocked levels therefore only
 *   drain and its free levels stay free, so it is admitted as soon as leases already granted are
 *   released (starving waiters among themselves are served oldest first, and the oldest never
 *   waits for a reservation, so reservations cannot deadlock).
 * - Deadline-aware: a waiter is never admitted at or after its `deadlineAt`; it is removed and
 *   answered `deadline` when its timer fires or when the queue is next examined, whichever is
 *   first. A request whose deadline has already passed is refused at once, even if a slot is free.
 * - Cancellation-aware: aborting the signal of a queued request removes it and answers
 *   `cancelled`; it held no slot, so none is freed. An already aborted signal is refused at once.
 *   An abort after admission does nothing: the caller owns the lease and must release it.
 */

/** The levels a lease holds slots at. */
export type AdmissionLevel = "global" | "tenant" | "model" | "backend";

/** A limit for one level: applies to every key of the level; undefined means unlimited. */
export type AdmissionLimit = number | undefined;

export interface AdmissionLimits {
  /** Concurrent leases in the whole isolate. */
  readonly global?: number | undefined;
  readonly perTenant?: AdmissionLimit;
  readonly perModel?: AdmissionLimit;
  readonly perBackend?: AdmissionLimit;
}

/** Options for {@link AdmissionController}. */
export interface AdmissionOptions {
  readonly limits?: AdmissionLimits;
  /** Maximum waiters overall; 0 disables queueing (refuse when full). Default 1000. */
  readonly maxQueue?: number;
  /** Maximum waiters of one tenant; 0 disables queueing. Default 100. */
  readonly maxQueuePerTenant?: number;
  /** Times (>= 1) a blocked waiter may be overtaken before it reserves its slots. Default 8. */
  readonly maxBypass?: number;
  /** Hold-time estimate before any lease has been released, in ms. Default 1000. */
  readonly initialHoldMs?: number;
  /** Weight of the newest hold-time sample in the EWMA, in (0, 1]. Default 0.2. */
  readonly holdAlpha?: number;
}

/** What is being admitted. */
export interface AdmissionRequest {
  readonly tenant: string;
  /** Logical model name (the alias the client asked for, not a backend's model id). */
  readonly model: string;
  /** Only when the backend is already known; otherwise use {@link AdmissionLease.acquireBackend}. */
  readonly backend?: string | undefined;
}

export interface AdmitOptions {
  /** Absolute time on the injected clock after which the request is no longer worth admitting. `Infinity` = none. */
  readonly deadlineAt: number;
  /** The client's signal: aborting it while queued withdraws the request. */
  readonly signal?: AbortSignal | undefined;
}

export type AdmissionRefusalReason = "queue_full" | "deadline" | "cancelled";

/**
 * A refusal. `retryAfterSeconds` is an integer in 1..60, a coarse estimate of the wait derived from
 * observed hold times; it is quantised so it does not reveal limits or queue lengths.
 */
export interface AdmissionRefusal {
  readonly ok: false;
  readonly reason: AdmissionRefusalReason;
  readonly retryAfterSeconds: number;
}

export interface AdmissionGrant {
  readonly ok: true;
  /** Must be released exactly once; extra calls are no-ops. */
  readonly lease: AdmissionLease;
}

export type AdmissionResult = AdmissionGrant | AdmissionRefusal;

export type BackendAdmission = { readonly ok: true } | { readonly ok: false; readonly reason: "backend_full"; readonly retryAfterSeconds: number };

/**
 * One admitted request's slots. The only way to give them back is {@link release}, and only the
 * first call has an effect, so it is safe to call it from both a `finally` and a stream-end handler.
 */
export interface AdmissionLease {
  readonly tenant: string;
  readonly model: string;
  /** The backend whose slot this lease holds, if any. */
  readonly backend: string | undefined;
  readonly released: boolean;
  /**
   * Takes a slot on `backendId` without waiting. Holding another backend's slot moves it (the old
   * one is freed whether or not the new one is granted); asking again for the held backend is a
   * no-op. On `backend_full` the lease holds no backend slot.
   * @throws Error after {@link release} (a use-after-release bug in the caller).
   */
  acquireBackend(backendId: string): BackendAdmission;
  /** Frees every slot this lease holds. Idempotent. */
  release(): void;
}

/** Counts only; keys with nothing in flight or queued are omitted. */
export interface AdmissionStats {
  readonly inFlight: {
    readonly global: number;
    readonly tenant: Readonly<Record<string, number>>;
    readonly model: Readonly<Record<string, number>>;
    readonly backend: Readonly<Record<string, number>>;
  };
  readonly queued: {
    readonly total: number;
    readonly byTenant: Readonly<Record<string, number>>;
  };
  /** Queued waiters currently holding reservations (overtaken `maxBypass` times). */
  readonly starving: number;
}

/** Since the controller was made: requests admitted, requests that had to queue, refusals by reason. */
export interface AdmissionTotals {
  readonly admitted: number;
  readonly queued: number;
  readonly refused: Readonly<Record<AdmissionRefusalReason, number>>;
}

interface Slot {
  readonly level: AdmissionLevel;
  readonly key: string;
}

interface Waiter {
  readonly seq: number;
  readonly tenant: string;
  readonly slots: readonly Slot[];
  readonly request: AdmissionRequest;
  readonly deadlineAt: number;
  readonly signal: AbortSignal | undefined;
  readonly resolve: (result: AdmissionResult) => void;
  bypassed: number;
  starving: boolean;
  cancelTimer: (() => void) | undefined;
  onAbort: (() => void) | undefined;
}

const DEFAULT_MAX_QUEUE = 1000;
const DEFAULT_MAX_QUEUE_PER_TENANT = 100;
const DEFAULT_MAX_BYPASS = 8;
const DEFAULT_INITIAL_HOLD_MS = 1000;
const DEFAULT_HOLD_ALPHA = 0.2;

/** Retry-after values handed out: coarse steps, so the estimate cannot be inverted into capacities. */
const RETRY_AFTER_STEPS = [1, 2, 3, 5, 8, 13, 20, 30, 45, 60] as const;

const GLOBAL_KEY = "";

/** Quantises a wait estimate in ms to an integer number of seconds in 1..60. */
export function quantizeRetryAfter(waitMs: number): number {
  const seconds = Number.isFinite(waitMs) ? Math.ceil(Math.max(0, waitMs) / 1000) : Infinity;
  for (const step of RETRY_AFTER_STEPS) if (seconds <= step) return step;
  return 60;
}

function checkCount(name: string, value: number, min: number): number {
  if (!(Number.isInteger(value) && value >= min)) {
    throw new RangeError(`${name} must be an integer >= ${min}, got ${value}`);
  }
  return value;
}

function checkLimit(name: string, limit: AdmissionLimit): AdmissionLimit {
  if (limit !== undefined) checkCount(name, limit, 1);
  return limit;
}

/** The admission controller: one per isolate, built with the isolate's runtime. */
export class AdmissionController {
  readonly #clock: Clock;
  readonly #scheduler: Scheduler;
  readonly #limits: Readonly<Record<AdmissionLevel, AdmissionLimit>>;
  readonly #maxQueue: number;
  readonly #maxQueuePerTenant: number;
  readonly #maxBypass: number;
  readonly #holdAlpha: number;
  #holdMs: number;

  /** In-flight count per level and key; keys at zero are deleted so idle tenants cost nothing. */
  readonly #inFlight: Record<AdmissionLevel, Map<string, number>> = {
    global: new Map(),
    tenant: new Map(),
    model: new Map(),
    backend: new Map(),
  };
  /** Per-tenant FIFO sub-queues; only tenants with waiters have an entry. */
  readonly #queues = new Map<string, Waiter[]>();
  readonly #totals = { admitted: 0, queued: 0, refused: { queue_full: 0, deadline: 0, cancelled: 0 } };
  /** Round-robin order of the tenants in `#queues`, and the index of the next one to serve. */
  readonly #ring: string[] = [];
  #cursor = 0;
  #queued = 0;
  /** Starving waiters, oldest first. */
  readonly #starving: Waiter[] = [];
  #seq = 0;
  #draining = false;
  #drainAgain = false;

  /**
   * @throws RangeError on a limit that is not an integer >= 1, a negative or non-integer queue
   *   bound, a `maxBypass` below 1, a negative or non-finite `initialHoldMs`, or `holdAlpha` outside (0, 1].
   */
  constructor(clock: Clock, scheduler: Scheduler, options: AdmissionOptions = {}) {
    const limits = options.limits ?? {};
    this.#limits = {
      global: checkLimit("limits.global", limits.global),
      tenant: checkLimit("limits.perTenant", limits.perTenant),
      model: checkLimit("limits.perModel", limits.perModel),
      backend: checkLimit("limits.perBackend", limits.perBackend),
    };
    this.#maxQueue = checkCount("maxQueue", options.maxQueue ?? DEFAULT_MAX_QUEUE, 0);
    this.#maxQueuePerTenant = checkCount("maxQueuePerTenant", options.maxQueuePerTenant ?? DEFAULT_MAX_QUEUE_PER_TENANT, 0);
    this.#maxBypass = checkCount("maxBypass", options.maxBypass ?? DEFAULT_MAX_BYPASS, 1);
    const initialHoldMs = options.initialHoldMs ?? DEFAULT_INITIAL_HOLD_MS;
    if (!(Number.isFinite(initialHoldMs) && initialHoldMs >= 0)) {
      throw new RangeError(`initialHoldMs must be a finite number >= 0, got ${initialHoldMs}`);
    }
    const holdAlpha = options.holdAlpha ?? DEFAULT_HOLD_ALPHA;
    if (!(holdAlpha > 0 && holdAlpha <= 1)) throw new RangeError(`holdAlpha must be in (0, 1], got ${holdAlpha}`);
    this.#clock = clock;
    this.#scheduler = scheduler;
    this.#holdMs = initialHoldMs;
    this.#holdAlpha = holdAlpha;
  }

  /**
   * Admits the request now if every limited level has room (and no older waiter is owed the slot),
   * otherwise queues it until it fits, its deadline passes or its signal aborts.
   *
   * Never rejects for overload: every outcome is an {@link AdmissionResult}. Rejects (TypeError /
   * RangeError) only on malformed input, which is a caller bug.
   */
  admit(request: AdmissionRequest, options: AdmitOptions): Promise<AdmissionResult> {
    try {
      this.#validate(request, options);
    } catch (e) {
      return Promise.reject(e);
    }
    const slots = this.#slotsOf(request.tenant, request.model, request.backend);
    const now = this.#clock.now();
    if (options.signal?.aborted) return Promise.resolve(this.#refusal("cancelled", slots));
    if (options.deadlineAt <= now) return Promise.resolve(this.#refusal("deadline", slots));

    // Restore the invariant "no queued waiter fits" (deadlines may have passed)
    // before a newcomer may go ahead of the queue.
    if (this.#queued > 0) this.#drain();

    const seq = ++this.#seq;
    if (this.#fits(slots, seq)) {
      this.#countBypasses(slots, seq);
      return Promise.resolve({ ok: true, lease: this.#grant(request, slots) });
    }
    const tenantQueue = this.#queues.get(request.tenant);
    if (this.#queued >= this.#maxQueue || (tenantQueue?.length ?? 0) >= this.#maxQueuePerTenant) {
      return Promise.resolve(this.#refusal("queue_full", slots));
    }
    return new Promise<AdmissionResult>((resolve) => {
      const waiter: Waiter = {
        seq,
        tenant: request.tenant,
        slots,
        request: { tenant: request.tenant, model: request.model, backend: request.backend },
        deadlineAt: options.deadlineAt,
        signal: options.signal,
        resolve,
        bypassed: 0,
        starving: false,
        cancelTimer: undefined,
        onAbort: undefined,
      };
      this.#enqueue(waiter);
      this.#armTimer(waiter);
      if (waiter.signal !== undefined) {
        const onAbort = () => this.#withdraw(waiter, "cancelled");
        waiter.onAbort = onAbort;
        waiter.signal.addEventListener("abort", onAbort, { once: true });
      }
    });
  }

  /**
   * Whether a backend slot on `backendId` would be granted now, for filtering selector candidates.
   * Advisory: the answer can change before {@link AdmissionLease.acquireBackend} is called.
   */
  hasBackendRoom(backendId: string): boolean {
    return this.#fits([{ level: "backend", key: backendId }], Infinity);
  }

  /** In-flight counts per level key and queue lengths. Counts only; for tests and the admin API. */
  stats(): AdmissionStats {
    const byTenant: Record<string, number> = {};
    for (const [tenant, q] of this.#queues) byTenant[tenant] = q.length;
    return {
      inFlight: {
        global: this.#inFlight.global.get(GLOBAL_KEY) ?? 0,
        tenant: Object.fromEntries(this.#inFlight.tenant),
        model: Object.fromEntries(this.#inFlight.model),
        backend: Object.fromEntries(this.#inFlight.backend),
      },
      queued: { total: this.#queued, byTenant },
      starving: this.#starving.length,
    };
  }

  /** Decisions since the controller was made (for metrics). */
  totals(): AdmissionTotals {
    return { admitted: this.#totals.admitted, queued: this.#totals.queued, refused: { ...this.#totals.refused } };
  }

  // ---------------------------------------------------------------------------------------------

  #validate(request: AdmissionRequest, options: AdmitOptions): void {
    if (typeof request.tenant !== "string" || typeof request.model !== "string") {
      throw new TypeError("tenant and model must be strings");
    }
    if (request.backend !== undefined && typeof request.backend !== "string") throw new TypeError("backend must be a string");
    if (typeof options.deadlineAt !== "number" || Number.isNaN(options.deadlineAt)) {
      throw new RangeError(`deadlineAt must be a number (Infinity for none), got ${options.deadlineAt}`);
    }
  }

  #slotsOf(tenant: string, model: string, backend: string | undefined): Slot[] {
    const slots: Slot[] = [
      { level: "global", key: GLOBAL_KEY },
      { level: "tenant", key: tenant },
      { level: "model", key: model },
    ];
    if (backend !== undefined) slots.push({ level: "backend", key: backend });
    return slots;
  }

  #limitOf(slot: Slot): number | undefined {
    return this.#limits[slot.level];
  }

  #count(slot: Slot): number {
    return this.#inFlight[slot.level].get(slot.key) ?? 0;
  }

  #add(slot: Slot, delta: number): void {
    const map = this.#inFlight[slot.level];
    const next = (map.get(slot.key) ?? 0) + delta;
    if (next <= 0) map.delete(slot.key);
    else map.set(slot.key, next);
  }

  /**
   * Whether a request with these slots, ordered at `seq`, fits now: at every limited level the
   * in-flight count plus the reservations of older starving waiters leaves room for one more.
   */
  #fits(slots: readonly Slot[], seq: number): boolean {
    for (const slot of slots) {
      const limit = this.#limitOf(slot);
      if (limit === undefined) continue;
      let needed = this.#count(slot) + 1;
      for (const s of this.#starving) {
        if (s.seq >= seq) break;
        if (s.slots.some((t) => t.level === slot.level && t.key === slot.key)) needed++;
      }
      if (needed > limit) return false;
    }
    return true;
  }

  /**
   * A request at `seq` is about to take `slots`: every older queued waiter that shares a limited
   * slot with it and does not fit right now has been overtaken once more.
   */
  #countBypasses(slots: readonly Slot[], seq: number): void {
    const limited = slots.filter((s) => this.#limitOf(s) !== undefined);
    if (limited.length === 0) return;
    for (const queue of this.#queues.values()) {
      for (const w of queue) {
        if (w.starving || w.seq >= seq) continue;
        if (!w.slots.some((t) => limited.some((s) => s.level === t.level && s.key === t.key))) continue;
        if (this.#fits(w.slots, w.seq)) continue;
        w.bypassed++;
        if (w.bypassed >= this.#maxBypass) this.#markStarving(w);
      }
    }
  }

  #markStarving(w: Waiter): void {
    w.starving = true;
    let i = this.#starving.length;
    while (i > 0 && this.#starving[i - 1]!.seq > w.seq) i--;
    this.#starving.splice(i, 0, w);
  }

  #grant(request: AdmissionRequest, slots: readonly Slot[]): AdmissionLease {
    this.#totals.admitted++;
    const base = slots.filter((s) => s.level !== "backend");
    for (const s of base) this.#add(s, 1);
    let backend: string | undefined = request.backend;
    if (backend !== undefined) this.#add({ level: "backend", key: backend }, 1);
    let released = false;
    const startedAt = this.#clock.now();

    const freeBackend = (): boolean => {
      if (backend === undefined) return false;
      this.#add({ level: "backend", key: backend }, -1);
      backend = undefined;
      return true;
    };

    return {
      tenant: request.tenant,
      model: request.model,
      get backend() {
        return backend;
      },
      get released() {
        return released;
      },
      acquireBackend: (backendId: string): BackendAdmission => {
        if (released) throw new Error("acquireBackend on a released admission lease");
        if (typeof backendId !== "string") throw new TypeError("backendId must be a string");
        if (backend === backendId) return { ok: true };
        const freed = freeBackend();
        const slot: Slot = { level: "backend", key: backendId };
        let result: BackendAdmission;
        if (this.#fits([slot], Infinity)) {
          this.#countBypasses([slot], Infinity);
          this.#add(slot, 1);
          backend = backendId;
          result = { ok: true };
        } else {
          result = { ok: false, reason: "backend_full", retryAfterSeconds: this.#retryAfter([slot]) };
        }
        if (freed) this.#drain();
        return result;
      },
      release: () => {
        if (released) return;
        released = true;
        for (const s of base) this.#add(s, -1);
        freeBackend();
        this.#recordHold(this.#clock.now() - startedAt);
        this.#drain();
      },
    };
  }

  #recordHold(ms: number): void {
    if (!(Number.isFinite(ms) && ms >= 0)) return;
    this.#holdMs += this.#holdAlpha * (ms - this.#holdMs);
  }

  /**
   * Expected wait ≈ hold-time EWMA × (waiters ahead + 1) / capacity of the tightest limited level,
   * quantised to 1..60 s. Capacity enters only through this coarse, bounded value.
   */
  #retryAfter(slots: readonly Slot[]): number {
    let capacity = Infinity;
    for (const s of slots) {
      const limit = this.#limitOf(s);
      if (limit !== undefined) capacity = Math.min(capacity, limit);
    }
    if (capacity === Infinity) return quantizeRetryAfter(0);
    return quantizeRetryAfter((this.#holdMs * (this.#queued + 1)) / capacity);
  }

  #refusal(reason: AdmissionRefusalReason, slots: readonly Slot[]): AdmissionRefusal {
    this.#totals.refused[reason]++;
    return { ok: false, reason, retryAfterSeconds: this.#retryAfter(slots) };
  }

  #enqueue(w: Waiter): void {
    this.#totals.queued++;
    let queue = this.#queues.get(w.tenant);
    if (queue === undefined) {
      queue = [];
      this.#queues.set(w.tenant, queue);
      this.#ring.push(w.tenant);
    }
    queue.push(w);
    this.#queued++;
  }

  /** Takes `w` out of the queue and detaches its timer and abort listener. Returns false if not queued. */
  #dequeue(w: Waiter): boolean {
    const queue = this.#queues.get(w.tenant);
    const index = queue?.indexOf(w) ?? -1;
    if (queue === undefined || index < 0) return false;
    queue.splice(index, 1);
    this.#queued--;
    if (queue.length === 0) {
      this.#queues.delete(w.tenant);
      const r = this.#ring.indexOf(w.tenant);
      this.#ring.splice(r, 1);
      if (r < this.#cursor) this.#cursor--;
      if (this.#cursor >= this.#ring.length) this.#cursor = 0;
    }
    if (w.starving) this.#starving.splice(this.#starving.indexOf(w), 1);
    w.cancelTimer?.();
    w.cancelTimer = undefined;
    if (w.onAbort !== undefined) w.signal?.removeEventListener("abort", w.onAbort);
    w.onAbort = undefined;
    return true;
  }

  /** Removes a queued waiter with a refusal; a starving waiter's reservations go with it. */
  #withdraw(w: Waiter, reason: "deadline" | "cancelled"): void {
    if (!this.#dequeue(w)) return;
    w.resolve(this.#refusal(reason, w.slots));
    if (w.starving) this.#drain();
  }

  #armTimer(w: Waiter): void {
    if (w.deadlineAt === Infinity) return;
    const delay = w.deadlineAt - this.#clock.now();
    w.cancelTimer = this.#scheduler.schedule(delay, () => {
      w.cancelTimer = undefined;
      // A timer may fire early (capped delay, coarse runtime timers): re-arm for the remainder.
      if (this.#clock.now() < w.deadlineAt) this.#armTimer(w);
      else this.#withdraw(w, "deadline");
    });
  }

  /** Refuses every queued waiter whose deadline is at or before `now`. */
  #expire(now: number): void {
    const due: Waiter[] = [];
    for (const queue of this.#queues.values()) for (const w of queue) if (w.deadlineAt <= now) due.push(w);
    for (const w of due) {
      this.#dequeue(w);
      w.resolve(this.#refusal("deadline", w.slots));
    }
  }

  /** Oldest fitting waiter of the first tenant, in round-robin order from the cursor, that has one. */
  #next(): { waiter: Waiter; ringIndex: number } | undefined {
    const n = this.#ring.length;
    for (let j = 0; j < n; j++) {
      const ringIndex = (this.#cursor + j) % n;
      const queue = this.#queues.get(this.#ring[ringIndex]!)!;
      for (const waiter of queue) if (this.#fits(waiter.slots, waiter.seq)) return { waiter, ringIndex };
    }
    return undefined;
  }

  /** Admits queued waiters while any fits. Re-entrant calls are folded into the running one. */
  #drain(): void {
    if (this.#draining) {
      this.#drainAgain = true;
      return;
    }
    this.#draining = true;
    try {
      do {
        this.#drainAgain = false;
        if (this.#queued === 0) break;
        this.#expire(this.#clock.now());
        for (let found = this.#next(); found !== undefined; found = this.#next()) {
          const { waiter, ringIndex } = found;
          // The tenant after this one is served next; #dequeue shifts the cursor if this tenant's
          // sub-queue empties and leaves the ring.
          this.#cursor = ringIndex + 1;
          this.#dequeue(waiter);
          if (this.#cursor >= this.#ring.length) this.#cursor = 0;
          this.#countBypasses(waiter.slots, waiter.seq);
          waiter.resolve({ ok: true, lease: this.#grant(waiter.request, waiter.slots) });
        }
      } while (this.#drainAgain);
    } finally {
      this.#draining = false;
    }
  }
}
