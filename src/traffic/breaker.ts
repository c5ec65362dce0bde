/**
 * Per-backend circuit breaker: a pure state machine with no I/O and no clock of its own (every call
 * takes `now`), so every transition is testable with a fake clock. The CircuitBreaker Durable
 * Object is a thin shell that loads this state from SQLite, applies one call and saves it, all in
 * one synchronous transaction.
 *
 * ## What counts as a failure
 *
 * The caller decides; the breaker only counts what it is told. The policy is: only outcomes that
 * say something about the backend's health are reported, and of those only backend faults are
 * `"failure"` (connect failures, network errors, timeouts, 5xx / overload answers, streams the
 * backend cut). Gateway policy rejections (auth, budget, rate limit, validation) and client errors
 * (4xx caused by the request, client cancellations) never count: they are either not reported at
 * all or reported as `"neutral"`, which only releases a probe permit. Otherwise one client sending
 * bad requests could open the breaker for everyone.
 */

/** What an attempt says about the backend's health. */
export type BreakerOutcome = "success" | "failure";

/**
 * What a caller reports: a health outcome, or `"neutral"` for an attempt that ended without saying
 * anything about the backend (client cancelled, rejected by policy before it was sent). A neutral
 * report only releases the probe permit it carries; it is never counted as a sample.
 */
export type BreakerReport = BreakerOutcome | "neutral";

export type BreakerState = "closed" | "open" | "half_open";

export interface BreakerConfig {
  /** Length of the rolling window, in ms. A sample counts for at most this long. */
  readonly windowMs: number;
  /**
   * Number of time buckets the window is split into. A sample is forgotten between
   * `windowMs - windowMs / buckets` and `windowMs` after it was recorded.
   */
  readonly buckets: number;
  /** The breaker never opens on fewer samples than this in the window. */
  readonly minSamples: number;
  /** Opens when failures / samples in the window reaches this ratio, in (0, 1]. */
  readonly failureRatio: number;
  /** How long an open breaker refuses all traffic before it lets probes through, in ms. */
  readonly openMs: number;
  /** Maximum number of probe permits outstanding at once while half-open. */
  readonly halfOpenProbes: number;
  /** Probe successes needed (in one half-open period) to close again. */
  readonly halfOpenSuccesses: number;
  /**
   * A probe permit not released by an outcome within this many ms expires, so a probe whose
   * report was lost (isolate evicted, RPC failed) cannot wedge the breaker half-open with no
   * permits left. Should exceed the time a probe takes to show success (e.g. time to headers).
   */
  readonly permitTtlMs: number;
}

export const DEFAULT_BREAKER_CONFIG: BreakerConfig = Object.freeze({
  windowMs: 60_000,
  buckets: 12,
  minSamples: 10,
  failureRatio: 0.5,
  openMs: 30_000,
  halfOpenProbes: 1,
  halfOpenSuccesses: 2,
  permitTtlMs: 60_000,
});

/** A config as callers pass it: any field left out takes its default. */
export type BreakerConfigInput = Partial<BreakerConfig>;

/**
 * Defaults plus overrides, validated.
 *
 * @throws RangeError when a field is out of range (each is named in the message).
 */
export function resolveBreakerConfig(input: BreakerConfigInput = {}): BreakerConfig {
  const c: BreakerConfig = { ...DEFAULT_BREAKER_CONFIG, ...stripUndefined(input) };
  const bad: string[] = [];
  const positive = (k: keyof BreakerConfig) => {
    if (!(Number.isFinite(c[k]) && c[k] > 0)) bad.push(`${k} must be a finite number > 0, got ${c[k]}`);
  };
  const integer = (k: keyof BreakerConfig, min: number) => {
    if (!(Number.isInteger(c[k]) && c[k] >= min)) bad.push(`${k} must be an integer >= ${min}, got ${c[k]}`);
  };
  positive("windowMs");
  integer("buckets", 1);
  integer("minSamples", 1);
  if (!(c.failureRatio > 0 && c.failureRatio <= 1)) bad.push(`failureRatio must be in (0, 1], got ${c.failureRatio}`);
  if (!(Number.isFinite(c.openMs) && c.openMs >= 0)) bad.push(`openMs must be a finite number >= 0, got ${c.openMs}`);
  integer("halfOpenProbes", 1);
  integer("halfOpenSuccesses", 1);
  positive("permitTtlMs");
  if (bad.length > 0) throw new RangeError(`invalid breaker config: ${bad.join("; ")}`);
  return Object.freeze(c);
}

function stripUndefined(o: BreakerConfigInput): BreakerConfigInput {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
}

