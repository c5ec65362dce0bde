import type { BreakerAdmission, BreakerReport, BreakerSnapshot, BreakerState } from "./breaker.ts";
import type { BreakerClient } from "./breaker-client.ts";
import { emptyCachedView, nonNegative, RemoteViewCache, type CachedView, type Schedule } from "./remote-view-cache.ts";
import type { Clock } from "../deps/clock.ts";

// `Schedule` keeps background work alive past the response: the request's `ctx.waitUntil`, passed
// per call because an execution context belongs to one request, while the cache belongs to the
// isolate. Pass `(p) => ctx.waitUntil(p)` (waitUntil must be called on its context).
export type { Schedule } from "./remote-view-cache.ts";

/**
 * What the isolate's cached view says about sending an attempt to a backend:
 * - `allow`: closed (or unknown): send it as a normal attempt.
 * - `deny`: open and not yet due for probing, or half-open with every probe permit taken.
 * - `probe`: only a probe may go: call `acquireProbe` and send the attempt only if it is allowed.
 */
export type BreakerAdmissionHint = "allow" | "deny" | "probe";

export type BreakerCacheOperation = "state" | "acquire" | "report";

/** Reports a failed breaker call (for logs/metrics); the cache has already failed open. */
export type BreakerErrorHandler = (err: unknown, backendId: string, operation: BreakerCacheOperation) => void;

export interface BreakerCacheOptions {
  /** How long a fetched state is served before it is refreshed in the background, in ms. Default 1000. */
  readonly ttlMs?: number;
  /**
   * Non-probe outcomes are summed per backend for this long and then sent in one call, in ms.
   * 0 sends each report on its own. Default 250: a breaker learns of a failure burst at most this
   * much later, and a busy isolate makes a few calls per second per backend instead of one per
   * attempt.
   */
  readonly flushMs?: number;
  /** `acquireProbe` gives up on the breaker after this long and fails open, in ms. Default 1000. */
  readonly acquireTimeoutMs?: number;
  /**
   * A background refresh still unsettled after this long no longer blocks a new one (its request
   * may have been cancelled), in ms. Default 5000.
   */
  readonly refreshTimeoutMs?: number;
  /** Maximum number of backends cached; least recently used ones are dropped past it. Default 1024. */
  readonly maxEntries?: number;
  readonly onError?: BreakerErrorHandler;
  /** Resolves after `ms` (timer injection for tests). Default `setTimeout`. */
  readonly delay?: (ms: number) => Promise<void>;
}

/** The cache bound to one request's {@link Schedule}: what the executor uses. */
export interface BreakerGate {
  /** True unless the cached view says normal attempts may go (closed or unknown). */
  isOpen(backendId: string): boolean;
  admission(backendId: string): BreakerAdmissionHint;
  /** The cached breaker state (`closed` when unknown). */
  state(backendId: string): BreakerState;
  acquireProbe(backendId: string): Promise<BreakerAdmission>;
  report(backendId: string, outcome: BreakerReport, permitId?: string): void;
}

interface Entry extends CachedView<BreakerSnapshot> {
  acquiring: boolean;
  successes: number;
  failures: number;
  flushScheduled: boolean;
}

/** Fail-open answer: the breaker could not be asked, so the attempt goes ahead as a normal one. */
const FAIL_OPEN: BreakerAdmission = Object.freeze({ allowed: true, probe: false });
const DENY: BreakerAdmission = Object.freeze({ allowed: false, probe: false });
const TIMEOUT = Symbol("timeout");

