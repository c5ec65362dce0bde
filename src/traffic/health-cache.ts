import { emptyCachedView, nonNegative, RemoteViewCache, type CachedView, type Schedule } from "./remote-view-cache.ts";
import { isRoutable, probeTargetKey, resolveProbeTarget, type HealthStatus, type ProbeTarget } from "./health.ts";
import type { HealthClient, HealthView } from "./health-client.ts";
import type { Clock } from "../deps/clock.ts";

export type { Schedule } from "./remote-view-cache.ts";

export type HealthCacheOperation = "state" | "watch";

/** Reports a failed monitor call or an invalid target (for logs/metrics); the cache has already failed open. */
export type HealthErrorHandler = (err: unknown, backendId: string, operation: HealthCacheOperation) => void;

export interface HealthCacheOptions {
  /** How long a fetched state is served before it is refreshed in the background, in ms. Default 2000. */
  readonly ttlMs?: number;
  /**
   * A background refresh or watch still unsettled after this long no longer blocks a new one (its
   * request may have been cancelled), in ms. Default 5000.
   */
  readonly refreshTimeoutMs?: number;
  /** After a failed `watch` (or an invalid target), the same target is not tried again for this long, in ms. Default 30000. */
  readonly watchRetryMs?: number;
  /** Maximum number of backends cached; least recently used ones are dropped past it. Default 1024. */
  readonly maxEntries?: number;
  readonly onError?: HealthErrorHandler;
}

/** The cache bound to one request's {@link Schedule}: what the executor uses. */
export interface HealthGate {
  /** False only when the cached view says `unhealthy`; unknown or unreachable is healthy. */
  isHealthy(backendId: string): boolean;
  /** The cached status; `unknown` when nothing is cached. */
  status(backendId: string): HealthStatus;
  /** Asks the backend's monitor to watch `target`, once per isolate per target; returns at once. */
  ensureWatched(backendId: string, target: ProbeTarget): void;
}

interface Entry extends CachedView<HealthView> {
  /** Key of the target the monitor confirmed watching for this isolate. */
  watchedKey: string | undefined;
  /** Key of the target a `watch` is in flight for, and since when. */
  watchingKey: string | undefined;
  watchingSince: number;
  /** Key of the target whose `watch` last failed (or was invalid), and when. */
  failedKey: string | undefined;
  failedAt: number;
}

/**
 * An isolate's view of the per-backend health monitors, so a request never waits on a Durable
 * Object call: `isHealthy` answers synchronously from a view at most `ttlMs` old and starts a
 * background refresh (one per backend at a time) through the caller's {@link Schedule} when it is
 * older.
 *
 * Availability first (fail-open): a backend never seen, not watched, not yet probed, or whose
 * monitor cannot be reached is healthy; a failed refresh forgets the view and is retried after one
 * TTL, not on every request. Health only narrows routing (see `minimumAvailable`).
 *
 * `ensureWatched` calls the monitor's `watch` once per isolate per target (by {@link probeTargetKey}
 * of the resolved target): a config change sends the new target once, an unchanged one costs
 * nothing. If a refresh shows the monitor no longer watching (unwatched, storage lost), the next
 * `ensureWatched` sends it again. Nothing here throws into the caller or returns a rejected
 * promise; failures go to `onError`.
 */
export class HealthCache {
  readonly #client: HealthClient;
  readonly #clock: Clock;
  readonly #refreshTimeoutMs: number;
  readonly #watchRetryMs: number;
  readonly #views: RemoteViewCache<HealthView, Entry, HealthCacheOperation>;

