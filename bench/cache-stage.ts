/**
 * The cache stage of `npm run bench`: what a response-cache hit costs the gateway against a
 * buffered miss. Both go to {@link CACHE_MODEL} (one decision with an exact-mode `cache` plugin)
 * with the buffered workload's body (same prompt, same 16-token answer): the hit is answered from
 * the tenant's ResponseCache object and never reaches the simulator; the miss carries
 * `x-sluice-cache: bypass`, so it goes to the simulator like any buffered request, past the
 * cache's lookup and store. A real miss also looks up and stores, so it costs more than this one:
 * the comparison is against the cheapest miss. The measuring loop stays in run.ts.
 */
import { exchange } from "./load-runner.ts";
import type { MeasuredRun, MeasuredSummary } from "./bedrock-streaming.ts";
import { f, pairs, pairTable, type KeyName, type Pair } from "./paired-stage.ts";
import { CACHE_MODEL } from "./sluice-config.ts";
import type { ExpectedHeader } from "./workload.ts";

/** One kind of request of a paired stage, for either key. */
export interface CellSpec {
  readonly kind: string;
  readonly model: string;
  /** Headers added to the key's. */
  readonly headers: Readonly<Record<string, string>>;
  readonly expectHeader: ExpectedHeader;
  /** Requests each client request makes to the simulator. */
  readonly upstreamPerRequest: number;
  /** Its answer is stored in the cache before it is measured ({@link fillCache}). */
  readonly stored?: true;
}

const HIT = "hit";
const MISS = "miss";

/** The stage's two kinds of request: every hit must say so, and no miss may. */
export const CACHE_CELLS: readonly CellSpec[] = [
  { kind: HIT, model: CACHE_MODEL, headers: {}, expectHeader: { name: "x-sluice-cache", value: "hit" }, upstreamPerRequest: 0, stored: true },
  { kind: MISS, model: CACHE_MODEL, headers: { "x-sluice-cache": "bypass" }, expectHeader: { name: "x-sluice-cache", value: null }, upstreamPerRequest: 1 },
];

/**
 * Stores the workload's answer for the hit cell's key before it is measured: asks until the
 * answer carries `x-sluice-cache: hit` (the store runs after the first answer went out), at most
 * for `timeoutMs`. Returns how many requests that took.
 */
export async function fillCache(url: string, headers: Record<string, string>, body: string, timeoutMs: number): Promise<number> {
  const until = Date.now() + timeoutMs;
  for (let n = 1; ; n++) {
    const res = await exchange(url, "POST", headers, body, timeoutMs);
    if (res.status !== 200) throw new Error(`filling the cache: HTTP ${res.status}: ${res.text.slice(0, 500)}`);
    if (res.headers["x-sluice-cache"] === "hit") return n;
    if (Date.now() > until) throw new Error(`filling the cache: no hit after ${n} requests in ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export type CacheStageResult<R extends MeasuredRun, S extends MeasuredSummary> = readonly Pair<R, S>[];

/** Hit over miss per key, from the runs (keyed by `cellName`). */
export function cacheStageResult<R extends MeasuredRun, S extends MeasuredSummary>(keys: readonly KeyName[], runs: ReadonlyMap<string, readonly R[]>, summarize: (runs: readonly R[]) => S): CacheStageResult<R, S> {
  return pairs(keys, { a: HIT, b: MISS }, runs, summarize);
}

/** The stage's table and the lines that read it. */
export function cacheStageReport(result: CacheStageResult<MeasuredRun, MeasuredSummary>, o: { readonly concurrency: number; readonly runs: number; readonly durationMs: number; readonly bufferedTokens: number }): string {
  return [
    `cache: Sluice answering the buffered workload (${o.bufferedTokens} output tokens) on an entrypoint with an exact-mode cache plugin: hit (from the cache) and miss (x-sluice-cache: bypass, to the simulator); ` +
      `concurrency ${o.concurrency}, median of ${o.runs} × ${o.durationMs / 1000} s, interleaved`,
    pairTable(result, { a: "cache hit", b: "buffered miss" }),
    ...result.map(
      (p) =>
        `${p.key} key: hit ${f(p.a.median.serverCpuMsPerReq, 3)} ms, miss ${f(p.b.median.serverCpuMsPerReq, 3)} ms of workerd CPU per request; ` +
        `hit/miss (median of per-run ratios) CPU ×${f(p.cpuRatio, 2)}, throughput ×${f(p.throughputRatio, 2)}`,
    ),
    `target (a hit costs less workerd CPU than a buffered miss): ${result.map((p) => `${p.cpuRatio < 1 ? "met" : "NOT met"} for the ${p.key} key`).join(", ")}`,
    "Every hit was checked for x-sluice-cache: hit and never reached the simulator; every miss reached it once, without that header.",
    "The miss skips the cache's lookup and store (bypass); a real miss pays both, so it costs more than the miss shown.",
  ].join("\n");
}