/** Answer to {@link BreakerMachine.acquire}. */
export interface BreakerAdmission {
  /** Whether the attempt may be sent to the backend. */
  readonly allowed: boolean;
  /** True when the attempt is a half-open probe: its outcome must be reported with `permitId`. */
  readonly probe: boolean;
  /** Present exactly when `probe` is true. */
  readonly permitId?: string;
}

/** A serializable view of one breaker, for caches, status pages and logs. */
export interface BreakerSnapshot {
  readonly state: BreakerState;
  /** Failures in the rolling window (always 0 while open or half-open: the window restarts on close). */
  readonly failures: number;
  /** Samples (successes + failures) in the rolling window. */
  readonly samples: number;
  /** When an open breaker starts admitting probes (ms); undefined unless open. */
  readonly openUntil: number | undefined;
  /** Probe successes so far in this half-open period. */
  readonly probeSuccesses: number;
  /** Probe permits currently outstanding (not yet released or expired). */
  readonly permitsOutstanding: number;
  /** `halfOpenProbes` of the config in force, so a reader can tell whether a permit is free. */
  readonly halfOpenProbes: number;
  /** When the state last changed (ms); 0 for a breaker that was never anything but closed. */
  readonly changedAt: number;
  /** How many times the breaker has opened (closed → open and half-open → open). */
  readonly opens: number;
}

interface Bucket {
  /** Start of the bucket's time slot, in ms. */
  start: number;
  successes: number;
  failures: number;
}

interface Permit {
  id: string;
  expiresAt: number;
}

/** The breaker's whole persisted state: plain JSON. */
export interface BreakerData {
  state: BreakerState;
  buckets: Bucket[];
  openUntil: number | undefined;
  probeSuccesses: number;
  permits: Permit[];
  /** Next permit sequence number; never reused, so a stale permit id can never match a new permit. */
  nextPermit: number;
  changedAt: number;
  opens: number;
}

function initialData(): BreakerData {
  return { state: "closed", buckets: [], openUntil: undefined, probeSuccesses: 0, permits: [], nextPermit: 1, changedAt: 0, opens: 0 };
}

const isNum = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);

/** Parses stored state; anything malformed restarts closed rather than wedging the breaker. */
export function parseBreakerData(json: string | undefined): BreakerData {
  if (json === undefined) return initialData();
  try {
    const d = JSON.parse(json) as Partial<BreakerData>;
    const ok =
      (d.state === "closed" || d.state === "open" || d.state === "half_open") &&
      Array.isArray(d.buckets) &&
      d.buckets.every((b) => isNum(b?.start) && isNum(b?.successes) && isNum(b?.failures)) &&
      Array.isArray(d.permits) &&
      d.permits.every((p) => typeof p?.id === "string" && isNum(p?.expiresAt)) &&
      (d.openUntil === undefined || d.openUntil === null || isNum(d.openUntil)) &&
      isNum(d.probeSuccesses) &&
      isNum(d.nextPermit) &&
      isNum(d.changedAt) &&
      isNum(d.opens);
    if (!ok) return initialData();
    return { ...(d as BreakerData), openUntil: d.openUntil ?? undefined };
  } catch {
    return initialData();
  }
}

/**
 * The state machine. States:
 * - `closed`: every attempt is allowed; outcomes fill a time-bucketed rolling window. When the
 *   window holds at least `minSamples` samples and failures / samples >= `failureRatio`, it opens.
 * - `open`: nothing is allowed until `openUntil` (`openMs` after opening); outcomes are ignored
 *   (they belong to attempts sent before it opened). The first call at or after `openUntil` moves
 *   it to half-open.
 * - `half_open`: only probes are allowed, at most `halfOpenProbes` permits outstanding at once.
 *   `halfOpenSuccesses` probe successes close it (with an empty window); one probe failure opens it
 *   again for another `openMs`. Outcomes without a live permit are ignored here: the attempts that
 *   carry them were not admitted as probes (stale caches, attempts sent before it opened).
 *
 * All methods are synchronous, so a caller that runs one of them inside a single storage
 * transaction (no `await` between load and save) hands out permits atomically.
 */
export class BreakerMachine {
  readonly #config: BreakerConfig;
  readonly #d: BreakerData;

  /** @param data - State to continue from (from {@link data}); a fresh closed breaker if omitted. */
  constructor(config: BreakerConfig, data: BreakerData = initialData()) {
    this.#config = config;
    this.#d = structuredClone(data);
  }