  /** @throws RangeError on a negative or non-finite duration, or a `maxEntries` that is not an integer >= 1. */
  constructor(client: HealthClient, clock: Clock, options: HealthCacheOptions = {}) {
    this.#client = client;
    this.#clock = clock;
    const ttlMs = nonNegative("ttlMs", options.ttlMs ?? 2000);
    this.#refreshTimeoutMs = nonNegative("refreshTimeoutMs", options.refreshTimeoutMs ?? 5000);
    this.#watchRetryMs = nonNegative("watchRetryMs", options.watchRetryMs ?? 30_000);
    this.#views = new RemoteViewCache<HealthView, Entry, HealthCacheOperation>(clock, {
      create: (): Entry => ({
        ...emptyCachedView<HealthView>(),
        watchedKey: undefined,
        watchingKey: undefined,
        watchingSince: Number.NEGATIVE_INFINITY,
        failedKey: undefined,
        failedAt: Number.NEGATIVE_INFINITY,
      }),
      fetch: (backendId) => client.state(backendId),
      ttlMs,
      refreshTimeoutMs: this.#refreshTimeoutMs,
      maxEntries: options.maxEntries,
      onError: options.onError,
      // A monitor that no longer watches (unwatched, storage lost) gets the target again on the next ensureWatched.
      onApplied: (entry, view) => {
        if (!view.watching) entry.watchedKey = undefined;
      },
    });
  }

  /** This cache with one request's {@link Schedule} bound. */
  forRequest(schedule: Schedule): HealthGate {
    return {
      isHealthy: (id) => this.isHealthy(id, schedule),
      status: (id) => this.status(id, schedule),
      ensureWatched: (id, target) => this.ensureWatched(id, target, schedule),
    };
  }

  /** The cached view (undefined when unknown), refreshed in the background when stale. */
  view(backendId: string, schedule: Schedule): HealthView | undefined {
    try {
      return this.#views.read(backendId, schedule).view;
    } catch (err) {
      this.#views.error(err, backendId, "state");
      return undefined;
    }
  }

  /** The whole health views this isolate has cached, by backend id (status pages; starts no I/O). */
  cachedViews(): [string, HealthView][] {
    return this.#views.cachedViews((v) => v);
  }

  /** The statuses this isolate has cached, by backend id, as they are (read by metrics; starts no I/O). */
  cachedStatuses(): [string, HealthStatus][] {
    return this.#views.cachedViews((v) => v.status);
  }

  status(backendId: string, schedule: Schedule): HealthStatus {
    return this.view(backendId, schedule)?.status ?? "unknown";
  }

  isHealthy(backendId: string, schedule: Schedule): boolean {
    return isRoutable(this.view(backendId, schedule)?.status);
  }

  ensureWatched(backendId: string, target: ProbeTarget, schedule: Schedule): void {
    let key: string | undefined;
    let entry: Entry | undefined;
    try {
      entry = this.#views.touch(backendId);
      key = probeTargetKey(resolveProbeTarget(target));
    } catch (err) {
      if (entry !== undefined) {
        const now = this.#clock.now();
        const invalid = `invalid:${safeKey(target)}`;
        if (entry.failedKey === invalid && now - entry.failedAt < this.#watchRetryMs) return;
        entry.failedKey = invalid;
        entry.failedAt = now;
      }
      this.#views.error(err, backendId, "watch");
      return;
    }
    const now = this.#clock.now();
    if (entry.watchedKey === key) return;
    if (entry.watchingKey === key && now - entry.watchingSince < this.#refreshTimeoutMs) return;
    if (entry.failedKey === key && now - entry.failedAt < this.#watchRetryMs) return;
    const e = entry;
    const k = key;
    e.watchingKey = k;
    e.watchingSince = now;
    const seq = this.#views.nextSeq();
    this.#views.run(schedule, backendId, "watch", async () => {
      try {
        const view = await this.#client.watch(backendId, target);
        e.watchedKey = k;
        e.failedKey = undefined;
        this.#views.apply(e, seq, view);
      } catch (err) {
        e.failedKey = k;
        e.failedAt = this.#clock.now();
        throw err;
      } finally {
        if (e.watchingKey === k) e.watchingKey = undefined;
      }
    });
  }

  /** Number of backends cached. */
  get size(): number {
    return this.#views.size;
  }
}

function safeKey(target: unknown): string {
  try {
    return probeTargetKey(target as ProbeTarget);
  } catch {
    return "?";
  }
}

