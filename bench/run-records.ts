/**
 * One measured run of `npm run bench` against one target, what counts as its errors, its log line,
 * and the medians of a target's runs: shared by every load stage of run.ts and the stages' own
 * report files.
 */
import type { MeasuredSummary } from "./bedrock-streaming.ts";
import type { LoadResult } from "./load-spec.ts";
import { median } from "./stats.ts";

export interface RunRecord {
  readonly run: number;
  readonly result: LoadResult;
  /** Server (workerd, or the simulator for `direct`) CPU per measured request, ms. */
  readonly serverCpuMsPerReq: number;
  readonly simCpuMsPerReq: number;
  readonly clientCpuMsPerReq: number;
  /** Simulator outcomes other than `completed` during the run (warm-up included), by kind. */
  readonly upstreamAnomalies: Readonly<Record<string, number>>;
  /** Requests the simulator saw during the run (warm-up included). */
  readonly upstreamRequests: number;
  /** Requests each client request must make to the simulator: 1, 0 for a cache hit, a cascade's steps. */
  readonly upstreamPerRequest: number;
}

/** Client requests that did not reach the simulator exactly as often as they must (a retry, a request never sent upstream, a hit that was not one). */
function upstreamMismatch(r: RunRecord): number {
  return Math.abs(r.upstreamRequests - r.upstreamPerRequest * (r.result.requests + r.result.warmup.requests));
}

function runErrors(r: RunRecord): number {
  return r.result.errors + r.result.warmup.errors + Object.values(r.upstreamAnomalies).reduce((a, b) => a + b, 0) + upstreamMismatch(r);
}

const f = (n: number, digits: number) => (Number.isFinite(n) ? n.toFixed(digits) : "n/a");

/** Prints one run's line, and adds its errors (with what the simulator saw) to `problems`. */
export function logRun(label: string, target: string, rec: RunRecord, runs: number, problems: string[]): void {
  const res = rec.result;
  const errors = runErrors(rec);
  console.log(
    `${label.padEnd(9)} run ${rec.run}/${runs} ${target.padEnd(11)} ${f(res.rps, 0).padStart(6)} req/s  ` +
      `p50 ${f(res.latencyMs.p50, 2)} ms  p99 ${f(res.latencyMs.p99, 2)} ms  ` +
      `server CPU ${f(rec.serverCpuMsPerReq, 3)} ms/req  other load ${f(res.otherBusyCores, 2)}  ${errors > 0 ? `ERRORS ${errors}` : "0 errors"}`,
  );
  if (errors === 0) return;
  const detail = [
    ...Object.entries(res.errorKinds).map(([k, n]) => `${n} × ${k}`),
    ...Object.entries(res.warmup.errorKinds).map(([k, n]) => `${n} × ${k} during warm-up`),
    ...Object.entries(rec.upstreamAnomalies).map(([k, n]) => `${n} × simulator outcome '${k}'`),
    ...(upstreamMismatch(rec) > 0 ? [`the simulator saw ${rec.upstreamRequests} requests for ${res.requests + res.warmup.requests} client requests (want ${rec.upstreamPerRequest} each)`] : []),
  ];
  const samples = [...res.errorSamples, ...res.warmup.errorSamples];
  problems.push(`${label} run ${rec.run} ${target}: ${detail.join(", ")}${samples.length ? `\n    e.g. ${samples.join("\n    e.g. ")}` : ""}`);
}

/** A target's figures over its runs: the median, metric by metric (what every stage reads, and the load generator's own CPU and counts). */
export interface TargetSummary extends MeasuredSummary {
  readonly clientCpuMsPerReq: number;
  /** The median over runs of the p50 time to the response's headers (NaN in results from before it was measured). */
  readonly headersP50Ms: number;
  /** The median over runs of the mean and the median `gw` the answers' `Server-Timing` reported (NaN for a target that sends none). */
  readonly serverTimingGw: { readonly meanMs: number; readonly p50Ms: number };
  readonly requests: number;
}

export function summarize(runs: readonly RunRecord[]): TargetSummary {
  const m = (f: (r: RunRecord) => number) => median(runs.map(f));
  return {
    rps: m((r) => r.result.rps),
    p50Ms: m((r) => r.result.latencyMs.p50),
    p99Ms: m((r) => r.result.latencyMs.p99),
    ttfbP50Ms: m((r) => r.result.ttfbMs.p50),
    headersP50Ms: m((r) => r.result.headersMs?.p50 ?? Number.NaN),
    serverCpuMsPerReq: m((r) => r.serverCpuMsPerReq),
    simCpuMsPerReq: m((r) => r.simCpuMsPerReq),
    clientCpuMsPerReq: m((r) => r.clientCpuMsPerReq),
    serverTimingGw: { meanMs: m((r) => r.result.serverTimingGwMs?.mean ?? Number.NaN), p50Ms: m((r) => r.result.serverTimingGwMs?.p50 ?? Number.NaN) },
    otherBusyCores: m((r) => r.result.otherBusyCores),
    requests: runs.reduce((a, r) => a + r.result.requests, 0),
    errors: runs.reduce((a, r) => a + runErrors(r), 0),
  };
}
