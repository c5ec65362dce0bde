import type { Clock } from "../deps/clock.ts";
import type { LoadSignals } from "./selector.ts";

/**
 * Ends one tracked attempt. Idempotent: only the first call has an effect, so it is safe to call
 * from both a `finally` and an abort/stream-end handler.
 *
 * @param latencyMs - Latency sample to record (e.g. time to first byte). Omit it for attempts whose
 *   duration says nothing about the backend's speed (aborted by the client, failed before
 *   reaching it); the in-flight count is released either way.
 */
export type Release = (latencyMs?: number) => void;

/** Options for {@link LoadTracker}. */
export interface LoadTrackerOptions {
  /**
   * Half-life of the latency EWMA, in ms: a sample this old weighs half as much as a new one.
   * Shorter reacts faster to a degrading backend, longer is steadier. Default 10 s.
   */
  readonly halfLifeMs?: number;
  /**
   * A backend's latency is reported only if its newest sample is at most this old, in ms, so a
   * backend that was slow once and then went idle is not penalised forever. Default 60 s.
   */
  readonly freshnessMs?: number;
  /** Maximum number of tracked backends before idle least-recently-used ones are evicted. Default 1024. */
  readonly maxBackends?: number;
}

interface Entry {
  inFlight: number;
  /** Decayed sum of latency samples; the EWMA is weightedSum / weightTotal. */
  weightedSum: number;
  /** Decayed count of samples. 0 means "no sample yet". */
  weightTotal: number;
  lastSampleAt: number;
}

const DEFAULT_HALF_LIFE_MS = 10_000;
const DEFAULT_FRESHNESS_MS = 60_000;
const DEFAULT_MAX_BACKENDS = 1024;

/**
 * Isolate-local load signals (in-flight count and latency EWMA per backend) for the p2c selector.
 *
 * Each isolate sees only its own requests; that is enough for p2c, which only needs a relative,
 * reasonably recent signal, and avoids any cross-isolate coordination on the hot path.
 *
 * Latency is a time-decayed EWMA: each sample's weight halves every `halfLifeMs` of age, and the
 * reported value is the decayed weighted mean `sum(x_i * 2^(-age_i / halfLife)) / sum(2^(-age_i / halfLife))`.
 * Decaying by elapsed time rather than per sample makes the reaction speed independent of request
 * rate (a busy backend is not smoothed more than a quiet one). Normalising by the decayed weight
 * means the first sample is taken as is (no bias toward 0) and samples arriving in the same
 * millisecond count equally instead of the later one being discarded. For samples spaced `dt` apart
 * it converges to a classic EWMA with `alpha = 1 - 2^(-dt / halfLife)`.
 *
 * Memory is bounded by `maxBackends`: past it, the least recently used entries with nothing in
 * flight are evicted. Entries with requests in flight are never evicted (that would lose the count
 * their release must decrement), so the cap can be exceeded only while more distinct backends than
 * `maxBackends` each have a request in flight at once.
 */
export class LoadTracker implements LoadSignals {
  readonly #clock: Clock;
  readonly #halfLifeMs: number;
  readonly #freshnessMs: number;
  readonly #maxBackends: number;
  /** Insertion order doubles as recency order: touched entries are re-inserted at the end. */
  readonly #entries = new Map<string, Entry>();

  /**
   * @throws RangeError on a non-positive or non-finite `halfLifeMs`, a negative or NaN
   *   `freshnessMs` (Infinity is allowed: samples never expire), or a `maxBackends` that is not a
   *   positive integer.
   */
  constructor(clock: Clock, options: LoadTrackerOptions = {}) {
    const halfLifeMs = options.halfLifeMs ?? DEFAULT_HALF_LIFE_MS;
    const freshnessMs = options.freshnessMs ?? DEFAULT_FRESHNESS_MS;
    const maxBackends = options.maxBackends ?? DEFAULT_MAX_BACKENDS;
    if (!(Number.isFinite(halfLifeMs) && halfLifeMs > 0)) {
      throw new RangeError(`halfLifeMs must be a finite number > 0, got ${halfLifeMs}`);
    }
    if (!(freshnessMs >= 0)) {
      throw new RangeError(`freshnessMs must be >= 0, got ${freshnessMs}`);
    }
    if (!(Number.isInteger(maxBackends) && maxBackends >= 1)) {
      throw new RangeError(`maxBackends must be an integer >= 1, got ${maxBackends}`);
    }
    this.#clock = clock;
    this.#halfLifeMs = halfLifeMs;
    this.#freshnessMs = freshnessMs;
    this.#maxBackends = maxBackends;
  }

