import type { AttemptOutcome, AttemptRecord } from "../context/attempt-record.ts";
import type { RequestRecord } from "../context/request-record.ts";
import type { Clock } from "../deps/clock.ts";
import { errorSourceOf } from "../errors/gateway-error.ts";
import type { FinishedRequestReader } from "./request-assembly.ts";

/** Who a failure blames: the caller (refused, over a limit), the provider, or the gateway itself. */
export type ErrorClass = "client" | "upstream" | "gateway";

/** Length of one slot of the window: the resolution of the requests-per-minute series. */
export const TRAFFIC_SLOT_MS = 60_000;
/** Slots kept: the longest window the isolate can report. */
export const TRAFFIC_SLOTS = 15;
/** Distinct names one slot tracks per kind (entrypoints, routes, backends); the rest count as `other`. */
const MAX_NAMES_PER_SLOT = 256;

/**
 * Latency is kept as counts in log-spaced buckets, four per doubling from 1 ms: a quantile read
 * from them is within 10% of the exact one, at a fixed cost per sample whatever the rate.
 */
const BUCKETS_PER_DOUBLING = 4;
const MAX_BUCKET = BUCKETS_PER_DOUBLING * 24; // ~4.6 hours: anything longer lands in the last bucket

function bucketOf(ms: number): number {
  if (!(ms > 1)) return 0;
  return Math.min(MAX_BUCKET, Math.ceil(Math.log2(ms) * BUCKETS_PER_DOUBLING));
}

/** The geometric middle of a bucket: the value a quantile falling in it reports. */
function valueOf(bucket: number): number {
  if (bucket === 0) return 1;
  return 2 ** ((bucket - 0.5) / BUCKETS_PER_DOUBLING);
}

/** Counts per latency bucket (sparse: only buckets that saw a sample). */
type Sketch = Map<number, number>;

function addTo(s: Sketch, ms: number): void {
  const b = bucketOf(ms);
  s.set(b, (s.get(b) ?? 0) + 1);
}

/** The `q` quantile (0..1) of the merged sketches, in ms, rounded to a tenth; undefined without samples. */
function quantile(sketches: readonly Sketch[], q: number): number | undefined {
  const merged = new Map<number, number>();
  let n = 0;
  for (const s of sketches) {
    for (const [b, c] of s) {
      merged.set(b, (merged.get(b) ?? 0) + c);
      n += c;
    }
  }
  if (n === 0) return undefined;
  const rank = Math.max(1, Math.ceil(q * n));
  let seen = 0;
  for (const b of [...merged.keys()].sort((x, y) => x - y)) {
    seen += merged.get(b)!;
    if (seen >= rank) return Math.round(valueOf(b) * 10) / 10;
  }
  return undefined;
}

interface Cell {
  requests: number;
  success: number;
  cancelled: number;
  errors: Record<ErrorClass, number>;
  latency: Sketch;
  ttft: Sketch;
}

interface Slot {
  /** Start of the slot's minute. */
  readonly at: number;
  readonly entrypoints: Map<string, Cell>;
  /** Keyed `entrypoint\u0000route`. */
  readonly routes: Map<string, Cell>;
  readonly backends: Map<string, Cell>;
}

const newCell = (): Cell => ({ requests: 0, success: 0, cancelled: 0, errors: { client: 0, upstream: 0, gateway: 0 }, latency: new Map(), ttft: new Map() });

function cellOf(map: Map<string, Cell>, name: string): Cell {
  let c = map.get(name);
  if (c === undefined) {
    // Names come from the publication and the snapshot, which an operator may change at will: bound them anyway.
    const key = map.size >= MAX_NAMES_PER_SLOT ? "other" : name;
    c = map.get(key);
    if (c === undefined) map.set(key, (c = newCell()));
  }
  return c;
}

const classOf = (code: Parameters<typeof errorSourceOf>[0] | undefined): ErrorClass => {
  if (code === undefined) return "gateway";
  const s = errorSourceOf(code);
  return s === "internal" ? "gateway" : s;
};

