/**
 * The core both isolate caches of remote per-backend state (circuit breakers, health) are built
 * on: a view at most `ttlMs` old served synchronously, one background refresh per backend at a
 * time, answers applied in call order, a bounded least-recently-used map of entries, and an error
 * path that never throws into the request.
 */
import type { Clock } from "../deps/clock.ts";

/** Hands background work to the request (its `ctx.waitUntil`). */
export type Schedule = (work: Promise<unknown>) => void;

/**
 * What the core keeps of a backend: its cached view and the bookkeeping that refreshes it. A
 * cache's own entry type adds its fields to these (see {@link emptyCachedView}).
 */
export interface CachedView<View> {
  /** The last answer applied; undefined when unknown or forgotten after a failure. */
  view: View | undefined;
  fetchedAt: number;
  /** When the refresh in flight started; undefined when none is. */
  refreshingSince: number | undefined;
  /** Sequence number of the newest call whose answer was applied: an older answer never overwrites it. */
  appliedSeq: number;
}

/** The core fields of a backend never seen: no view, due for a refresh at once. */
export function emptyCachedView<View>(): CachedView<View> {
  return { view: undefined, fetchedAt: Number.NEGATIVE_INFINITY, refreshingSince: undefined, appliedSeq: 0 };
}

/** How one cache fills the core: its entries, its remote call, and its fail-open rule. */
export interface RemoteViewSource<View, Entry extends CachedView<View>, Operation extends string> {
  /** A new entry: {@link emptyCachedView} plus the cache's own fields. */
  readonly create: () => Entry;
  /** Asks the backend's remote object for its current view: the background refresh. */
  readonly fetch: (backendId: string) => Promise<View>;
  /** How long a view is served before it is refreshed, in ms (checked by the cache, which owns the default). */
  readonly ttlMs: number;
  /** A refresh still unsettled after this long no longer blocks a new one (its request may have been cancelled), in ms. */
  readonly refreshTimeoutMs: number;
  /** Maximum number of backends kept; least recently used ones are dropped past it. Default 1024. */
  readonly maxEntries?: number | undefined;
  /** Reports a failed call; the cache has already failed open. A refresh reports `state`. */
  readonly onError?: ((err: unknown, backendId: string, operation: Operation | "state") => void) | undefined;
  /** Whether a view may still be served after a failed call at `now`; without it, a failure forgets the view. */
  readonly keepAfterFailure?: ((view: View, now: number) => boolean) | undefined;
  /** Runs after an answer was applied to the entry, for state the cache derives from the view. */
  readonly onApplied?: ((entry: Entry, view: View) => void) | undefined;
}

/**
 * The per-backend views of one remote object kind, cached in the isolate so a request never waits
 * on a Durable Object call to read them. `read` returns the entry at once and, when its view is
 * `ttlMs` old or older, starts one background refresh through the caller's {@link Schedule}
 * (another only once that one settled or hung past `refreshTimeoutMs`). Every call the cache makes
 * takes a sequence number first (`nextSeq`), and `apply` drops an answer older than the one applied,
 * so a slow refresh cannot undo what a later call learned. A failed call (`failed`) keeps what
 * `keepAfterFailure` allows, else forgets the view, and is retried after one TTL, not on every
 * request. Nothing here throws into the caller; errors go to `onError`, which may not throw either.
 */
export class RemoteViewCache<View, Entry extends CachedView<View>, Operation extends string> {
  /** Insertion order doubles as recency order. */
  readonly #entries = new Map<string, Entry>();
  readonly #clock: Clock;
  readonly #source: RemoteViewSource<View, Entry, Operation>;
  readonly #maxEntries: number;
  #seq = 0;

  /** @throws RangeError when `maxEntries` is not an integer >= 1. */
  constructor(clock: Clock, source: RemoteViewSource<View, Entry, Operation>) {
    const maxEntries = source.maxEntries ?? 1024;
    if (!(Number.isInteger(maxEntries) && maxEntries >= 1)) throw new RangeError(`maxEntries must be an integer >= 1, got ${maxEntries}`);
    this.#clock = clock;
    this.#source = source;
    this.#maxEntries = maxEntries;
  }

