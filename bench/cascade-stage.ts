/**
 * The cascade stage of `npm run bench`: what one step of a Looper cascade costs the gateway against
 * one buffered request through the public listener. The cascade goes to {@link CASCADE_MODEL}: two
 * tiers scored by `avg_logprob`, with the simulator's `quality` knob set so that the first tier is
 * never sure enough, so every request makes exactly two sub-calls (steps), each asking the
 * simulator for log-probabilities. The buffered request is the buffered stage's: the public model,
 * the same prompt and answer size, one upstream call. A cascade request's CPU covers the client's
 * request (listener, decide, encode) and both steps; halved, it is the cost per step. The
 * measuring loop stays in run.ts.
 */
import type { MeasuredRun, MeasuredSummary } from "./bedrock-streaming.ts";
import type { CellSpec } from "./cache-stage.ts";
import { f, pairs, pairTable, type KeyName, type Pair } from "./paired-stage.ts";
import { CASCADE_MODEL, CASCADE_THRESHOLD, CASCADE_TIERS, PUBLIC_MODEL } from "./sluice-config.ts";

/** Steps of every cascade request. */
export const CASCADE_STEPS = 2;

/** Each token's probability under the simulator's `quality` knob: ln 0.2 ≈ -1.6, below {@link CASCADE_THRESHOLD}, so the first step always escalates. */
export const CASCADE_QUALITY = 0.2;

if (Math.log(CASCADE_QUALITY) >= CASCADE_THRESHOLD) throw new Error("the cascade stage's quality must put the first step below the threshold");

const CASCADE = "cascade";
const BUFFERED = "buffered";

/** The stage's two kinds of request: every cascade must say it took two steps and accepted the last tier; no buffered request runs one. */
export const CASCADE_CELLS: readonly CellSpec[] = [
  {
    kind: CASCADE,
    model: CASCADE_MODEL,
    headers: {},
    expectHeader: { name: "x-sluice-looper", value: `cascade; steps=${CASCADE_STEPS}; accepted=${CASCADE_TIERS[CASCADE_STEPS - 1]}` },
    upstreamPerRequest: CASCADE_STEPS,
  },
  { kind: BUFFERED, model: PUBLIC_MODEL, headers: {}, expectHeader: { name: "x-sluice-looper", value: null }, upstreamPerRequest: 1 },
];

export type CascadeStageResult<R extends MeasuredRun, S extends MeasuredSummary> = readonly Pair<R, S>[];

/** A cascade step over a buffered request per key, from the runs (keyed by `cellName`). */
export function cascadeStageResult<R extends MeasuredRun, S extends MeasuredSummary>(keys: readonly KeyName[], runs: ReadonlyMap<string, readonly R[]>, summarize: (runs: readonly R[]) => S): CascadeStageResult<R, S> {
  return pairs(keys, { a: CASCADE, b: BUFFERED, aPer: CASCADE_STEPS }, runs, summarize);
}

/** The stage's table and the lines that read it. */
export function cascadeStageReport(result: CascadeStageResult<MeasuredRun, MeasuredSummary>, o: { readonly concurrency: number; readonly runs: number; readonly durationMs: number; readonly bufferedTokens: number }): string {
  return [
    `cascade: a two-step cascade (avg_logprob, the first step always below the threshold) and one buffered request through the public listener, ${o.bufferedTokens} output tokens per answer; ` +
      `concurrency ${o.concurrency}, median of ${o.runs} × ${o.durationMs / 1000} s, interleaved`,
    pairTable(result, { a: `cascade (${CASCADE_STEPS} steps)`, b: "buffered" }, CASCADE_STEPS),
    ...result.map(
      (p) =>
        `${p.key} key: cascade ${f(p.a.median.serverCpuMsPerReq, 3)} ms per request, ${f(p.a.median.serverCpuMsPerReq / CASCADE_STEPS, 3)} ms per step; buffered ${f(p.b.median.serverCpuMsPerReq, 3)} ms; ` +
        `step/buffered (median of per-run ratios) CPU ×${f(p.cpuRatio, 2)}`,
    ),
    `target (a cascade step costs no more workerd CPU than a buffered request): ${result.map((p) => `${p.cpuRatio <= 1 ? "met" : "NOT met"} for the ${p.key} key`).join(", ")}`,
    `Every cascade answer was checked for x-sluice-looper: ${CASCADE_CELLS[0]!.expectHeader.value} and made exactly ${CASCADE_STEPS} simulator requests; every buffered one made one, without that header.`,
  ].join("\n");
}