/** An attempt that failed at the provider without a gateway error code: the provider's fault. */
const FAILED_AT_PROVIDER: ReadonlySet<AttemptOutcome> = new Set(["upstream_status", "connect_failed", "network_error", "timeout", "stream_cut", "protocol_error"]);

/** Figures of one entrypoint, route or backend over the window. */
export interface TrafficFigures {
  /** Requests (for a backend: attempts sent to it). */
  readonly requests: number;
  readonly success: number;
  /** Ended by the client leaving. */
  readonly cancelled: number;
  readonly errors: Readonly<Record<ErrorClass, number>>;
  /** Errors of any class over requests, 0..1 (0 without requests). */
  readonly errorRate: number;
  /** Receipt to last byte (a backend: the attempt's start to its end), successful or not; ms. */
  readonly latencyMs: { readonly p50: number | undefined; readonly p99: number | undefined };
  /** To the first content the model produced, successful requests only; ms. */
  readonly ttftMs: { readonly p50: number | undefined; readonly p99: number | undefined };
}

/** What {@link RecentTraffic.summary} answers: this isolate's recent traffic. */
export interface TrafficSummary {
  readonly from: number;
  readonly to: number;
  readonly slotMs: number;
  /** Per slot (oldest first, empty slots included): requests, errors and cancellations of every entrypoint. */
  readonly perMinute: readonly { readonly at: number; readonly requests: number; readonly errors: number; readonly cancelled: number }[];
  readonly entrypoints: readonly ({ readonly name: string } & TrafficFigures)[];
  readonly routes: readonly ({ readonly entrypoint: string; readonly route: string } & TrafficFigures)[];
  readonly backends: readonly ({ readonly name: string } & TrafficFigures)[];
}

function figures(cells: readonly Cell[]): TrafficFigures {
  const errors = { client: 0, upstream: 0, gateway: 0 };
  let requests = 0;
  let success = 0;
  let cancelled = 0;
  for (const c of cells) {
    requests += c.requests;
    success += c.success;
    cancelled += c.cancelled;
    errors.client += c.errors.client;
    errors.upstream += c.errors.upstream;
    errors.gateway += c.errors.gateway;
  }
  const failed = errors.client + errors.upstream + errors.gateway;
  const lat = cells.map((c) => c.latency);
  const ttft = cells.map((c) => c.ttft);
  return {
    requests,
    success,
    cancelled,
    errors,
    errorRate: requests === 0 ? 0 : failed / requests,
    latencyMs: { p50: quantile(lat, 0.5), p99: quantile(lat, 0.99) },
    ttftMs: { p50: quantile(ttft, 0.5), p99: quantile(ttft, 0.99) },
  };
}

function grouped(slots: readonly Slot[], pick: (s: Slot) => Map<string, Cell>): Map<string, Cell[]> {
  const out = new Map<string, Cell[]>();
  for (const s of slots) {
    for (const [name, cell] of pick(s)) {
      const list = out.get(name);
      if (list) list.push(cell);
      else out.set(name, [cell]);
    }
  }
  return out;
}

const byRequests = <T extends { readonly requests: number }>(a: T, b: T) => b.requests - a.requests;

/**
 * This isolate's recent traffic, per entrypoint, per entrypoint's route and per backend: counts
 * by outcome and error class, and latency and time-to-first-token quantiles, in one-minute slots
 * over the last {@link TRAFFIC_SLOTS} minutes. What the console's overview shows; isolate-local
 * like the load tracker (another isolate's traffic is in its own window, and in the metrics).
 * Bounded: a fixed number of slots, of names per slot, and of buckets per sketch.
 */
