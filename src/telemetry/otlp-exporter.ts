import type { AttemptRecord } from "../context/attempt-record.ts";
import type { RequestRecord } from "../context/request-record.ts";
import type { Clock } from "../deps/clock.ts";
import type { Scheduler } from "../deps/scheduler.ts";
import type { MetricRegistry } from "./metric-registry.ts";
import { metricsExport, traceExport, type OtlpResource } from "./otlp.ts";
import type { FinishedRequestReader } from "./request-assembly.ts";
import { requestSpans, type SpanData } from "./spans.ts";

/** Where and how often to export. */
export interface OtlpExporterOptions {
  /** The collector's OTLP/HTTP base URL; `/v1/traces` and `/v1/metrics` are appended. */
  readonly endpoint: string;
  /** Extra request headers (a collector's API key, from a secret). */
  readonly headers: Readonly<Record<string, string>>;
  readonly traces: boolean;
  /** Metrics are pushed where isolates cannot be scraped (the edge). */
  readonly metrics: boolean;
  /** Spans waiting for export, at most; past it new spans are dropped (and counted). */
  readonly maxQueueSpans: number;
  /** Spans per export request. */
  readonly batchSpans: number;
  /** Longest a span waits before a flush is due. */
  readonly flushIntervalMs: number;
  /** How often the metrics are pushed. */
  readonly metricsIntervalMs: number;
  /** Longest one export request may take. */
  readonly timeoutMs: number;
}

/**
 * How long a request's `waitUntil` may be held open for a later flush. The edge gives `waitUntil`
 * work 30 seconds after the response; a longer flush interval is cut to this for the wait.
 */
const MAX_FLUSH_WAIT_MS = 25_000;

/**
 * Batches the spans of finished requests and pushes them, and the metrics, to an OTLP/HTTP
 * collector. It never blocks a request: spans are queued (bounded; overflow is dropped and
 * counted), and a flush runs when one is due, started by a finishing request and kept alive by
 * that request's `waitUntil` — the only way I/O outlives a request on workerd, so there is no
 * background timer. So that a gateway that goes quiet still exports, the request that queues the
 * first span of a batch also waits (under its `waitUntil`) for the flush interval and flushes then,
 * and the telemetry clock (a Durable Object alarm) calls {@link tick} once per metrics interval.
 * At most one export of each kind is in flight; a failed one is dropped and counted, never
 * retried into a growing queue.
 */
export class OtlpExporter implements FinishedRequestReader {
  readonly #o: OtlpExporterOptions;
  readonly #resource: OtlpResource;
  readonly #clock: Clock;
  readonly #scheduler: Scheduler;
  readonly #fetch: typeof fetch;
  readonly #registry: MetricRegistry;
  readonly #startedAt: number;
  readonly #onDrop: (signal: "spans" | "metrics", n: number) => void;
  readonly #onError: (event: Readonly<Record<string, unknown>>) => void;
  #queue: SpanData[] = [];
  #oldestAt = Number.POSITIVE_INFINITY;
  #sendingSpans = false;
  #sendingMetrics = false;
  #metricsDueAt: number;
  /** A request is holding its `waitUntil` open for the next due flush. */
  #flushWaiting = false;

  constructor(
    o: OtlpExporterOptions,
    deps: {
      readonly resource: OtlpResource;
      readonly clock: Clock;
      readonly scheduler: Scheduler;
      readonly fetch: typeof fetch;
      readonly registry: MetricRegistry;
      readonly onDrop: (signal: "spans" | "metrics", n: number) => void;
      readonly onError: (event: Readonly<Record<string, unknown>>) => void;
    },
  ) {
    this.#o = o;
    this.#resource = deps.resource;
    this.#clock = deps.clock;
    this.#scheduler = deps.scheduler;
    this.#fetch = deps.fetch;
    this.#registry = deps.registry;
    this.#onDrop = deps.onDrop;
    this.#onError = deps.onError;
    this.#startedAt = deps.clock.now();
    this.#metricsDueAt = this.#startedAt + o.metricsIntervalMs;
  }

  /** Spans waiting for export now. */
  get queued(): number {
    return this.#queue.length;
  }