  /**
   * Marks one attempt on `backendId` as in flight and returns the only way to end it.
   *
   * There is deliberately no separate `finish(id)`: an in-flight count can only be released through
   * the handle of the attempt that raised it, and only once, so a double release cannot
   * drive the count of another concurrent attempt down.
   */
  begin(backendId: string): Release {
    const entry = this.#touch(backendId);
    entry.inFlight++;
    let released = false;
    return (latencyMs?: number) => {
      if (released) return;
      released = true;
      entry.inFlight--;
      if (latencyMs !== undefined) this.#record(entry, latencyMs);
      // Busy entries are never evicted, so this finds the same entry; touching it marks it recently
      // used and lets eviction reclaim idle entries if the cap was exceeded while all were busy.
      this.#touch(backendId);
    };
  }

  /**
   * Records a latency sample without an in-flight attempt (e.g. from an out-of-band probe).
   * Negative, NaN or infinite samples are ignored: one bad measurement must not poison the EWMA.
   */
  observe(backendId: string, latencyMs: number): void {
    this.#record(this.#touch(backendId), latencyMs);
  }

  /** Attempts currently in flight on `backendId` in this isolate. */
  inFlight(backendId: string): number {
    return this.#entries.get(backendId)?.inFlight ?? 0;
  }

  /** EWMA latency in ms, or undefined when there is no sample or the newest is older than `freshnessMs`. */
  latencyMs(backendId: string): number | undefined {
    const entry = this.#entries.get(backendId);
    if (entry === undefined || !this.#isFresh(entry, this.#clock.now())) return undefined;
    return entry.weightedSum / entry.weightTotal;
  }

  /**
   * Every tracked key under `prefix` taken together, fresh or not, for status pages (selectors use
   * {@link inFlight} and {@link latencyMs}): attempts in flight summed, and the EWMA latency of the
   * key sampled last, with when, so an old figure shows with its age rather than not at all.
   */
  summary(prefix: string): { readonly inFlight: number; readonly latency: { readonly ms: number; readonly at: number } | undefined } {
    let inFlight = 0;
    let latency: { ms: number; at: number } | undefined;
    for (const [key, e] of this.#entries) {
      if (!key.startsWith(prefix)) continue;
      inFlight += e.inFlight;
      if (e.weightTotal > 0 && (latency === undefined || e.lastSampleAt > latency.at)) latency = { ms: e.weightedSum / e.weightTotal, at: e.lastSampleAt };
    }
    return { inFlight, latency };
  }

  /** Number of backends currently tracked (bounded by `maxBackends` except while all are busy). */
  get size(): number {
    return this.#entries.size;
  }

  #isFresh(entry: Entry, now: number): boolean {
    return entry.weightTotal > 0 && now - entry.lastSampleAt <= this.#freshnessMs;
  }

  #record(entry: Entry, latencyMs: number): void {
    if (!(Number.isFinite(latencyMs) && latencyMs >= 0)) return;
    const now = this.#clock.now();
    if (!this.#isFresh(entry, now)) {
      // A stale history was already declared meaningless to readers; it must not leak back in
      // through the first new sample.
      entry.weightedSum = latencyMs;
      entry.weightTotal = 1;
    } else {
      // A clock stepping backwards must not amplify old samples (decay factor > 1).
      const elapsed = Math.max(0, now - entry.lastSampleAt);
      const decay = Math.pow(2, -elapsed / this.#halfLifeMs);
      entry.weightedSum = entry.weightedSum * decay + latencyMs;
      entry.weightTotal = entry.weightTotal * decay + 1;
    }
    entry.lastSampleAt = Math.max(entry.lastSampleAt, now);
  }

  #touch(backendId: string): Entry {
    const entry = this.#entries.get(backendId) ?? {
      inFlight: 0,
      weightedSum: 0,
      weightTotal: 0,
      lastSampleAt: -Infinity,
    };
    this.#entries.delete(backendId);
    this.#entries.set(backendId, entry);
    if (this.#entries.size > this.#maxBackends) this.#evict(backendId);
    return entry;
  }

  #evict(keep: string): void {
    for (const [id, e] of this.#entries) {
      if (this.#entries.size <= this.#maxBackends) return;
      if (id !== keep && e.inFlight === 0) this.#entries.delete(id);
    }
  }
}