export class RecentTraffic implements FinishedRequestReader {
  readonly #clock: Clock;
  readonly #slots: Slot[] = [];

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  finished(r: Readonly<RequestRecord>, attempts: readonly Readonly<AttemptRecord>[]): void {
    // An explain is decided, never dispatched: not traffic.
    if (r.explain === true) return;
    const slot = this.#slotAt(this.#clock.now());
    // Sub-calls (a Looper step, a signal's embedding) are their parent's doing: they count at the backends only.
    if (r.parentRequestId === undefined) {
      const name = r.entrypoint ?? "unrouted";
      const last = attempts.findLast((a) => a.outcome === "success");
      const ttft = r.outcome === "success" && last?.firstContentAt !== undefined ? last.firstContentAt - r.receivedAt : undefined;
      const cells = [cellOf(slot.entrypoints, name), ...(r.route !== undefined ? [cellOf(slot.routes, `${name}\u0000${r.route}`)] : [])];
      for (const c of cells) {
        c.requests++;
        if (r.outcome === "success") c.success++;
        else if (r.outcome === "cancelled") c.cancelled++;
        else c.errors[classOf(r.errorCode)]++;
        if (r.endedAt !== undefined) addTo(c.latency, r.endedAt - r.receivedAt);
        if (ttft !== undefined) addTo(c.ttft, ttft);
      }
    }
    for (const a of attempts) {
      if (a.outcome === "not_sent") continue;
      const c = cellOf(slot.backends, a.backendName);
      c.requests++;
      if (a.outcome === "success") c.success++;
      else if (a.outcome === "client_cancelled") c.cancelled++;
      else c.errors[a.errorCode !== undefined ? classOf(a.errorCode) : FAILED_AT_PROVIDER.has(a.outcome) ? "upstream" : "gateway"]++;
      if (a.endedAt !== undefined && a.outcome !== "client_cancelled") addTo(c.latency, a.endedAt - a.startedAt);
      if (a.outcome === "success" && a.firstContentAt !== undefined) addTo(c.ttft, a.firstContentAt - a.startedAt);
    }
  }

  /** The last `minutes` minutes (1..{@link TRAFFIC_SLOTS}, the current partial one included). */
  summary(minutes = TRAFFIC_SLOTS): TrafficSummary {
    const n = Math.max(1, Math.min(TRAFFIC_SLOTS, Math.floor(minutes)));
    const now = this.#clock.now();
    const current = now - (now % TRAFFIC_SLOT_MS);
    const from = current - (n - 1) * TRAFFIC_SLOT_MS;
    const slots = this.#slots.filter((s) => s.at >= from);
    const perMinute = [];
    for (let at = from; at <= current; at += TRAFFIC_SLOT_MS) {
      const s = slots.find((x) => x.at === at);
      let requests = 0;
      let errors = 0;
      let cancelled = 0;
      for (const c of s?.entrypoints.values() ?? []) {
        requests += c.requests;
        cancelled += c.cancelled;
        errors += c.errors.client + c.errors.upstream + c.errors.gateway;
      }
      perMinute.push({ at, requests, errors, cancelled });
    }
    return {
      from,
      to: now,
      slotMs: TRAFFIC_SLOT_MS,
      perMinute,
      entrypoints: [...grouped(slots, (s) => s.entrypoints)].map(([name, cells]) => ({ name, ...figures(cells) })).sort(byRequests),
      routes: [...grouped(slots, (s) => s.routes)]
        .map(([k, cells]) => {
          const cut = k.indexOf("\u0000");
          return cut < 0 ? { entrypoint: "other", route: "other", ...figures(cells) } : { entrypoint: k.slice(0, cut), route: k.slice(cut + 1), ...figures(cells) };
        })
        .sort(byRequests),
      backends: [...grouped(slots, (s) => s.backends)].map(([name, cells]) => ({ name, ...figures(cells) })).sort(byRequests),
    };
  }

  #slotAt(now: number): Slot {
    const at = now - (now % TRAFFIC_SLOT_MS);
    const last = this.#slots.at(-1);
    if (last !== undefined && last.at === at) return last;
    // A clock that stepped back lands in the newest slot rather than reordering the window.
    if (last !== undefined && last.at > at) return last;
    const slot: Slot = { at, entrypoints: new Map(), routes: new Map(), backends: new Map() };
    this.#slots.push(slot);
    while (this.#slots.length > 0 && this.#slots[0]!.at <= at - TRAFFIC_SLOTS * TRAFFIC_SLOT_MS) this.#slots.shift();
    return slot;
  }
}