/**
 * An isolate's view of the per-backend circuit breakers, so a request never waits on a Durable
 * Object call to learn whether a backend is open: `isOpen` / `admission` answer synchronously from a
 * view at most `ttlMs` old and start a background refresh (one per backend at a time) when it is
 * older. Only a half-open probe (`acquireProbe`) calls the breaker on the request path, and half-open
 * is brief and rare.
 *
 * Availability over protection (fail-open): a backend never seen is treated as closed (its first
 * attempt in this isolate goes ahead while the state is fetched); when the breaker cannot be
 * reached, the backend is treated as closed too, except that an `open` view keeps refusing until
 * the `openUntil` it carries, which no breaker call could have shortened. A failed refresh is
 * retried after one TTL, not on every request. Nothing here throws into the caller or returns a
 * rejected promise; failures go to `onError`.
 *
 * Outcomes are reported off the hot path through the caller's {@link Schedule}: probe outcomes at
 * once (they drive the half-open decision), other outcomes summed per backend for `flushMs`. The
 * breaker's answer to every call updates the view, so the isolate that sees a failure burst learns
 * of the trip without waiting for its TTL.
 */
export class BreakerCache {
  readonly #client: BreakerClient;
  readonly #clock: Clock;
  readonly #flushMs: number;
  readonly #acquireTimeoutMs: number;
  readonly #delay: (ms: number) => Promise<void>;
  readonly #views: RemoteViewCache<BreakerSnapshot, Entry, BreakerCacheOperation>;
  /** Probe permits this isolate took and has not reported yet. */
  readonly #permits = new Set<string>();