  finished(r: Readonly<RequestRecord>, attempts: readonly Readonly<AttemptRecord>[], waitUntil: (p: Promise<unknown>) => void): void {
    if (this.#o.traces && r.trace.sampled) {
      const spans = requestSpans(r, attempts);
      const room = this.#o.maxQueueSpans - this.#queue.length;
      if (room < spans.length) this.#onDrop("spans", spans.length - Math.max(0, room));
      if (room > 0) {
        if (this.#queue.length === 0) this.#oldestAt = this.#clock.now();
        this.#queue.push(...spans.slice(0, room));
      }
    }
    this.flushIfDue(waitUntil);
    if (this.#queue.length > 0 && !this.#flushWaiting && !this.#sendingSpans) {
      this.#flushWaiting = true;
      const wait = Math.min(MAX_FLUSH_WAIT_MS, Math.max(0, this.#oldestAt + this.#o.flushIntervalMs - this.#clock.now()));
      waitUntil(
        new Promise<void>((resolve) => this.#scheduler.schedule(wait, resolve)).then(async () => {
          this.#flushWaiting = false;
          if (!this.#sendingSpans && this.#queue.length > 0) await this.#sendSpans(false);
        }),
      );
    }
  }

  /** Starts whatever export is due, under `waitUntil`; `force` flushes everything queued (drain). */
  flushIfDue(waitUntil: (p: Promise<unknown>) => void, force = false): void {
    this.#flush(waitUntil, force, 0);
  }

  /**
   * The telemetry clock's tick, which fires once per metrics interval with no request needed: it
   * pushes the metrics when they are due or would fall due within a tenth of the interval (so an
   * alarm a little early does not wait a whole interval more), and spans that have waited long
   * enough. A request that pushed in the meantime moved the due time, so the tick pushes nothing.
   */
  tick(waitUntil: (p: Promise<unknown>) => void): void {
    this.#flush(waitUntil, false, this.#o.metricsIntervalMs / 10);
  }

  #flush(waitUntil: (p: Promise<unknown>) => void, force: boolean, earlyMs: number): void {
    const now = this.#clock.now();
    if (!this.#sendingSpans && this.#queue.length > 0 && (force || this.#queue.length >= this.#o.batchSpans || now - this.#oldestAt >= this.#o.flushIntervalMs)) {
      waitUntil(this.#sendSpans(force));
    }
    if (this.#o.metrics && !this.#sendingMetrics && (force || now >= this.#metricsDueAt - earlyMs)) {
      this.#metricsDueAt = now + this.#o.metricsIntervalMs;
      waitUntil(this.#sendMetrics(now));
    }
  }

  async #sendSpans(all: boolean): Promise<void> {
    this.#sendingSpans = true;
    try {
      do {
        const batch = this.#queue.splice(0, this.#o.batchSpans);
        this.#oldestAt = this.#queue.length > 0 ? this.#clock.now() : Number.POSITIVE_INFINITY;
        if (!(await this.#post("/v1/traces", traceExport(batch, this.#resource)))) this.#onDrop("spans", batch.length);
      } while (all && this.#queue.length > 0);
    } finally {
      this.#sendingSpans = false;
    }
  }

  async #sendMetrics(now: number): Promise<void> {
    this.#sendingMetrics = true;
    try {
      if (!(await this.#post("/v1/metrics", metricsExport(this.#registry, this.#resource, this.#startedAt, now)))) this.#onDrop("metrics", 1);
    } finally {
      this.#sendingMetrics = false;
    }
  }

  async #post(path: string, body: unknown): Promise<boolean> {
    try {
      const res = await this.#fetch(`${this.#o.endpoint}${path}`, {
        method: "POST",
        headers: { ...this.#o.headers, "content-type": "application/json" },
        body: JSON.stringify(body),
        redirect: "manual",
        signal: AbortSignal.timeout(this.#o.timeoutMs),
      });
      await res.body?.cancel();
      if (res.ok) return true;
      this.#onError({ kind: "telemetry_export_failed", path, status: res.status });
      return false;
    } catch (err) {
      this.#onError({ kind: "telemetry_export_failed", path, error: String(err) });
      return false;
    }
  }
}
