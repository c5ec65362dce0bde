/**
 * Pieces shared by the isolate caches of remote per-backend state (circuit breakers, health):
 * work handed to the request's `waitUntil` that can never throw into the request, and a bounded
 * least-recently-used map of entries.
 */

/** Hands background work to the request (its `ctx.waitUntil`). */
export type Schedule = (work: Promise<unknown>) => void;

/**
 * Starts `work` now and hands it to `schedule`; neither a throw nor a rejection reaches the
 * caller — both go to `onError`, and an `onError` that throws is swallowed too.
 */
export function runInBackground(schedule: Schedule, work: () => Promise<void>, onError: (err: unknown) => void): void {
  const report = (err: unknown) => callSafely(() => onError(err));
  const p = (async () => work())().catch(report);
  try {
    schedule(p);
  } catch (err) {
    report(err);
  }
}

/** Runs an error handler; a handler that throws must not break the request either. */
export function callSafely(fn: () => void): void {
  try {
    fn();
  } catch {
    // Swallowed on purpose: reporting an error must never become one.
  }
}

/**
 * The entry for `key`, created by `create` when missing, moved to most-recently-used; the least
 * recently used entry is dropped when the map grows past `maxEntries`.
 */
export function touchLru<K, V>(entries: Map<K, V>, key: K, create: () => V, maxEntries: number): V {
  let entry = entries.get(key);
  if (entry === undefined) entry = create();
  else entries.delete(key);
  entries.set(key, entry);
  if (entries.size > maxEntries) {
    const oldest = entries.keys().next().value;
    if (oldest !== undefined) entries.delete(oldest);
  }
  return entry;
}

/** Validates a non-negative option. @throws RangeError naming it. */
export function nonNegative(name: string, v: number): number {
  if (!(Number.isFinite(v) && v >= 0)) throw new RangeError(`${name} must be a finite number >= 0, got ${v}`);
  return v;
}

/**
 * The per-backend entries of an isolate cache with its error path: a bounded LRU map whose
 * entries `create` makes, background work that never throws into the request, and an error
 * handler (`onError`) that may not throw either. The breaker and health caches each keep one.
 */
export class BackendEntries<Entry, Operation extends string> {
  /** Insertion order doubles as recency order. */
  readonly #entries = new Map<string, Entry>();
  readonly #create: () => Entry;
  readonly #maxEntries: number;
  readonly #onError: (err: unknown, backendId: string, operation: Operation) => void;

  /** @throws RangeError when `maxEntries` is not an integer >= 1. */
  constructor(create: () => Entry, maxEntries = 1024, onError: (err: unknown, backendId: string, operation: Operation) => void = () => {}) {
    if (!(Number.isInteger(maxEntries) && maxEntries >= 1)) throw new RangeError(`maxEntries must be an integer >= 1, got ${maxEntries}`);
    this.#create = create;
    this.#maxEntries = maxEntries;
    this.#onError = onError;
  }

  /** The backend's entry, made when missing, now the most recently used. */
  touch(backendId: string): Entry {
    return touchLru(this.#entries, backendId, this.#create, this.#maxEntries);
  }

  /** Starts `work` now and hands it to `schedule`; neither a throw nor a rejection reaches the caller. */
  run(schedule: Schedule, backendId: string, operation: Operation, work: () => Promise<void>): void {
    runInBackground(schedule, work, (err) => this.error(err, backendId, operation));
  }

  error(err: unknown, backendId: string, operation: Operation): void {
    callSafely(() => this.#onError(err, backendId, operation));
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Every entry as it is, least recently used first: no refresh, no change of recency (for metrics). */
  peekAll(): IterableIterator<[string, Entry]> {
    return this.#entries.entries();
  }
}
