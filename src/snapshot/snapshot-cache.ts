import { GatewayError } from "../errors/gateway-error.ts";
import type { Clock } from "../deps/clock.ts";
import { pinSnapshot, type ActiveSnapshot, type PinnedSnapshot } from "./pinned-snapshot.ts";

/** Reports a refresh failure while a stale snapshot keeps serving (for logs/metrics). */
export type RefreshFailureHandler = (err: unknown) => void;

/**
 * An isolate's view of the active BackendSnapshot, with bounded staleness: a cached revision is
 * served for at most `ttlMs` before the controller is asked again (one refresh in flight at a time).
 * If the controller cannot be reached, the last-known revision keeps serving; with none, requests
 * fail with snapshot_unavailable rather than guessing.
 */
export class SnapshotCache {
  readonly #load: () => Promise<ActiveSnapshot>;
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #onRefreshFailure: RefreshFailureHandler;
  #current: PinnedSnapshot | undefined;
  #fetchedAt = Number.NEGATIVE_INFINITY;
  #inflight: Promise<PinnedSnapshot> | undefined;

  constructor(load: () => Promise<ActiveSnapshot>, clock: Clock, ttlMs: number, onRefreshFailure: RefreshFailureHandler = () => {}) {
    this.#load = load;
    this.#clock = clock;
    this.#ttlMs = ttlMs;
    this.#onRefreshFailure = onRefreshFailure;
  }

  /** The snapshot a new request should pin. */
  async current(): Promise<PinnedSnapshot> {
    if (this.#current && this.#clock.now() - this.#fetchedAt < this.#ttlMs) return this.#current;
    return this.#refresh();
  }

  /** Forces the next `current()` to ask the controller (after an activation seen by this isolate). */
  invalidate(): void {
    this.#fetchedAt = Number.NEGATIVE_INFINITY;
  }

  /** The last snapshot this isolate pinned, without refreshing (for status pages). */
  peek(): PinnedSnapshot | undefined {
    return this.#current;
  }

  #refresh(): Promise<PinnedSnapshot> {
    this.#inflight ??= this.#load()
      .then((active) => {
        // Same revision and digest: keep the pinned object, so identity (and selector state) persists.
        if (!this.#current || this.#current.revision !== active.revision || this.#current.digest !== active.digest) {
          this.#current = pinSnapshot(active);
        }
        this.#fetchedAt = this.#clock.now();
        return this.#current;
      })
      .catch((err: unknown) => {
        if (this.#current) {
          this.#onRefreshFailure(err);
          // Back off for one TTL rather than asking a failing controller on every request.
          this.#fetchedAt = this.#clock.now();
          return this.#current;
        }
        throw new GatewayError("snapshot_unavailable", "The gateway has no backend configuration yet. Try again shortly.", {
          cause: err,
          retryAfterSeconds: 1,
        });
      })
      .finally(() => {
        this.#inflight = undefined;
      });
    return this.#inflight;
  }
}
