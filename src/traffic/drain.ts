import type { Clock } from "../deps/clock.ts";

/** What a drain did: how many requests were in flight, finished in time, or were cancelled. */
export interface DrainReport {
  readonly inFlightAtStart: number;
  readonly finished: number;
  readonly cancelled: number;
  readonly durationMs: number;
}

/** One tracked request: its signal aborts when a drain cancels it; `done` must be called once. */
export interface DrainTicket {
  readonly signal: AbortSignal;
  done(): void;
}

type Wait = (ms: number) => Promise<void>;
/** Runs `fn` every `ms` until the returned function is called. */
type Every = (ms: number, fn: () => void) => () => void;

/** How often a request checks whether a drain has cancelled it. */
const WATCH_MS = 100;

/**
 * The isolate's serving state for a graceful drain: while draining, no new request is admitted;
 * requests in flight get a time budget to finish, then the rest are cancelled (their upstream
 * calls aborted). Pure apart from the injected clock and timers.
 *
 * The drain cannot abort another request's work itself: workerd forbids touching one request's
 * I/O (its fetch's abort signal included) from another request's handler. So each request
 * watches, on a timer of its own, for the drain's cancel flag and aborts itself.
 */
export class DrainController {
  readonly #clock: Clock;
  readonly #wait: Wait;
  readonly #every: Every;
  readonly #inFlight = new Set<AbortController>();
  #draining = false;
  #cancelling = false;
  #idle: (() => void) | undefined;

  constructor(
    clock: Clock,
    wait: Wait = (ms) => new Promise((r) => setTimeout(r, ms)),
    every: Every = (ms, fn) => {
      const t = setInterval(fn, ms);
      return () => clearInterval(t);
    },
  ) {
    this.#clock = clock;
    this.#wait = wait;
    this.#every = every;
  }

  get draining(): boolean {
    return this.#draining;
  }

  get inFlight(): number {
    return this.#inFlight.size;
  }

  /**
   * Registers a request, or returns undefined while draining (the caller refuses it). Must be
   * called from the request's own handler: its watcher timer belongs to that request.
   */
  track(): DrainTicket | undefined {
    if (this.#draining) return undefined;
    const ac = new AbortController();
    this.#inFlight.add(ac);
    const stopWatching = this.#every(WATCH_MS, () => {
      if (this.#cancelling && !ac.signal.aborted) ac.abort(new Error("drained"));
    });
    let done = false;
    return {
      signal: ac.signal,
      done: () => {
        if (done) return;
        done = true;
        stopWatching();
        this.#inFlight.delete(ac);
        if (this.#inFlight.size === 0) this.#idle?.();
      },
    };
  }

  /**
   * Stops admission, waits up to `budgetMs` for requests in flight, then cancels the rest.
   * Idempotent while draining: a second call waits on the same in-flight set.
   */
  async drain(budgetMs: number): Promise<DrainReport> {
    const started = this.#clock.now();
    this.#draining = true;
    const atStart = this.#inFlight.size;
    if (atStart > 0) {
      const idle = new Promise<void>((resolve) => {
        this.#idle = resolve;
      });
      await Promise.race([idle, this.#wait(budgetMs)]);
      this.#idle = undefined;
    }
    const left = this.#inFlight.size;
    // Each remaining request aborts itself on its next watcher tick.
    if (left > 0) this.#cancelling = true;
    return { inFlightAtStart: atStart, finished: atStart - left, cancelled: left, durationMs: this.#clock.now() - started };
  }

  /** Admits requests again (an operator undoing a drain). */
  resume(): void {
    this.#draining = false;
    this.#cancelling = false;
  }
}
