import type { ErrorCode } from "../errors/gateway-error.ts";
import type { AttemptOutcome, AttemptRecord } from "../invoker/attempt.ts";
import type { Clock } from "../deps/clock.ts";

/** Receives every finished attempt exactly once (access log, metrics, later: ledger settlement). */
export interface AttemptSink {
  attemptFinished(attempt: Readonly<AttemptRecord>): void;
}

/**
 * The terminal path of one attempt: runs exactly once whichever of success, cut, error or client
 * cancel comes first, releases the load lease and hands the record to the sink.
 */
export class AttemptFinalizer {
  readonly attempt: AttemptRecord;
  readonly #release: (latencyMs?: number) => void;
  readonly #sink: AttemptSink;
  readonly #clock: Clock;
  readonly #onFinish: ((attempt: Readonly<AttemptRecord>) => void) | undefined;
  #done = false;

  /** `onFinish` runs once, after the sink, for per-request follow-ups (e.g. a breaker report). */
  constructor(attempt: AttemptRecord, release: (latencyMs?: number) => void, sink: AttemptSink, clock: Clock, onFinish?: (attempt: Readonly<AttemptRecord>) => void) {
    this.attempt = attempt;
    this.#release = release;
    this.#sink = sink;
    this.#clock = clock;
    this.#onFinish = onFinish;
  }

  get finished(): boolean {
    return this.#done;
  }

  /** Ends the attempt; later calls are ignored. */
  finish(outcome: AttemptOutcome, errorCode?: ErrorCode): void {
    if (this.#done) return;
    this.#done = true;
    const a = this.attempt;
    a.endedAt = this.#clock.now();
    a.outcome = outcome;
    if (errorCode !== undefined) a.errorCode = errorCode;
    // Latency that steers p2c: time to response headers, so long streams do not look slow.
    const ok = outcome === "success" || outcome === "client_cancelled";
    this.#release(ok && a.headersAt !== undefined ? a.headersAt - a.startedAt : undefined);
    this.#sink.attemptFinished(a);
    this.#onFinish?.(a);
  }
}