  /** The backend's entry, made when missing, now the most recently used; starts no I/O. */
  touch(backendId: string): Entry {
    const entries = this.#entries;
    let entry = entries.get(backendId);
    if (entry === undefined) entry = this.#source.create();
    else entries.delete(backendId);
    entries.set(backendId, entry);
    if (entries.size > this.#maxEntries) {
      const oldest = entries.keys().next().value;
      if (oldest !== undefined) entries.delete(oldest);
    }
    return entry;
  }

  /** The backend's entry as {@link touch} gives it, with a background refresh started if its view is stale. */
  read(backendId: string, schedule: Schedule): Entry {
    const entry = this.touch(backendId);
    this.#maybeRefresh(backendId, entry, schedule);
    return entry;
  }

  /** The sequence number of a call about to be made: its answer goes to {@link apply} with it. */
  nextSeq(): number {
    return ++this.#seq;
  }

  /** Applies an answer unless a newer one was already applied. */
  apply(entry: Entry, seq: number, view: View): void {
    if (seq < entry.appliedSeq) return;
    entry.appliedSeq = seq;
    entry.view = view;
    entry.fetchedAt = this.#clock.now();
    this.#source.onApplied?.(entry, view);
  }

  /** Fail-open after a failed call: keep the view only if `keepAfterFailure` says so, retry after one TTL, report. */
  failed(entry: Entry, err: unknown, backendId: string, operation: Operation | "state"): void {
    const now = this.#clock.now();
    const v = entry.view;
    if (!(v !== undefined && this.#source.keepAfterFailure?.(v, now) === true)) entry.view = undefined;
    entry.fetchedAt = now;
    this.error(err, backendId, operation);
  }

  /** Starts `work` now and hands it to `schedule`; neither a throw nor a rejection reaches the caller. */
  run(schedule: Schedule, backendId: string, operation: Operation | "state", work: () => Promise<void>): void {
    const report = (err: unknown) => this.error(err, backendId, operation);
    const p = (async () => work())().catch(report);
    try {
      schedule(p);
    } catch (err) {
      report(err);
    }
  }

  /** Reports an error to `onError`; a handler that throws must not break the request either. */
  error(err: unknown, backendId: string, operation: Operation | "state"): void {
    try {
      this.#source.onError?.(err, backendId, operation);
    } catch {
      // Swallowed on purpose: reporting an error must never become one.
    }
  }

  /** Number of backends cached. */
  get size(): number {
    return this.#entries.size;
  }

  /** `pick` of every cached view, by backend id, least recently used first: no refresh, no change of recency (for metrics). */
  cachedViews<T>(pick: (view: View) => T): [string, T][] {
    const out: [string, T][] = [];
    for (const [id, e] of this.#entries) if (e.view) out.push([id, pick(e.view)]);
    return out;
  }

  #maybeRefresh(backendId: string, entry: Entry, schedule: Schedule): void {
    const now = this.#clock.now();
    if (now - entry.fetchedAt < this.#source.ttlMs) return;
    if (entry.refreshingSince !== undefined && now - entry.refreshingSince < this.#source.refreshTimeoutMs) return;
    const started = now;
    entry.refreshingSince = started;
    const seq = this.nextSeq();
    this.run(schedule, backendId, "state", async () => {
      try {
        this.apply(entry, seq, await this.#source.fetch(backendId));
      } catch (err) {
        this.failed(entry, err, backendId, "state");
      } finally {
        if (entry.refreshingSince === started) entry.refreshingSince = undefined;
      }
    });
  }
}

/** Validates a non-negative option. @throws RangeError naming it. */
export function nonNegative(name: string, v: number): number {
  if (!(Number.isFinite(v) && v >= 0)) throw new RangeError(`${name} must be a finite number >= 0, got ${v}`);
  return v;
}
