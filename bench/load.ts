/**
 * Load generator, run as a child process of `run.ts` so the orchestrator's own work never shares
 * its event loop. Usage: `node bench/load.ts '<LoadSpec JSON>'`; prints one `LoadResult` JSON line.
 *
 * Closed loop: `concurrency` workers each send a request over a keep-alive agent, read the whole
 * body (a stream until its end), validate it, and send the next. A warm-up phase runs first and is
 * discarded; between phases every in-flight request drains, and CPU counters are read at the exact
 * edges of the measured window.
 */
import { Agent, request } from "node:http";
import { performance } from "node:perf_hooks";
import type { LatencySummary, LoadResult, LoadSpec } from "./load-spec.ts";
import { cpuTicks, machineBusyTicks } from "./proc.ts";
import { Samples, percentile } from "./stats.ts";
import { invalidBody, requestHeaders, unexpectedHeader } from "./workload.ts";

/** Hard cap on requests per phase, on top of the time bound. */
const MAX_REQUESTS_PER_PHASE = 5_000_000;
const MAX_ERROR_SAMPLES = 5;

interface Outcome {
  readonly error?: string;
  readonly detail?: string;
  readonly latencyMs: number;
  readonly ttfbMs: number;
  /** To the response's headers (for a stream, before its first event). */
  readonly headersMs: number;
  /** The answer's own `Server-Timing` `gw`, when it carried one. */
  readonly gwMs: number | undefined;
}

const spec = JSON.parse(process.argv[2] ?? "") as LoadSpec;
const bodyBytes = Buffer.from(spec.body);
const target = new URL(spec.url);
const agent = new Agent({ keepAlive: true, maxSockets: spec.concurrency, maxFreeSockets: spec.concurrency });
const baseHeaders = requestHeaders(spec.workload, spec.headers);
const headers = { ...baseHeaders, "content-length": String(bodyBytes.length) };
let sent = 0;
/** The next request's body and headers: the same each time, or with a fresh number in place of the marker. */
const nextRequest = (): { body: Buffer; headers: Record<string, string> } => {
  if (spec.uniqueMarker === undefined) return { body: bodyBytes, headers };
  const body = Buffer.from(spec.body.replace(spec.uniqueMarker, `${process.pid}.${++sent}`));
  return { body, headers: { ...baseHeaders, "content-length": String(body.length) } };
};

// A stuck target must not keep this process alive past its budget.
const watchdog = setTimeout(
  () => {
    process.stderr.write("load generator: time budget exceeded\n");
    process.exit(3);
  },
  spec.warmupMs + spec.durationMs + 2 * spec.requestTimeoutMs + 10_000,
);
watchdog.unref();

/** The `gw` duration of a `Server-Timing` header, when it has one. */
function gatewayTime(header: string | string[] | undefined): number | undefined {
  const value = Array.isArray(header) ? header.join(", ") : header;
  const m = value === undefined ? null : /(?:^|,)\s*gw;dur=([0-9.]+)/.exec(value);
  return m ? Number(m[1]) : undefined;
}

function once(): Promise<Outcome> {
  return new Promise((resolve) => {
    const start = performance.now();
    let ttfb = -1;
    let headers = -1;
    let gwMs: number | undefined;
    let settled = false;
    const settle = (error?: string, detail?: string) => {
      if (settled) return;
      settled = true;
      const now = performance.now();
      resolve({ error, detail, latencyMs: now - start, ttfbMs: ttfb < 0 ? now - start : ttfb, headersMs: headers < 0 ? now - start : headers, gwMs });
    };
    const next = nextRequest();
    const req = request(
      { host: target.hostname, port: target.port, path: target.pathname, method: "POST", agent, headers: next.headers },
      (res) => {
        headers = performance.now() - start;
        const chunks: Buffer[] = [];
        gwMs = gatewayTime(res.headers["server-timing"]);
        res.on("data", (chunk: Buffer) => {
          if (ttfb < 0) ttfb = performance.now() - start;
          chunks.push(chunk);
        });
        res.on("error", (err: NodeJS.ErrnoException) => settle(`body ${err.code ?? err.message}`));
        res.on("close", () => {
          if (!res.complete) settle("connection closed mid-body");
        });
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          const status = res.statusCode ?? 0;
          if (status < 200 || status > 299) return settle(`http ${status}`, `http ${status}: ${text.slice(0, 300)}`);
          const invalid = invalidBody(spec.workload, text);
          if (invalid !== undefined) return settle(invalid, `${invalid}: …${text.slice(-300)}`);
          const header = spec.expectHeader === undefined ? undefined : unexpectedHeader(spec.expectHeader, res.headers[spec.expectHeader.name]);
          if (header !== undefined) return settle(header);
          settle();
        });
      },
    );
    req.setTimeout(spec.requestTimeoutMs, () => req.destroy(new Error("request timeout")));
    req.on("error", (err: NodeJS.ErrnoException) => settle(err.code ?? err.message));
    req.end(next.body);
  });
}

