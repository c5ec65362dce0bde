import type { Clock } from "../deps/clock.ts";

/** What a drain did: how many requests were in flight, finished in time, or were cancelled. */
export interface DrainReport {
  readonly inFlightAtStart: number;
  readonly finished: number;
  readonly cancelled: number;
  readonly durationMs: number;
}

/** One tracked request. `done` must be called once (later calls are no-ops). */
export interface DrainTicket {
  /**
   * True once a drain ran out of time while this request was in flight: the request cancels
   * itself the next time it wakes (see the request runtime's checkpoints).
   */
  readonly cancelled: boolean;
  done(): void;
}

type Wait = (ms: number) => Promise<void>;

interface Ticket extends DrainTicket {
  cancelled: boolean;
}

/**
 * The isolate's serving state for a graceful drain: while draining, no new request is admitted;
 * requests in flight get a time budget to finish, then the rest are marked cancelled.
 *
 * The drain cannot abort another request's work itself: workerd forbids touching one request's
 * I/O (its fetch's abort signal included) from another request's handler. (A promise the drain
 * resolved would wake a waiting request in that request's own context, but a request waits on it
 * only where it awaits it.) So the mark is read by each request where it already wakes (a stream
 * chunk, a stream timer, an attempt boundary, provider headers) and the request aborts itself; no
 * request runs a timer of its own for it.
 */
export class DrainController {
  readonly #clock: Clock;
  readonly #wait: Wait;
  readonly #inFlight = new Set<Ticket>();
  /** One resolver per drain waiting for the isolate to go idle. */
  readonly #idle = new Set<() => void>();
  #draining = false;

  constructor(clock: Clock, wait: Wait = (ms) => new Promise((r) => setTimeout(r, ms))) {
    this.#clock = clock;
    this.#wait = wait;
  }

  get draining(): boolean {
    return this.#draining;
  }

  get inFlight(): number {
    return this.#inFlight.size;
  }

  /** Registers a request, or returns undefined while draining (the caller refuses it). */
  track(): DrainTicket | undefined {
    if (this.#draining) return undefined;
    const inFlight = this.#inFlight;
    const idle = this.#idle;
    const ticket: Ticket = {
      cancelled: false,
      done() {
        if (!inFlight.delete(ticket)) return;
        if (inFlight.size === 0) for (const resolve of [...idle]) resolve();
      },
    };
    inFlight.add(ticket);
    return ticket;
  }

  /**
   * Stops admission, waits up to `budgetMs` for requests in flight, then marks the rest
   * cancelled. Concurrent drains each wait on the same in-flight set with their own budget, and
   * each gets its own report.
   */
  async drain(budgetMs: number): Promise<DrainReport> {
    const started = this.#clock.now();
    this.#draining = true;
    const atStart = this.#inFlight.size;
    if (atStart > 0) {
      let resolveIdle!: () => void;
      const idle = new Promise<void>((resolve) => (resolveIdle = resolve));
      this.#idle.add(resolveIdle);
      try {
        await Promise.race([idle, this.#wait(budgetMs)]);
      } finally {
        this.#idle.delete(resolveIdle);
      }
    }
    const left = [...this.#inFlight];
    for (const t of left) t.cancelled = true;
    return { inFlightAtStart: atStart, finished: Math.max(0, atStart - left.length), cancelled: left.length, durationMs: this.#clock.now() - started };
  }

  /** Admits requests again (an operator undoing a drain); requests already marked stay cancelled. */
  resume(): void {
    this.#draining = false;
  }
}
