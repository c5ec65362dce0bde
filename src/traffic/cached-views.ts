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