interface Phase {
  requests: number;
  ok: number;
  errors: number;
  errorKinds: Record<string, number>;
  errorSamples: string[];
  latency: Samples;
  ttfb: Samples;
  headers: Samples;
  /** The `gw` entries of the answers' `Server-Timing` headers. */
  gw: Samples;
}

async function phase(durationMs: number): Promise<Phase> {
  const p: Phase = { requests: 0, ok: 0, errors: 0, errorKinds: {}, errorSamples: [], latency: new Samples(), ttfb: new Samples(), headers: new Samples(), gw: new Samples() };
  const until = performance.now() + durationMs;
  const worker = async () => {
    while (performance.now() < until && p.requests < MAX_REQUESTS_PER_PHASE) {
      p.requests++;
      const o = await once();
      if (o.error === undefined) {
        p.ok++;
        p.latency.push(o.latencyMs);
        p.ttfb.push(o.ttfbMs);
        p.headers.push(o.headersMs);
        if (o.gwMs !== undefined) p.gw.push(o.gwMs);
      } else {
        p.errors++;
        p.errorKinds[o.error] = (p.errorKinds[o.error] ?? 0) + 1;
        const sample = o.detail ?? o.error;
        if (p.errorSamples.length < MAX_ERROR_SAMPLES && !p.errorSamples.includes(sample)) p.errorSamples.push(sample);
      }
    }
  };
  await Promise.all(Array.from({ length: spec.concurrency }, worker));
  return p;
}

function summary(samples: Samples): LatencySummary {
  const s = samples.sorted();
  let sum = 0;
  for (const v of s) sum += v;
  const r = (v: number) => Math.round(v * 1000) / 1000;
  return {
    p50: r(percentile(s, 50)),
    p90: r(percentile(s, 90)),
    p99: r(percentile(s, 99)),
    max: r(s.length ? s[s.length - 1]! : Number.NaN),
    mean: r(s.length ? sum / s.length : Number.NaN),
  };
}

const readCpu = () => Object.fromEntries(Object.entries(spec.cpuPids).map(([label, pid]) => [label, cpuTicks(pid)]));

try {
  const warm = await phase(spec.warmupMs);
  const cpuBefore = readCpu();
  const machineBefore = machineBusyTicks();
  const clientBefore = process.cpuUsage();
  const t0 = performance.now();
  const measured = await phase(spec.durationMs);
  const elapsedMs = performance.now() - t0;
  const clientCpu = process.cpuUsage(clientBefore);
  const cpuAfter = readCpu();
  const machineAfter = machineBusyTicks();
  const msPerTick = 1000 / spec.clockTicksPerSecond;
  const cpuMs = Object.fromEntries(Object.keys(cpuAfter).map((k) => [k, (cpuAfter[k]! - cpuBefore[k]!) * msPerTick]));
  const clientCpuMs = (clientCpu.user + clientCpu.system) / 1000;
  // The same pid may be watched under two labels (the simulator is the server of `direct`).
  const watchedMs = Object.entries(spec.cpuPids)
    .filter(([, pid], i, all) => all.findIndex(([, p]) => p === pid) === i)
    .reduce((sum, [label]) => sum + (cpuMs[label] ?? 0), 0);
  const machineMs = (machineAfter - machineBefore) * msPerTick;
  const cores = (ms: number) => Math.round((ms / elapsedMs) * 100) / 100;
  const result: LoadResult = {
    requests: measured.requests,
    ok: measured.ok,
    errors: measured.errors,
    errorKinds: measured.errorKinds,
    errorSamples: measured.errorSamples,
    elapsedMs: Math.round(elapsedMs),
    rps: Math.round((measured.ok / elapsedMs) * 1000 * 10) / 10,
    latencyMs: summary(measured.latency),
    ttfbMs: summary(measured.ttfb),
    headersMs: summary(measured.headers),
    ...(measured.gw.size > 0 ? { serverTimingGwMs: summary(measured.gw) } : {}),
    cpuMs,
    clientCpuMs: Math.round(clientCpuMs),
    machineBusyCores: cores(machineMs),
    otherBusyCores: cores(Math.max(0, machineMs - watchedMs - clientCpuMs)),
    warmup: { requests: warm.requests, errors: warm.errors, errorKinds: warm.errorKinds, errorSamples: warm.errorSamples },
  };
  agent.destroy();
  process.stdout.write(`${JSON.stringify(result)}\n`);
} catch (err) {
  agent.destroy();
  process.stderr.write(`load generator failed: ${String(err)}\n`);
  process.exitCode = 1;
}
