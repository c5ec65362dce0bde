import { Histogram, type Counter, type Gauge, type MetricRegistry } from "./metric-registry.ts";
import { SEMCONV_SCHEMA_URL } from "./semconv.ts";
import type { AttributeValue, SpanData } from "./spans.ts";

/**
 * OTLP/HTTP with JSON bodies (the protocol's `application/json` encoding): spans to `/v1/traces`,
 * metrics to `/v1/metrics`. Hand-written rather than the OpenTelemetry JS SDK: the SDK's trace and
 * metrics packages bring their own context manager, timers and exporters built for Node, while the
 * gateway's spans are already cut from its records once a request ends, so only this encoding is
 * needed. The reasoning and what it measured are in docs/observability.md.
 */

type OtlpValue = { stringValue: string } | { intValue: string } | { doubleValue: number } | { boolValue: boolean } | { arrayValue: { values: OtlpValue[] } };
type OtlpAttribute = { key: string; value: OtlpValue };

function value(v: AttributeValue): OtlpValue {
  if (typeof v === "string") return { stringValue: v };
  if (typeof v === "boolean") return { boolValue: v };
  if (typeof v === "number") return Number.isInteger(v) ? { intValue: String(v) } : { doubleValue: v };
  return { arrayValue: { values: v.map((x) => ({ stringValue: x })) } };
}

function attributes(a: Readonly<Record<string, AttributeValue | undefined>>): OtlpAttribute[] {
  const out: OtlpAttribute[] = [];
  for (const [key, v] of Object.entries(a)) if (v !== undefined) out.push({ key, value: value(v) });
  return out;
}

/** Epoch milliseconds as OTLP's decimal string of nanoseconds. */
export function nanos(ms: number): string {
  return (BigInt(Math.round(ms * 1000)) * 1000n).toString();
}

const KIND = { internal: 1, server: 2, client: 3 } as const;

/** What every export says about its source. */
export interface OtlpResource {
  readonly serviceName: string;
  readonly serviceVersion: string;
  /** Extra resource attributes (deployment environment, instance id). */
  readonly attributes?: Readonly<Record<string, string>> | undefined;
}

function resource(r: OtlpResource) {
  return { attributes: attributes({ "service.name": r.serviceName, "service.version": r.serviceVersion, ...r.attributes }) };
}

const SCOPE = { name: "sluice" };

/** An `ExportTraceServiceRequest` for these spans. */
export function traceExport(spans: readonly SpanData[], r: OtlpResource): unknown {
  return {
    resourceSpans: [
      {
        resource: resource(r),
        schemaUrl: SEMCONV_SCHEMA_URL,
        scopeSpans: [
          {
            scope: { ...SCOPE, version: r.serviceVersion },
            schemaUrl: SEMCONV_SCHEMA_URL,
            spans: spans.map((s) => ({
              traceId: s.traceId,
              spanId: s.spanId,
              ...(s.parentSpanId ? { parentSpanId: s.parentSpanId } : {}),
              name: s.name,
              kind: KIND[s.kind],
              startTimeUnixNano: nanos(s.startMs),
              endTimeUnixNano: nanos(Math.max(s.startMs, s.endMs)),
              attributes: attributes(s.attributes),
              events: s.events.map((e) => ({ timeUnixNano: nanos(e.atMs), name: e.name })),
              links: s.links.map((l) => ({ traceId: l.traceId, spanId: l.spanId })),
              status: s.error === undefined ? { code: 0 } : { code: 2, message: s.error },
            })),
          },
        ],
      },
    ],
  };
}

/**
 * An `ExportMetricsServiceRequest` of every instrument's current state: cumulative sums and
 * histograms since `startMs` (the isolate's start), gauges as read now.
 */
export function metricsExport(registry: MetricRegistry, r: OtlpResource, startMs: number, nowMs: number): unknown {
  const start = nanos(startMs);
  const time = nanos(nowMs);
  const metrics = registry.read().map((inst) => {
    const attrs = (values: readonly string[]) => inst.labels.map((l, i) => ({ key: l.key, value: { stringValue: values[i] ?? "" } }));
    const base = { name: inst.name, unit: inst.unit, description: inst.help };
    if (inst instanceof Histogram) {
      return {
        ...base,
        histogram: {
          aggregationTemporality: 2,
          dataPoints: [...inst.all()].map((s) => ({
            attributes: attrs(s.values),
            startTimeUnixNano: start,
            timeUnixNano: time,
            count: String(s.state.count),
            sum: s.state.sum,
            bucketCounts: s.state.counts.map(String),
            explicitBounds: inst.bounds,
          })),
        },
      };
    }
    const c = inst as Counter | Gauge;
    const points = [...c.all()].map((s) => ({ attributes: attrs(s.values), startTimeUnixNano: start, timeUnixNano: time, asDouble: c.exported(s) }));
    return c.kind === "counter" ? { ...base, sum: { aggregationTemporality: 2, isMonotonic: true, dataPoints: points } } : { ...base, gauge: { dataPoints: points } };
  });
  return { resourceMetrics: [{ resource: resource(r), schemaUrl: SEMCONV_SCHEMA_URL, scopeMetrics: [{ scope: { ...SCOPE, version: r.serviceVersion }, schemaUrl: SEMCONV_SCHEMA_URL, metrics }] }] };
}
