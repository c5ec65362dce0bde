/**
 * What the simulator saw: request counters and a bounded history of recent requests.
 * Tests read these to prove what a gateway forwarded and how many upstream attempts it made.
 */

import type { IncomingHttpHeaders } from "node:http";

/** How an exchange ended. */
export type Outcome =
  /** The full response was delivered. */
  | "completed"
  /** Refused before generation: bad JSON, validation, a missing required header, bad knob, wrong API key, unknown path. */
  | "rejected"
  /** A `status` knob error, `reset-before-headers`, `error-mid-stream` or `heartbeat-only`. */
  | "faulted"
  /** `cut-mid-stream`: the connection was dropped part-way through the body. */
  | "cut"
  /** The client went away before the response was complete. */
  | "aborted";

const OUTCOMES: readonly Outcome[] = ["completed", "rejected", "faulted", "cut", "aborted"];

/** One request as received. */
export interface RecordedRequest {
  /** 1-based arrival order since start or the last reset. */
  readonly seq: number;
  /** Arrival time, Unix milliseconds. */
  readonly at: number;
  readonly method: string;
  /** Path without the query string. */
  readonly path: string;
  readonly query: string;
  /** Header names lowercased, as Node delivers them. */
  readonly headers: IncomingHttpHeaders;
  /** Parsed JSON body, the raw text if it was not JSON, or `null` when there was none. */
  readonly body: unknown;
}

/** Snapshot served by `GET /__sim/stats`. */
export interface StatsSnapshot {
  readonly total: number;
  /** Exchanges whose connection is still open (a gauge: `reset` leaves it alone). */
  readonly inFlight: number;
  readonly paths: Record<string, number>;
  readonly models: Record<string, number>;
  readonly outcomes: Record<Outcome, number>;
}

function bump(map: Map<string, number>, key: string): void {
  map.set(key, (map.get(key) ?? 0) + 1);
}

/** Counters and the request ring of one simulator instance. */
export class Recorder {
  readonly #capacity: number;
  #ring: RecordedRequest[] = [];
  /** Index the next entry goes to once the ring is full. */
  #next = 0;
  #total = 0;
  #paths = new Map<string, number>();
  #models = new Map<string, number>();
  #outcomes = new Map<Outcome, number>();
  #inFlight = 0;

  /** `capacity` bounds the request history (0 disables it). */
  constructor(capacity: number) {
    this.#capacity = capacity;
  }

  /** Counts a request and stores it in the history. */
  request(method: string, path: string, query: string, headers: IncomingHttpHeaders, body: unknown): void {
    this.#total++;
    bump(this.#paths, path);
    if (body !== null && typeof body === "object" && "model" in body && typeof body.model === "string") {
      bump(this.#models, body.model);
    }
    if (this.#capacity === 0) return;
    const entry: RecordedRequest = { seq: this.#total, at: Date.now(), method, path, query, headers, body };
    if (this.#ring.length < this.#capacity) this.#ring.push(entry);
    else {
      this.#ring[this.#next] = entry;
      this.#next = (this.#next + 1) % this.#capacity;
    }
  }

  /** Tracks exchanges with an open connection; `delta` is +1 on start, -1 on close. */
  inFlight(delta: 1 | -1): void {
    this.#inFlight += delta;
  }

  /** Counts how an exchange ended. */
  outcome(outcome: Outcome): void {
    this.#outcomes.set(outcome, (this.#outcomes.get(outcome) ?? 0) + 1);
  }

  /** The last `limit` requests, oldest first. */
  recent(limit: number): RecordedRequest[] {
    const ordered = this.#ring.length < this.#capacity ? this.#ring : [...this.#ring.slice(this.#next), ...this.#ring.slice(0, this.#next)];
    return ordered.slice(Math.max(0, ordered.length - limit));
  }

  /** Current counters. */
  snapshot(): StatsSnapshot {
    const outcomes = {} as Record<Outcome, number>;
    for (const o of OUTCOMES) outcomes[o] = this.#outcomes.get(o) ?? 0;
    return {
      total: this.#total,
      inFlight: this.#inFlight,
      paths: Object.fromEntries(this.#paths),
      models: Object.fromEntries(this.#models),
      outcomes,
    };
  }

  /** Forgets all counters and history. */
  reset(): void {
    this.#ring = [];
    this.#next = 0;
    this.#total = 0;
    this.#paths.clear();
    this.#models.clear();
    this.#outcomes.clear();
  }
}
