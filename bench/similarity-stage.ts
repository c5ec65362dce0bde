/**
 * The similarity stage of `npm run bench`: what deciding costs a chat request, against the plain
 * buffered request. Three kinds of request with the buffered workload's body (same prompt, same
 * answer size), per key: plain (the public model, its routes), local (an entrypoint whose
 * decisions read only local signals, {@link LOCAL_DECISIONS_MODEL}) and similarity (the same
 * decisions and two more on a similarity signal, {@link SIMILARITY_DECISIONS_MODEL}: one
 * embedding of the prompt through the embeddings entrypoint per request, then cosine against the
 * utterances' vectors). The bench prompt meets no decision, so every answer comes from the
 * default tiers, the public model's: what differs is how the request was decided. The measuring
 * loop stays in run.ts.
 */
import type { MeasuredRun, MeasuredSummary } from "./bedrock-streaming.ts";
import type { CellSpec } from "./cache-stage.ts";
import { table } from "./load-runner.ts";
import { f, pairs, pairTable, type KeyName, type Pair } from "./paired-stage.ts";
import { LOCAL_DECISIONS_MODEL, PUBLIC_MODEL, SIMILARITY_DECISIONS_MODEL } from "./sluice-config.ts";
import { median } from "./stats.ts";

const PLAIN = "plain";
const LOCAL = "local-decision";
const SIMILARITY = "similarity-decision";

/** Every decided answer names the decision that held: none does for the bench prompt. */
const DEFAULT_DECISION = { name: "x-sluice-decision", value: "default" } as const;

/** The stage's kinds of request; the similarity one reaches the simulator twice (its embedding, then the chat call). */
export const SIMILARITY_CELLS: readonly CellSpec[] = [
  { kind: PLAIN, model: PUBLIC_MODEL, headers: {}, expectHeader: DEFAULT_DECISION, upstreamPerRequest: 1 },
  { kind: LOCAL, model: LOCAL_DECISIONS_MODEL, headers: {}, expectHeader: DEFAULT_DECISION, upstreamPerRequest: 1 },
  { kind: SIMILARITY, model: SIMILARITY_DECISIONS_MODEL, headers: {}, expectHeader: DEFAULT_DECISION, upstreamPerRequest: 2 },
];

/** What the stage reads of one measured run: the paired stages' figures and the latency median. */
export type LatencyRun = MeasuredRun & { readonly result: { readonly latencyMs: { readonly p50: number } } };

/** Per key: a decided request over the plain one, and what the decision added. */
export interface DecisionPair<R extends LatencyRun, S extends MeasuredSummary> extends Pair<R, S> {
  /** Median over runs of a's workerd CPU per request minus b's (run by run), ms. */
  readonly cpuAddedMs: number;
  /** The same for the latency median (p50), ms. */
  readonly p50AddedMs: number;
}

/** Local over plain and similarity over plain, per key. */
export interface SimilarityStageResult<R extends LatencyRun, S extends MeasuredSummary> {
  readonly local: readonly DecisionPair<R, S>[];
  readonly similarity: readonly DecisionPair<R, S>[];
}

function withAdded<R extends LatencyRun, S extends MeasuredSummary>(p: Pair<R, S>): DecisionPair<R, S> {
  const added = (m: (r: R) => number) => median(p.a.runs.map((r, i) => m(r) - m(p.b.runs[i]!)));
  return { ...p, cpuAddedMs: added((r) => r.serverCpuMsPerReq), p50AddedMs: added((r) => r.result.latencyMs.p50) };
}

/** The stage's pairs per key, from the runs (keyed by `cellName`). */
export function similarityStageResult<R extends LatencyRun, S extends MeasuredSummary>(keys: readonly KeyName[], runs: ReadonlyMap<string, readonly R[]>, summarize: (runs: readonly R[]) => S): SimilarityStageResult<R, S> {
  return {
    local: pairs(keys, { a: LOCAL, b: PLAIN }, runs, summarize).map(withAdded),
    similarity: pairs(keys, { a: SIMILARITY, b: PLAIN }, runs, summarize).map(withAdded),
  };
}

const signed = (n: number, digits: number) => `${n >= 0 ? "+" : ""}${f(n, digits)}`;

/** The stage's table and the lines that read it. */
export function similarityStageReport(result: SimilarityStageResult<LatencyRun, MeasuredSummary>, o: { readonly concurrency: number; readonly runs: number; readonly durationMs: number; readonly bufferedTokens: number }): string {
  const line = (p: DecisionPair<LatencyRun, MeasuredSummary>, what: string) =>
    `${p.key} key, ${what} over plain (median of per-run figures): workerd CPU ×${f(p.cpuRatio, 2)} (${signed(p.cpuAddedMs, 3)} ms/req), p50 ${signed(p.p50AddedMs, 2)} ms, throughput ×${f(p.throughputRatio, 2)}`;
  return [
    `similarity: the buffered workload (${o.bufferedTokens} output tokens) to the public model (plain), to ${LOCAL_DECISIONS_MODEL} (decisions on local signals) and to ${SIMILARITY_DECISIONS_MODEL} ` +
      `(the same and a similarity signal: one embedding of the prompt per request); concurrency ${o.concurrency}, median of ${o.runs} × ${o.durationMs / 1000} s, interleaved`,
    pairTable(result.local, { a: "local decision", b: "plain" }),
    table(
      ["key", "request", "req/s", "p50 ms", "p99 ms", "workerd CPU ms/req", "sim CPU ms/req", "other load", "errors"],
      result.similarity.map((p) => [`${p.key} key`, "similarity decision", f(p.a.median.rps, 0), f(p.a.median.p50Ms, 2), f(p.a.median.p99Ms, 2), f(p.a.median.serverCpuMsPerReq, 3), f(p.a.median.simCpuMsPerReq, 3), f(p.a.median.otherBusyCores, 2), p.a.median.errors > 0 ? `${p.a.median.errors} !!` : "0"]),
      2,
    ),
    ...result.local.map((p) => line(p, "local decision")),
    ...result.similarity.map((p) => line(p, "similarity decision")),
    "Every answer was checked for x-sluice-decision: default; every similarity request reached the simulator exactly twice (its embedding and its chat call), every other request once.",
  ].join("\n");
}
