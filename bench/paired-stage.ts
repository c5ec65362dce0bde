/**
 * What the cache and cascade stages of `npm run bench` share: per key (budgeted, open), two kinds
 * of request to the same Sluice process measured in the same interleaved runs, and the ratio of
 * their workerd CPU per request, taken run by run (each run's pair measured back to back) and the
 * median of those reported. The stages' own files (cache-stage.ts, cascade-stage.ts) say what the
 * two kinds are and how to read the ratio.
 */
import type { MeasuredRun, MeasuredSummary } from "./bedrock-streaming.ts";
import { table } from "./load-runner.ts";
import { median } from "./stats.ts";

/** The bench's two keys: the demo tenant's, charged to strict budgets, and one of a tenant without budgets. */
export type KeyName = "budgeted" | "open";

/** One kind of request with one key: its runs and their medians. */
export interface PairCell<R extends MeasuredRun, S extends MeasuredSummary> {
  readonly key: KeyName;
  readonly kind: string;
  readonly runs: readonly R[];
  readonly median: S;
}

/** The two kinds of request with one key. */
export interface Pair<R extends MeasuredRun, S extends MeasuredSummary> {
  readonly key: KeyName;
  readonly a: PairCell<R, S>;
  readonly b: PairCell<R, S>;
  /** Median over runs of (a's workerd CPU per request / `aPer`) / b's, each run's pair measured back to back. */
  readonly cpuRatio: number;
  /** The same for throughput (a's requests per second over b's). */
  readonly throughputRatio: number;
}

/** Runs are keyed `${kind} ${key}`, which is also the name each run's log line shows. */
export const cellName = (kind: string, key: KeyName): string => `${kind} ${key}`;

/**
 * The pairs from the measured runs: `a` and `b` name the two kinds, `aPer` divides a's CPU per
 * request (the cascade's steps per request; 1 otherwise). `summarize` is the bench's own median of
 * a target's runs.
 */
export function pairs<R extends MeasuredRun, S extends MeasuredSummary>(
  keys: readonly KeyName[],
  kinds: { readonly a: string; readonly b: string; readonly aPer?: number },
  runs: ReadonlyMap<string, readonly R[]>,
  summarize: (runs: readonly R[]) => S,
): Pair<R, S>[] {
  const per = kinds.aPer ?? 1;
  return keys.map((key) => {
    const cell = (kind: string): PairCell<R, S> => {
      const rs = runs.get(cellName(kind, key));
      if (rs === undefined || rs.length === 0) throw new Error(`no runs of ${cellName(kind, key)}`);
      return { key, kind, runs: rs, median: summarize(rs) };
    };
    const a = cell(kinds.a);
    const b = cell(kinds.b);
    const paired = (m: (r: R) => number, scale: number) => median(a.runs.map((r, i) => m(r) / scale / m(b.runs[i]!)));
    return { key, a, b, cpuRatio: paired((r) => r.serverCpuMsPerReq, per), throughputRatio: paired((r) => r.result.rps, 1) };
  });
}

export const f = (n: number, digits: number): string => (Number.isFinite(n) ? n.toFixed(digits) : "n/a");

/**
 * The table of every cell, in key order, a before b; `perStep` adds a column of a's CPU per request
 * divided by it (b's CPU per request is its own per-step figure).
 */
export function pairTable(ps: readonly Pair<MeasuredRun, MeasuredSummary>[], labels: { readonly a: string; readonly b: string }, perStep?: number): string {
  const row = (c: PairCell<MeasuredRun, MeasuredSummary>, label: string, divisor: number) => [
    `${c.key} key`,
    label,
    f(c.median.rps, 0),
    f(c.median.p50Ms, 2),
    f(c.median.p99Ms, 2),
    f(c.median.serverCpuMsPerReq, 3),
    ...(perStep === undefined ? [] : [f(c.median.serverCpuMsPerReq / divisor, 3)]),
    f(c.median.simCpuMsPerReq, 3),
    f(c.median.otherBusyCores, 2),
    c.median.errors > 0 ? `${c.median.errors} !!` : "0",
  ];
  const rows = ps.flatMap((p) => [row(p.a, labels.a, perStep ?? 1), row(p.b, labels.b, 1)]);
  const header = ["key", "request", "req/s", "p50 ms", "p99 ms", "workerd CPU ms/req", ...(perStep === undefined ? [] : ["workerd CPU ms/step"]), "sim CPU ms/req", "other load", "errors"];
  return table(header, rows, 2);
}
