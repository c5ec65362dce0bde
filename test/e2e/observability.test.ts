import { readFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT } from "../../local-stack/build.ts";
import { freePort } from "../../local-stack/ports.ts";
import { startGateway, startSimulatorProcess, SIMULATOR_API_KEY, type RunningGateway } from "../../local-stack/stack.ts";
import { startOtlpReceiver, type OtlpReceiver } from "./support/otlp-receiver.ts";
import { ADMIN_TOKEN, backendsFor, bundledConfig, DEMO_KEY, type Simulator } from "./support/stack.ts";

/** One sample of a Prometheus text exposition. */
interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

function parseExposition(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not an exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

const sum = (samples: Sample[], name: string, where: (l: Readonly<Record<string, string>>) => boolean = () => true) =>
  samples.filter((s) => s.name === name && where(s.labels)).reduce((n, s) => n + s.value, 0);

async function until<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("observability end to end: Prometheus scrape, OTLP traces and metrics", () => {
  let sim: Simulator;
  let receiver: OtlpReceiver;
  let gateway: RunningGateway;
  let metricsPort: number;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    sim = await startSimulatorProcess({ apiKey: SIMULATOR_API_KEY });
    metricsPort = await freePort();
    const g = bundledConfig("gateway");
    g.security.trustedHeaders = [...g.security.trustedHeaders, "traceparent", "tracestate"];
    g.security.egress = { allow: ["127.0.0.1"] };
    g.breaker = { enabled: false };
    g.observability.metrics = { listener: { host: "127.0.0.1", port: metricsPort } };
    g.observability.otlp = { endpoint: receiver.url, flushIntervalMs: 200, batchSpans: 64, metricsIntervalMs: 600_000 };
    const b = backendsFor(sim.url);
    b.backends[0].propagateTraceContext = true;
    gateway = await startGateway({
      adminToken: ADMIN_TOKEN,
      metricsPort,
      config: { gateway: stringify(g), backends: stringify(b) },
    });
  });

  afterAll(async () => {
    await gateway?.stop();
    await sim?.stop();
    await receiver?.stop();
  });

  const chat = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    fetch(`${gateway.publicUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json", ...headers },
      body: JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content: "hello" }], ...body }),
    });
  const scrape = async (viaAdmin: boolean) => {
    const res = viaAdmin ? await fetch(`${gateway.adminUrl}/admin/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }) : await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    return parseExposition(await res.text());
  };

  it("counts match the requests made, on the scrape and in the OTLP export; every request has its spans", async () => {
    const ids: string[] = [];
    const send = async (res: Response) => {
      ids.push(res.headers.get("x-request-id")!);
      await res.arrayBuffer();
      return res.status;
    };
    for (let i = 0; i < 4; i++) expect(await send(await chat({}))).toBe(200);
    for (let i = 0; i < 3; i++) expect(await send(await chat({ stream: true, stream_options: { include_usage: true } }))).toBe(200);
    for (let i = 0; i < 2; i++) expect(await send(await chat({ model: "no-such-model" }))).toBe(404);
    expect(await send(await chat({ messages: [{ role: "user", content: "fail [[sim status=400]]" }] }))).toBe(400);
    // The scrape is read at once: every request ended (the terminal ran) before its answer's last byte.
    const both = [await scrape(true), await scrape(false)];
    for (const samples of both) {
      expect(sum(samples, "sluice_requests_total", (l) => l.sluice_outcome === "success")).toBe(7);
      expect(sum(samples, "sluice_requests_total", (l) => l.sluice_outcome === "error")).toBe(3);
      expect(sum(samples, "sluice_requests_total", (l) => l.error_type === "model_not_found")).toBe(2);
      expect(sum(samples, "gen_ai_server_time_to_first_token_seconds_count", (l) => l.sluice_stream === "true")).toBe(3);
      expect(sum(samples, "gen_ai_server_request_duration_seconds_count")).toBe(8);
      expect(sum(samples, "sluice_attempts_total")).toBe(8);
      expect(sum(samples, "sluice_tokens_total", (l) => l.sluice_token_kind === "output")).toBeGreaterThan(0);
      expect(sum(samples, "sluice_requests_in_flight")).toBe(0);
    }
    // A drain flushes the exporter: the metrics export then holds the same counts.
    const drained = await fetch(`${gateway.adminUrl}/admin/drain`, { method: "POST", headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, body: JSON.stringify({ budgetMs: 1000 }) });
    expect(drained.status).toBe(200);
    await fetch(`${gateway.adminUrl}/admin/resume`, { method: "POST", headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    // The drain wrote this isolate's queued settlements: every budgeted success settled, with its cost.
    const afterDrain = await scrape(true);
    expect(sum(afterDrain, "sluice_ledger_settlements_total", (l) => l.sluice_result === "settled")).toBe(7);
    expect(sum(afterDrain, "sluice_ledger_settlements_total", (l) => l.sluice_result === "released")).toBe(1);
    // Cost is exported in dollars, and it is what the ledger booked for this isolate's settlements.
    const dollars = sum(afterDrain, "sluice_cost_total", (l) => l.sluice_currency === "USD");
    expect(dollars).toBeGreaterThan(0);
    const balance = (await (await fetch(`${gateway.adminUrl}/admin/budgets/demo/balance`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json()) as { balances: { scope: string; money?: { spent: number } }[] };
    const tenantSpent = balance.balances.find((b) => b.scope === "tenant:demo")?.money?.spent;
    expect(tenantSpent).toBeGreaterThan(0);
    expect(dollars).toBeCloseTo(tenantSpent! / 1e6, 6);
    const points = await until("a metrics export", () => receiver.metricExports("sluice.requests").at(-1));
    expect(points.reduce((n: number, p: any) => n + p.asDouble, 0)).toBe(10);
    const roots = await until("every request's server span", () => {
      const got = receiver.spans().filter((s) => s.kind === 2);
      return got.length >= ids.length ? got : undefined;
    });
    const byId = new Map(roots.map((s: any) => [s.attributes.find((a: any) => a.key === "sluice.request_id")?.value.stringValue, s]));
    for (const id of ids) expect(byId.has(id), id).toBe(true);
    expect(roots).toHaveLength(ids.length);
    // The 404s ended in their authorize phase, with the error code as status.
    const notFound = byId.get(ids[7]!)!;
    expect(notFound.status).toEqual({ code: 2, message: "model_not_found" });
  });

  it("a client's traceparent is the parent of the gateway's spans, and the attempt hangs under invoke", async () => {
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const clientSpan = "00f067aa0ba902b7";
    const res = await chat({}, { traceparent: `00-${traceId}-${clientSpan}-01` });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    const spans = await until("the trace's spans", () => {
      const got = receiver.spans().filter((s) => s.traceId === traceId);
      return got.some((s) => s.kind === 3) ? got : undefined;
    });
    const root = spans.find((s: any) => s.kind === 2);
    expect(root.parentSpanId).toBe(clientSpan);
    const invoke = spans.find((s: any) => s.name === "sluice.invoke");
    expect(invoke.parentSpanId).toBe(root.spanId);
    const attempt = spans.find((s: any) => s.kind === 3);
    expect(attempt.parentSpanId).toBe(invoke.spanId);
    expect(attempt.attributes).toContainEqual({ key: "gen_ai.provider.name", value: { stringValue: "openai" } });
    expect(spans.map((s: any) => s.name)).toEqual(expect.arrayContaining(["sluice.authenticate", "sluice.decide", "sluice.admit", "sluice.respond"]));
    // This backend propagates: the provider saw the attempt's span as its parent, in the client's trace.
    const seen = (await (await fetch(`${sim.url}/__sim/requests?limit=1`)).json()) as any;
    const last = (seen.requests ?? seen).at(-1);
    expect(last.headers.traceparent).toBe(`00-${traceId}-${attempt.spanId}-01`);
  });

  it("label values do not grow, whatever model names, keys, ids and headers callers send", async () => {
    // One of each kind first: the error codes they produce are a closed list, not growth.
    await (await chat({ model: "warm-up-unknown" })).arrayBuffer();
    await (await fetch(`${gateway.publicUrl}/v1/chat/completions`, { method: "POST", headers: { authorization: "Bearer sk-not-a-key", "content-type": "application/json" }, body: "{}" })).arrayBuffer();
    const labelValues = (samples: Sample[]) => new Set(samples.flatMap((s) => Object.entries(s.labels).filter(([k]) => k !== "le").map(([k, v]) => `${s.name}:${k}=${v}`)));
    const before = labelValues(await scrape(true));
    for (let i = 0; i < 25; i++) {
      const r = crypto.randomUUID();
      await (await chat({ model: `model-${r}`, user: r }, { "x-request-id": r, "x-sluice-tier": r, "x-sluice-end-user": r, traceparent: `00-${r.replaceAll("-", "")}-00f067aa0ba902b7-01` })).arrayBuffer();
      await (await fetch(`${gateway.publicUrl}/v1/chat/completions`, { method: "POST", headers: { authorization: `Bearer sk-${r}`, "content-type": "application/json" }, body: "{}" })).arrayBuffer();
    }
    expect(labelValues(await scrape(true))).toEqual(before);
  });

  it("OTLP exports name the service and the pinned conventions", async () => {
    const post = receiver.posts.find((p) => p.path === "/v1/traces")!;
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };
    expect(post.body.resourceSpans[0].schemaUrl).toBe("https://opentelemetry.io/schemas/1.41.0");
    expect(post.body.resourceSpans[0].resource.attributes).toEqual(
      expect.arrayContaining([
        { key: "service.name", value: { stringValue: "sluice" } },
        { key: "service.version", value: { stringValue: pkg.version } },
      ]),
    );
  });
});
