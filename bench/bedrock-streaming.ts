/**
 * The bedrock-streaming stage's arithmetic and report: from the runs `npm run bench` measured
 * (Sluice streaming the same OpenAI Chat answer from an OpenAI Chat backend and from a Bedrock
 * ConverseStream one) and the upstream events per answer, the CPU per event of each protocol, the
 * Bedrock/SSE ratios of each run's back-to-back pair, and what one more event costs. The measuring
 * loop stays in run.ts with the other stages.
 */
import { table } from "./load-runner.ts";
import { median } from "./stats.ts";
import type { UpstreamCount } from "./upstream-events.ts";

export type ProtocolName = "sse" | "bedrock";

/** What the stage reads of one measured run. */
export interface MeasuredRun {
  readonly serverCpuMsPerReq: number;
  readonly result: { readonly rps: number };
}

/** What the stage reads of a target's medians. */
export interface MeasuredSummary {
  readonly rps: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly ttfbP50Ms: number;
  readonly serverCpuMsPerReq: number;
  readonly simCpuMsPerReq: number;
  readonly otherBusyCores: number;
  readonly errors: number;
}

/** One backend protocol at one answer size: its runs, medians, and upstream events per answer. */
export interface ProtocolCell<R extends MeasuredRun, S extends MeasuredSummary> {
  readonly tokens: number;
  readonly protocol: ProtocolName;
  readonly upstream: UpstreamCount;
  readonly runs: readonly R[];
  readonly median: S;
  /** Median over runs of workerd CPU per request / upstream events per answer, µs. */
  readonly cpuUsPerEvent: number;
}

export interface ProtocolStageResult<R extends MeasuredRun, S extends MeasuredSummary> {
  readonly cells: readonly ProtocolCell<R, S>[];
  /** Per answer size: Bedrock over SSE, medians of the per-run ratios (each run's pair measured back to back). */
  readonly ratios: readonly { readonly tokens: number; readonly cpuPerEvent: number; readonly cpuPerRequest: number; readonly throughput: number }[];
  /** Per protocol: workerd CPU per extra event between the two sizes, µs (medians of the runs' CPU per request). */
  readonly marginalUsPerEvent?: Readonly<Record<ProtocolName, number>>;
}

/** Runs and upstream counts are keyed `${tokens} ${protocol}`. */
export const cellKey = (tokens: number, protocol: ProtocolName): string => `${tokens} ${protocol}`;

/** The stage's figures from its runs; `summarize` is the bench's own median of a target's runs. */
export function protocolStageResult<R extends MeasuredRun, S extends MeasuredSummary>(
  sizes: readonly number[],
  protocols: readonly ProtocolName[],
  runs: ReadonlyMap<string, readonly R[]>,
  upstream: ReadonlyMap<string, UpstreamCount>,
  summarize: (runs: readonly R[]) => S,
): ProtocolStageResult<R, S> {
  const cells: ProtocolCell<R, S>[] = sizes.flatMap((tokens) =>
    protocols.map((protocol) => {
      const rs = runs.get(cellKey(tokens, protocol))!;
      const up = upstream.get(cellKey(tokens, protocol))!;
      return { tokens, protocol, upstream: up, runs: rs, median: summarize(rs), cpuUsPerEvent: median(rs.map((r) => (1000 * r.serverCpuMsPerReq) / up.events)) };
    }),
  );
  const cell = (tokens: number, p: ProtocolName) => cells.find((c) => c.tokens === tokens && c.protocol === p)!;
  const ratios = sizes.map((tokens) => {
    const sse = cell(tokens, "sse");
    const bed = cell(tokens, "bedrock");
    const paired = (m: (r: R, up: UpstreamCount) => number) => median(bed.runs.map((r, i) => m(r, bed.upstream) / m(sse.runs[i]!, sse.upstream)));
    return {
      tokens,
      cpuPerEvent: paired((r, up) => r.serverCpuMsPerReq / up.events),
      cpuPerRequest: paired((r) => r.serverCpuMsPerReq),
      throughput: paired((r) => r.result.rps),
    };
  });
  const marginal = (p: ProtocolName): number => {
    const short = cell(sizes[0]!, p);
    const long = cell(sizes[1]!, p);
    return (1000 * (long.median.serverCpuMsPerReq - short.median.serverCpuMsPerReq)) / (long.upstream.events - short.upstream.events);
  };
  const marginalUsPerEvent = sizes.length === 2 ? { sse: marginal("sse"), bedrock: marginal("bedrock") } : undefined;
  return { cells, ratios, ...(marginalUsPerEvent ? { marginalUsPerEvent } : {}) };
}

const f = (n: number, digits: number) => (Number.isFinite(n) ? n.toFixed(digits) : "n/a");

/** The stage's table and the lines that read it. */
export function protocolStageReport(result: ProtocolStageResult<MeasuredRun, MeasuredSummary>, sizes: readonly number[], o: { readonly concurrency: number; readonly runs: number; readonly durationMs: number }): string {
  const rows = result.cells.map((c) => [
    String(c.tokens),
    c.protocol === "sse" ? "openai-chat (SSE)" : "bedrock-converse (event stream)",
    String(c.upstream.events),
    String(c.upstream.bytes),
    f(c.median.rps, 0),
    f(c.median.p50Ms, 2),
    f(c.median.p99Ms, 2),
    f(c.median.ttfbP50Ms, 2),
    f(c.median.serverCpuMsPerReq, 3),
    f(c.cpuUsPerEvent, 1),
    f(c.median.simCpuMsPerReq, 3),
    f(c.median.otherBusyCores, 2),
    c.median.errors > 0 ? `${c.median.errors} !!` : "0",
  ]);
  const marginal = result.marginalUsPerEvent;
  return [
    `bedrock-streaming: Sluice (open key) streaming to an OpenAI Chat client, stream: true + include_usage, from each backend protocol; concurrency ${o.concurrency}, median of ${o.runs} × ${o.durationMs / 1000} s`,
    table(["tokens", "backend", "upstream events", "bytes", "req/s", "p50 ms", "p99 ms", "TTFB p50 ms", "workerd CPU ms/req", "µs/event", "sim CPU ms/req", "other load", "errors"], rows, 2),
    ...result.ratios.map(
      (r) => `${String(r.tokens).padStart(4)} tokens, bedrock vs sse (median of per-run ratios): CPU/event ×${f(r.cpuPerEvent, 2)}, CPU/request ×${f(r.cpuPerRequest, 2)}, throughput ×${f(r.throughput, 2)}`,
    ),
    ...(marginal
      ? [`one more event (${sizes[1]} vs ${sizes[0]} tokens): sse ${f(marginal.sse, 1)} µs, bedrock ${f(marginal.bedrock, 1)} µs of workerd CPU, ×${f(marginal.bedrock / marginal.sse, 2)}`]
      : []),
    "upstream events: counted in one answer from the simulator per size and protocol (SSE events with [DONE]; event-stream frames);",
    "µs/event: workerd CPU per request / upstream events, so it carries the whole request (the Bedrock SigV4 signing included).",
    "The simulator's CPU per answer differs by protocol too (it frames and checksums the event stream, and verifies each signature),",
    "and on a small machine it can bound the Bedrock side's throughput: compare workerd CPU, not req/s.",
  ].join("\n");
}
