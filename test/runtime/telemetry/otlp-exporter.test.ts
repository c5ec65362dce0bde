import { describe, expect, it } from "vitest";
import { MetricRegistry } from "../../../src/telemetry/metric-registry.ts";
import { OtlpExporter, type OtlpExporterOptions } from "../../../src/telemetry/otlp-exporter.ts";
import { ManualScheduler } from "../admit/admission-support.ts";
import { FakeClock } from "../traffic/helpers.ts";
import { attemptRecord, requestRecord } from "./fixtures.ts";

const OPTIONS: OtlpExporterOptions = {
  endpoint: "https://collector.example",
  headers: { authorization: "Bearer collector-key" },
  traces: true,
  metrics: true,
  maxQueueSpans: 25,
  batchSpans: 20,
  flushIntervalMs: 1_000,
  metricsIntervalMs: 10_000,
  timeoutMs: 1_000,
};

function harness(status = 200, options: Partial<OtlpExporterOptions> = {}) {
  const clock = new FakeClock(0);
  const scheduler = new ManualScheduler(clock);
  const posts: { url: string; body: any; headers: Record<string, string>; redirect: string | undefined }[] = [];
  const dropped: Record<string, number> = { spans: 0, metrics: 0 };
  const errors: unknown[] = [];
  const kept: Promise<unknown>[] = [];
  const exporter = new OtlpExporter(
    { ...OPTIONS, ...options },
    {
      resource: { serviceName: "sluice", serviceVersion: "0.1.0" },
      clock,
      scheduler,
      fetch: (async (url: string, init: RequestInit) => {
        posts.push({ url, body: JSON.parse(String(init.body)), headers: init.headers as Record<string, string>, redirect: init.redirect });
        return new Response("{}", { status });
      }) as typeof fetch,
      registry: new MetricRegistry(),
      onDrop: (signal, n) => (dropped[signal]! += n),
      onError: (e) => errors.push(e),
    },
  );
  const waitUntil = (p: Promise<unknown>) => void kept.push(p);
  return { clock, scheduler, exporter, posts, dropped, errors, kept, waitUntil, settle: () => Promise.all(kept) };
}

// A request with one attempt makes 10 spans: the request, 8 phases, the attempt.
const finish = (h: ReturnType<typeof harness>, id: string) => h.exporter.finished(requestRecord({ requestId: id }), [attemptRecord({ requestId: id })], h.waitUntil);

describe("OTLP exporter", () => {
  it("waits for a batch or the flush interval, then posts spans under the request's waitUntil", async () => {
    const h = harness();
    finish(h, "r1");
    expect(h.posts).toHaveLength(0);
    expect(h.exporter.queued).toBe(10);
    finish(h, "r2");
    await Promise.all(h.kept.slice(1));
    expect(h.posts.map((p) => p.url)).toEqual(["https://collector.example/v1/traces"]);
    expect(h.posts[0]!.body.resourceSpans[0].scopeSpans[0].spans).toHaveLength(20);
    expect(h.posts[0]!.headers).toMatchObject({ authorization: "Bearer collector-key", "content-type": "application/json" });
    expect(h.posts[0]!.redirect).toBe("manual");
    finish(h, "r3");
    h.scheduler.advance(1_000);
    finish(h, "r4");
    await h.settle();
    expect(h.posts).toHaveLength(2);
    expect(h.exporter.queued).toBe(0);
  });

  it("a gateway that goes quiet still flushes: the last request waits the flush interval under its waitUntil", async () => {
    const h = harness();
    finish(h, "r1");
    expect(h.kept).toHaveLength(1);
    expect(h.posts).toHaveLength(0);
    h.scheduler.advance(1_000);
    await h.settle();
    expect(h.posts.map((p) => p.url)).toEqual(["https://collector.example/v1/traces"]);
    expect(h.exporter.queued).toBe(0);
  });

  it("never queues past its bound: overflow is dropped and counted, never blocking the request", () => {
    const h = harness(200, { batchSpans: 1000, maxQueueSpans: 25 });
    finish(h, "r1");
    finish(h, "r2");
    finish(h, "r3");
    expect(h.exporter.queued).toBe(25);
    expect(h.dropped.spans).toBe(5);
  });

  it("drops and counts a batch the collector refuses, and logs why", async () => {
    const h = harness(503);
    finish(h, "r1");
    finish(h, "r2");
    h.scheduler.advance(1_000);
    await h.settle();
    expect(h.dropped.spans).toBe(20);
    expect(h.errors).toEqual([{ kind: "telemetry_export_failed", path: "/v1/traces", status: 503 }]);
  });

  it("pushes metrics when due, and everything at once when forced (drain)", async () => {
    const h = harness(200, { traces: false });
    finish(h, "r1");
    expect(h.kept).toHaveLength(0);
    h.scheduler.advance(10_000);
    finish(h, "r2");
    await h.settle();
    expect(h.posts.map((p) => p.url)).toEqual(["https://collector.example/v1/metrics"]);
    h.exporter.flushIfDue(h.waitUntil, true);
    await h.settle();
    expect(h.posts).toHaveLength(2);
  });

  it("the telemetry clock's tick pushes metrics with no request, a little early at most, and never twice in one interval", async () => {
    const h = harness(200, { traces: false });
    const urls = () => h.posts.map((p) => p.url);
    // Well before the interval: nothing is due.
    h.scheduler.advance(5_000);
    h.exporter.tick(h.waitUntil);
    expect(h.kept).toHaveLength(0);
    // An alarm that fires within a tenth of the interval before the due time still pushes.
    h.scheduler.advance(4_500);
    h.exporter.tick(h.waitUntil);
    await h.settle();
    expect(urls()).toEqual(["https://collector.example/v1/metrics"]);
    // A request pushing in between moves the due time: the next tick has nothing to do.
    h.scheduler.advance(10_000);
    finish(h, "r1");
    await h.settle();
    expect(h.posts).toHaveLength(2);
    h.scheduler.advance(500);
    h.exporter.tick(h.waitUntil);
    await h.settle();
    expect(h.posts).toHaveLength(2);
    h.scheduler.advance(9_500);
    h.exporter.tick(h.waitUntil);
    await h.settle();
    expect(h.posts).toHaveLength(3);
  });

  it("exports unsampled requests' metrics but not their spans", () => {
    const h = harness();
    const r = requestRecord();
    h.exporter.finished({ ...r, trace: { ...r.trace, sampled: false } }, [attemptRecord()], h.waitUntil);
    expect(h.exporter.queued).toBe(0);
  });
});