  /** The state to persist (a copy). */
  data(): BreakerData {
    return structuredClone(this.#d);
  }

  /**
   * Asks to send one attempt. Closed: allowed. Open: refused. Half-open: a probe permit if fewer
   * than `halfOpenProbes` are outstanding, else refused.
   */
  acquire(now: number): BreakerAdmission {
    this.#advance(now);
    const d = this.#d;
    if (d.state === "closed") return { allowed: true, probe: false };
    if (d.state === "open" || d.permits.length >= this.#config.halfOpenProbes) return { allowed: false, probe: false };
    const id = `probe-${d.nextPermit++}`;
    d.permits.push({ id, expiresAt: now + this.#config.permitTtlMs });
    return { allowed: true, probe: true, permitId: id };
  }

  /**
   * Records one attempt's outcome (see the module comment for what counts as a failure).
   *
   * @param permitId - The permit the attempt was admitted with, if it was a probe. A permit that is
   *   no longer live (expired, or from an earlier half-open period) is treated as no permit.
   * @returns Whether the report changed the breaker's counts or state.
   */
  record(outcome: BreakerReport, now: number, permitId?: string): boolean {
    this.#advance(now);
    const d = this.#d;
    const permit = permitId === undefined ? -1 : d.permits.findIndex((p) => p.id === permitId);
    if (permit >= 0) {
      d.permits.splice(permit, 1);
      if (outcome === "failure") this.#open(now);
      else if (outcome === "success" && ++d.probeSuccesses >= this.#config.halfOpenSuccesses) this.#close(now);
      return true;
    }
    if (d.state !== "closed" || outcome === "neutral") return false;
    this.#add(now, outcome === "success" ? 1 : 0, outcome === "failure" ? 1 : 0);
    return true;
  }

  /**
   * Records several non-probe outcomes at once (an isolate's batched reports). The trip condition
   * is evaluated once, after all of them, since their order within a batch is unknown anyway.
   */
  recordMany(successes: number, failures: number, now: number): boolean {
    this.#advance(now);
    const s = Math.max(0, Math.floor(successes) || 0);
    const f = Math.max(0, Math.floor(failures) || 0);
    if (this.#d.state !== "closed" || s + f === 0) return false;
    this.#add(now, s, f);
    return true;
  }

  /**
   * A serializable view at `now`. Like every call it first applies the time-driven transitions, so
   * a caller that does not persist afterwards still reads the same answer it would after saving.
   */
  snapshot(now: number): BreakerSnapshot {
    this.#advance(now);
    const d = this.#d;
    const { successes, failures } = this.#totals();
    return {
      state: d.state,
      failures,
      samples: successes + failures,
      openUntil: d.state === "open" ? d.openUntil : undefined,
      probeSuccesses: d.probeSuccesses,
      permitsOutstanding: d.permits.length,
      halfOpenProbes: this.#config.halfOpenProbes,
      changedAt: d.changedAt,
      opens: d.opens,
    };
  }

  get state(): BreakerState {
    return this.#d.state;
  }

  /** Time-driven transitions: window roll-off, open → half-open, permit expiry. */
  #advance(now: number): void {
    const d = this.#d;
    const horizon = now - this.#config.windowMs;
    if (d.buckets.length > 0 && d.buckets[0]!.start <= horizon) d.buckets = d.buckets.filter((b) => b.start > horizon);
    // The transition happened at openUntil, whenever it is first observed.
    if (d.state === "open" && d.openUntil !== undefined && now >= d.openUntil) this.#transition("half_open", d.openUntil);
    if (d.permits.length > 0) d.permits = d.permits.filter((p) => p.expiresAt > now);
  }

  #add(now: number, successes: number, failures: number): void {
    const d = this.#d;
    const width = this.#config.windowMs / this.#config.buckets;
    const start = Math.floor(now / width) * width;
    const last = d.buckets.at(-1);
    // A clock stepping backwards (or a narrower bucket width after a config change) lands in the
    // newest bucket rather than creating an older one out of order.
    if (last && last.start >= start) {
      last.successes += successes;
      last.failures += failures;
    } else {
      d.buckets.push({ start, successes, failures });
    }
    if (failures === 0) return;
    const t = this.#totals();
    const samples = t.successes + t.failures;
    if (samples >= this.#config.minSamples && t.failures / samples >= this.#config.failureRatio) this.#open(now);
  }

  #totals(): { successes: number; failures: number } {
    let successes = 0;
    let failures = 0;
    for (const b of this.#d.buckets) {
      successes += b.successes;
      failures += b.failures;
    }
    return { successes, failures };
  }

  #open(now: number): void {
    this.#transition("open", now);
    this.#d.openUntil = now + this.#config.openMs;
    this.#d.opens++;
  }

  #close(now: number): void {
    this.#transition("closed", now);
  }

  /** Every transition starts with an empty window and no probes; only `openUntil` is set by #open. */
  #transition(state: BreakerState, now: number): void {
    const d = this.#d;
    d.state = state;
    d.changedAt = now;
    d.buckets = [];
    d.permits = [];
    d.probeSuccesses = 0;
    d.openUntil = undefined;
  }
}
