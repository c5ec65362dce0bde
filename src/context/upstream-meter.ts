import type { Clock } from "../deps/clock.ts";

/**
 * The time a request spent waiting for upstreams (providers, MCP servers, agents): the union of
 * the intervals during which at least one upstream call was outstanding. Overlapping waits (a
 * virtual MCP server's fan-out to several servers) count once, so the figure never exceeds the
 * request's own duration, and the gateway's own time is what is left.
 *
 * A sub-request's meter reports to its parent's too: a Looper step's or a signal's embedding's
 * wait is the parent's upstream time as well.
 */
export class UpstreamMeter {
  readonly #clock: Clock;
  readonly #parent: UpstreamMeter | undefined;
  #open = 0;
  /** When the current run of outstanding waits began (valid while `#open > 0`). */
  #since = 0;
  #closedMs = 0;
  #frozenMs: number | undefined;
  #began = false;

  constructor(clock: Clock, parent?: UpstreamMeter) {
    this.#clock = clock;
    this.#parent = parent;
  }

  /**
   * An upstream call goes out now. The returned function ends its wait (idempotent); a wait still
   * open when the request ends counts up to the end.
   */
  begin(): () => void {
    const endParent = this.#parent?.begin();
    if (this.#frozenMs !== undefined) return endParent ?? (() => {});
    this.#began = true;
    if (this.#open++ === 0) this.#since = this.#clock.now();
    let open = true;
    return () => {
      if (!open) return;
      open = false;
      endParent?.();
      if (this.#frozenMs !== undefined) return;
      if (--this.#open === 0) this.#closedMs += this.#clock.now() - this.#since;
    };
  }

  /** Whether any upstream call was made (a wait begun) before the request ended. */
  get used(): boolean {
    return this.#began;
  }

  /** Milliseconds spent waiting so far, an open wait counted up to `now`; fixed once {@link freeze}d. */
  waitedMs(now: number = this.#clock.now()): number {
    if (this.#frozenMs !== undefined) return this.#frozenMs;
    return this.#closedMs + (this.#open > 0 ? Math.max(0, now - this.#since) : 0);
  }

  /** The request ended at `at`: the figure stops there (waits still open count up to it). */
  freeze(at: number): number {
    this.#frozenMs ??= this.waitedMs(at);
    return this.#frozenMs;
  }
}