  /** @throws RangeError on a negative or non-finite duration, or a `maxEntries` that is not an integer >= 1. */
  constructor(client: BreakerClient, clock: Clock, options: BreakerCacheOptions = {}) {
    this.#client = client;
    this.#clock = clock;
    const ttlMs = nonNegative("ttlMs", options.ttlMs ?? 1000);
    this.#flushMs = nonNegative("flushMs", options.flushMs ?? 250);
    this.#acquireTimeoutMs = nonNegative("acquireTimeoutMs", options.acquireTimeoutMs ?? 1000);
    const refreshTimeoutMs = nonNegative("refreshTimeoutMs", options.refreshTimeoutMs ?? 5000);
    this.#views = new RemoteViewCache<BreakerSnapshot, Entry, BreakerCacheOperation>(clock, {
      create: (): Entry => ({ ...emptyCachedView<BreakerSnapshot>(), acquiring: false, successes: 0, failures: 0, flushScheduled: false }),
      fetch: (backendId) => client.state(backendId),
      ttlMs,
      refreshTimeoutMs,
      maxEntries: options.maxEntries,
      onError: options.onError,
      // No breaker call could have shortened an open period: an open view is served until its openUntil.
      keepAfterFailure: (v, now) => v.state === "open" && v.openUntil !== undefined && now < v.openUntil,
    });
    this.#delay = options.delay ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  /** Probe permits taken in this isolate and not yet handed back with an outcome (for the admin API). */
  get permitsHeld(): number {
    return this.#permits.size;
  }

  /** This cache with one request's {@link Schedule} bound. */
  forRequest(schedule: Schedule): BreakerGate {
    return {
      isOpen: (id) => this.isOpen(id, schedule),
      admission: (id) => this.admission(id, schedule),
      state: (id) => this.state(id, schedule),
      acquireProbe: (id) => this.acquireProbe(id),
      report: (id, outcome, permitId) => this.report(id, outcome, schedule, permitId),
    };
  }

  /** The cached view (undefined when unknown), refreshed in the background when stale. */
  view(backendId: string, schedule: Schedule): BreakerSnapshot | undefined {
    return this.#views.read(backendId, schedule).view;
  }

  /** The whole breaker views this isolate has cached, by backend id (status pages; starts no I/O). */
  cachedSnapshots(): [string, BreakerSnapshot][] {
    return this.#views.cachedViews((v) => v);
  }

  /** The states this isolate has cached, by backend id, as they are (read by metrics; starts no I/O). */
  cachedStates(): [string, BreakerState][] {
    return this.#views.cachedViews((v) => v.state);
  }

  /** The cached breaker state; `closed` when unknown. */
  state(backendId: string, schedule: Schedule): BreakerState {
    return this.view(backendId, schedule)?.state ?? "closed";
  }

  /** True unless normal attempts may go (see {@link admission}: anything but `allow`). */
  isOpen(backendId: string, schedule: Schedule): boolean {
    return this.admission(backendId, schedule) !== "allow";
  }

  admission(backendId: string, schedule: Schedule): BreakerAdmissionHint {
    const v = this.view(backendId, schedule);
    if (v === undefined || v.state === "closed") return "allow";
    if (v.state === "open" && v.openUntil !== undefined && this.#clock.now() < v.openUntil) return "deny";
    if (v.state === "half_open" && v.permitsOutstanding >= v.halfOpenProbes) return "deny";
    return "probe";
  }

  /**
   * Asks the breaker for a probe permit (a Durable Object call: only when `admission` says `probe`).
   * One call per backend is in flight per isolate; a concurrent caller is refused at once (it should
   * use another backend), so a burst of requests does not turn into a burst of calls. Never rejects:
   * if the breaker fails or does not answer within `acquireTimeoutMs`, the attempt is allowed as a
   * normal one (fail-open). A permit the breaker granted after the timeout expires by its TTL.
   */
  async acquireProbe(backendId: string): Promise<BreakerAdmission> {
    const entry = this.#views.touch(backendId);
    if (entry.acquiring) return DENY;
    entry.acquiring = true;
    const seq = this.#views.nextSeq();
    try {
      const call = (async () => this.#client.acquire(backendId))();
      call.catch(() => {}); // a late rejection after the timeout is not unhandled
      const result = await Promise.race([call, this.#delay(this.#acquireTimeoutMs).then((): typeof TIMEOUT => TIMEOUT)]);
      if (result === TIMEOUT) throw new Error(`breaker acquire timed out after ${this.#acquireTimeoutMs} ms`);
      this.#views.apply(entry, seq, result.snapshot);
      if (result.permitId !== undefined) this.#permits.add(result.permitId);
      return result.permitId === undefined
        ? { allowed: result.allowed, probe: result.probe }
        : { allowed: result.allowed, probe: result.probe, permitId: result.permitId };
    } catch (err) {
      this.#views.failed(entry, err, backendId, "acquire");
      return FAIL_OPEN;
    } finally {
      entry.acquiring = false;
    }
  }

  /**
   * Reports an attempt's outcome off the hot path (see `BreakerReport` for what counts as a
   * failure). A probe's outcome must carry its `permitId`, including `neutral` ones, which only
   * release the permit. Neutral outcomes without a permit are dropped here.
   */
  report(backendId: string, outcome: BreakerReport, schedule: Schedule, permitId?: string): void {
    try {
      const entry = this.#views.touch(backendId);
      if (permitId !== undefined) {
        this.#permits.delete(permitId);
        const seq = this.#views.nextSeq();
        this.#views.run(schedule, backendId, "report", async () => this.#views.apply(entry, seq, await this.#client.report(backendId, outcome, permitId)));
        return;
      }
      if (outcome === "neutral") return;
      if (outcome === "success") entry.successes++;
      else entry.failures++;
      if (entry.flushScheduled) return;
      entry.flushScheduled = true;
      // The entry object is captured, so a flush survives the entry's eviction from the map.
      this.#views.run(schedule, backendId, "report", async () => {
        try {
          if (this.#flushMs > 0) await this.#delay(this.#flushMs);
        } finally {
          entry.flushScheduled = false;
        }
        const counts = { successes: entry.successes, failures: entry.failures };
        entry.successes = 0;
        entry.failures = 0;
        if (counts.successes + counts.failures === 0) return;
        const seq = this.#views.nextSeq();
        this.#views.apply(entry, seq, await this.#client.reportMany(backendId, counts));
      });
    } catch (err) {
      this.#views.error(err, backendId, "report");
    }
  }

  /** Number of backends cached. */
  get size(): number {
    return this.#views.size;
  }
}
