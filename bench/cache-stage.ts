/**
 * The cache stage of `npm run bench`: what a response-cache hit costs the gateway against a miss.
 * All go to {@link CACHE_MODEL} (one decision with an exact-mode `cache` plugin) with the buffered
 * workload's body (same prompt size, same 16-token answer): the hit is answered from the tenant's
 * ResponseCache object and never reaches the simulator; the miss asks a prompt never asked before
 * (a number in it changes per request), so it pays the lookup, the simulator's answer and the
 * store, as every miss of a cached entrypoint does; the bypass carries `x-sluice-cache: bypass`, so
 * it skips the cache altogether and costs what the entrypoint would without the plugin. The target
 * compares the hit with the miss; the bypass is shown beside them. The measuring loop stays in
 * run.ts.
 */
import { exchange, table } from "./load-runner.ts";
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
  /** Every request asks a prompt no request asked before ({@link uniquePrompt}). */
  readonly unique?: true;
}

const HIT = "hit";
const MISS = "miss";
const BYPASS = "bypass";

/** The marker the load generator replaces by a fresh number in every request of a `unique` cell. */
export const UNIQUE_MARKER = "{{n}}";

/** A Chat body whose user message gains the marker, so that each request's prompt is new. */
export function uniquePrompt(body: string): string {
  const b = JSON.parse(body) as { messages: { content: string }[] };
  b.messages[0]!.content += ` (question ${UNIQUE_MARKER})`;
  return JSON.stringify(b);
}

/** The stage's kinds of request: every hit must say so; no miss or bypass may. */
export const CACHE_CELLS: readonly CellSpec[] = [
  { kind: HIT, model: CACHE_MODEL, headers: {}, expectHeader: { name: "x-sluice-cache", value: "hit" }, upstreamPerRequest: 0, stored: true },
  { kind: MISS, model: CACHE_MODEL, headers: {}, expectHeader: { name: "x-sluice-cache", value: null }, upstreamPerRequest: 1, unique: true },
  { kind: BYPASS, model: CACHE_MODEL, headers: { "x-sluice-cache": "bypass" }, expectHeader: { name: "x-sluice-cache", value: null }, upstreamPerRequest: 1 },
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

/** Per key: hit over miss (the target), and hit over bypass. */
export interface CacheStageResult<R extends MeasuredRun, S extends MeasuredSummary> {
  readonly miss: readonly Pair<R, S>[];
  readonly bypass: readonly Pair<R, S>[];
}

/** The stage's pairs per key, from the runs (keyed by `cellName`). */
export function cacheStageResult<R extends MeasuredRun, S extends MeasuredSummary>(keys: readonly KeyName[], runs: ReadonlyMap<string, readonly R[]>, summarize: (runs: readonly R[]) => S): CacheStageResult<R, S> {
  return { miss: pairs(keys, { a: HIT, b: MISS }, runs, summarize), bypass: pairs(keys, { a: HIT, b: BYPASS }, runs, summarize) };
}

/** The stage's table and the lines that read it. */
export function cacheStageReport(result: CacheStageResult<MeasuredRun, MeasuredSummary>, o: { readonly concurrency: number; readonly runs: number; readonly durationMs: number; readonly bufferedTokens: number }): string {
  const bypassOf = (key: KeyName) => result.bypass.find((p) => p.key === key)!;
  return [
    `cache: Sluice answering the buffered workload (${o.bufferedTokens} output tokens) on an entrypoint with an exact-mode cache plugin: hit (from the cache), ` +
      `miss (a new prompt each request: lookup, simulator, store) and bypass (x-sluice-cache: bypass: no lookup, no store); ` +
      `concurrency ${o.concurrency}, median of ${o.runs} × ${o.durationMs / 1000} s, interleaved`,
    pairTable(result.miss, { a: "cache hit", b: "miss" }),
    table(["key", "request", "req/s", "p50 ms", "p99 ms", "workerd CPU ms/req"], result.bypass.map((p) => [`${p.key} key`, "bypass", f(p.b.median.rps, 0), f(p.b.median.p50Ms, 2), f(p.b.median.p99Ms, 2), f(p.b.median.serverCpuMsPerReq, 3)]), 2),
    ...result.miss.map(
      (p) =>
        `${p.key} key: hit ${f(p.a.median.serverCpuMsPerReq, 3)} ms, miss ${f(p.b.median.serverCpuMsPerReq, 3)} ms, bypass ${f(bypassOf(p.key).b.median.serverCpuMsPerReq, 3)} ms of workerd CPU per request; ` +
        `(median of per-run ratios) hit/miss CPU ×${f(p.cpuRatio, 2)}, hit/bypass CPU ×${f(bypassOf(p.key).cpuRatio, 2)}`,
    ),
    `target (a hit costs less workerd CPU than a buffered miss): ${result.miss.map((p) => `${p.cpuRatio < 1 ? "met" : "NOT met"} for the ${p.key} key`).join(", ")}`,
    "Every hit was checked for x-sluice-cache: hit and never reached the simulator; every miss and bypass reached it once, without that header.",
  ].join("\n");
}
