/**
 * `npm run bench`: Sluice against the provider simulator directly and against a null gateway on the
 * same runtime, under the same closed-loop load: chat completions, and MCP tool calls to the
 * simulator's MCP server; Sluice streaming from an OpenAI Chat backend (SSE) against a Bedrock
 * ConverseStream one (binary event stream); embeddings; a response-cache hit against a buffered
 * miss; a cascade step against a buffered request; a request decided on local signals and on a
 * similarity signal against a plain one; and the buffered request on a Sluice serving a generated
 * scale publication against the bench config. See docs/performance.md.
 *
 *   npm run bench -- [--duration 5] [--warmup 1] [--concurrency 32] [--runs 3] [--quick]
 *                    [--buffered-tokens 16] [--stream-tokens 32] [--long-stream-tokens 256]
 *                    [--no-access-log] [--out FILE] [--streams 1000] [--soak 180]
 *                    [--stages buffered,streaming,unloaded,mcp,embeddings,bedrock-streaming,cache,cascade,similarity,scale]
 *
 * Every process runs on loopback and is stopped at the end, on error and on SIGINT/SIGTERM. Any
 * failed, incomplete or unexpected response makes the bench exit non-zero after printing the table.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { dirname } from "node:path";
import { BenchError, runBench } from "./entry.ts";
import { configureSimulator, exchange, simJson } from "./load-runner.ts";
import { ECHO_PRICE_MICROS, DEMO_TENANT } from "./sluice-config.ts";
import { logRun, summarize, type RunRecord, type TargetSummary } from "./run-records.ts";
import { CACHE_CELLS, cacheStageReport, cacheStageResult, fillCache, type CacheStageResult, type CellSpec } from "./cache-stage.ts";
import { CASCADE_CELLS, CASCADE_QUALITY, cascadeStageReport, cascadeStageResult, type CascadeStageResult } from "./cascade-stage.ts";
import type { KeyName } from "./paired-stage.ts";
import { BUNDLED_CELL, measureScaleStarts, scaleStageReport, scaleStageResult, startScaleGateway, type ScaleStageResult } from "./scale-stage.ts";
import { SIMILARITY_CELLS, similarityStageReport, similarityStageResult, type SimilarityStageResult } from "./similarity-stage.ts";
import { procAvailable } from "./proc.ts";
import { cellKey, protocolStageReport, protocolStageResult, type ProtocolStageResult } from "./bedrock-streaming.ts";
import { countEventStreamFrames, countSseEvents, type UpstreamCount } from "./upstream-events.ts";
import { EMBEDDINGS_WORKLOAD, MCP_WORKLOAD, requestBody, requestHeaders, type ChatWorkload, type Workload } from "./workload.ts";
import { parseOptions, type Options, type StageId } from "./run-options.ts";
import { oneRun, preflight, REQUEST_TIMEOUT_MS, startStack, type Endpoint, type Stack, type TargetName } from "./bench-stack.ts";
import { f, ratios, report, type Ratios, type Stage } from "./stage-report.ts";
import { soakStage, streamsStage } from "./memory-stages.ts";

// ---------------------------------------------------------------------------------------------
// The books of the budgeted key's tool calls

interface Money {
  readonly spent: number;
  readonly held: number;
  readonly pending: number;
}

/**
 * The demo tenant's money this period (micro-USD), read once nothing is held any more, or after
 * 10 s: a call settles after its answer went out.
 */
async function settledTenantMoney(stack: Stack): Promise<Money> {
  const url = `${stack.admin.url}/admin/budgets/${DEMO_TENANT}/balance?scope=tenant:${DEMO_TENANT}`;
  for (const until = Date.now() + 10_000; ; ) {
    const res = await exchange(url, "GET", { authorization: `Bearer ${stack.admin.token}` }, undefined, REQUEST_TIMEOUT_MS);
    if (res.status !== 200) throw new BenchError(`GET ${url} answered ${res.status}: ${res.text.slice(0, 500)}`);
    // A scope the ledger has not seen yet has no figures.
    const money = (JSON.parse(res.text) as { balances: { money?: Money }[] }).balances[0]?.money ?? { spent: 0, held: 0, pending: 0 };
    if (money.held === 0 || Date.now() > until) return money;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * That every tool call of the budgeted key was reserved and settled in the ledger at its price,
 * none left held or pending: otherwise the budgeted figures would not be what they claim.
 */
async function checkToolCharges(stack: Stack, before: Money, runs: readonly RunRecord[], problems: string[]): Promise<string> {
  const calls = runs.reduce((n, r) => n + r.result.requests + r.result.warmup.requests, 0);
  const after = await settledTenantMoney(stack);
  const charged = after.spent - before.spent;
  const pending = after.pending - before.pending;
  if (charged !== calls * ECHO_PRICE_MICROS || after.held !== 0 || pending !== 0) {
    problems.push(`mcp: the budgeted key's ${calls} tool calls left ${charged} micro-USD charged, ${after.held} held and ${pending} pending in the ledger; want ${calls * ECHO_PRICE_MICROS}, 0 and 0`);
  }
  return `ledger: the budgeted key's ${calls} tool calls (warm-ups included) charged ${charged} micro-USD at ${ECHO_PRICE_MICROS} each, ${after.held} held, ${pending} pending`;
}
// ---------------------------------------------------------------------------------------------
// Bedrock streaming: the binary event stream against SSE

/**
 * The bedrock-streaming stage: Sluice serves the same OpenAI Chat stream to the client (the
 * streaming workload, same tokens) from an OpenAI Chat backend and from a Bedrock ConverseStream
 * one, on the same workerd process, the two measured back to back in each run (which goes first
 * alternates). Upstream events per answer are counted once per size ({@link countSseEvents},
 * {@link countEventStreamFrames}). CPU per event is workerd's CPU per request over them: all of
 * the request's cost, the Bedrock request's SigV4 signing included. With two sizes, the
 * difference between them isolates what one more event costs.
 */
async function protocolStage(stack: Stack, o: Options, problems: string[]): Promise<{ report: string; result: ProtocolStageResult<RunRecord, TargetSummary> }> {
  const sizes = [...new Set([o.streamTokens, ...(o.longStreamTokens > 0 ? [o.longStreamTokens] : [])])];
  const workloads = sizes.map((tokens): ChatWorkload => ({ name: "streaming", stream: true, tokens }));
  const upstream = new Map<string, UpstreamCount>();
  for (const w of workloads) {
    await configureSimulator(stack.simUrl, w);
    upstream.set(cellKey(w.tokens, "sse"), await countSseEvents(stack.simUrl));
    upstream.set(cellKey(w.tokens, "bedrock"), await countEventStreamFrames(stack.simUrl));
    for (const t of stack.protocols) await preflight(t, w);
  }
  const runs = new Map<string, RunRecord[]>();
  for (let run = 1; run <= o.runs; run++) {
    for (const w of workloads) {
      await configureSimulator(stack.simUrl, w);
      // Which protocol goes first alternates, so neither always runs on the other's heels.
      const order = run % 2 === 1 ? stack.protocols : [...stack.protocols].reverse();
      for (const t of order) {
        const rec = await oneRun(stack, t, w, o, run, o.concurrency);
        const key = cellKey(w.tokens, t.name);
        runs.set(key, [...(runs.get(key) ?? []), rec]);
        logRun(`bedrock ${w.tokens}`, t.name, rec, o.runs, problems);
      }
    }
  }
  const result = protocolStageResult(sizes, stack.protocols.map((t) => t.name), runs, upstream, summarize);
  return { report: protocolStageReport(result, sizes, o), result };
}
// ---------------------------------------------------------------------------------------------
// Cache and cascade: two kinds of request per key, interleaved

const KEYS: readonly KeyName[] = ["budgeted", "open"];

/**
 * Measures each key × kind cell of the cache or cascade stage (see cache-stage.ts and
 * cascade-stage.ts) with the buffered workload, in interleaved runs whose order alternates. A
 * cell whose answers come from the cache has them stored first.
 */
async function pairedStage(stack: Stack, o: Options, label: string, specs: readonly CellSpec[], w: ChatWorkload, problems: string[]): Promise<Map<string, RunRecord[]>> {
  return interleaved(stack, o, label, KEYS.flatMap((key) => specs.map((spec) => ({ spec, t: stack.cell(spec, key) }))), w, problems);
}

/** Each cell's runs, interleaved, the order alternating run by run; a `stored` cell's answer is in the cache before each run. */
async function interleaved(stack: Stack, o: Options, label: string, cells: readonly { readonly spec: Pick<CellSpec, "stored">; readonly t: Endpoint }[], w: ChatWorkload, problems: string[]): Promise<Map<string, RunRecord[]>> {
  for (const { spec, t } of cells) {
    if (spec.stored) await fillCache(t.url(w), requestHeaders(w, t.headers), requestBody(w, t.model), REQUEST_TIMEOUT_MS);
    await preflight(t, w);
  }
  const runs = new Map<string, RunRecord[]>();
  for (let run = 1; run <= o.runs; run++) {
    for (const { spec, t } of run % 2 === 1 ? cells : [...cells].reverse()) {
      // A miss cell's new prompts may have evicted the stored answer (the partition keeps its most
      // recently used entries): store it again, outside the measured window.
      if (spec.stored && run > 1) await fillCache(t.url(w), requestHeaders(w, t.headers), requestBody(w, t.model), REQUEST_TIMEOUT_MS);
      const rec = await oneRun(stack, t, w, o, run, o.concurrency);
      runs.set(t.name, [...(runs.get(t.name) ?? []), rec]);
      logRun(label, t.name, rec, o.runs, problems);
    }
  }
  return runs;
}
// ---------------------------------------------------------------------------------------------
// Main

async function main(): Promise<number> {
  const o = parseOptions();
  if (!procAvailable()) throw new BenchError("CPU accounting reads /proc/<pid>/stat; run the bench on Linux");
  const buffered: ChatWorkload = { name: "buffered", stream: false, tokens: o.bufferedTokens };
  const streaming: ChatWorkload = { name: "streaming", stream: true, tokens: o.streamTokens };
  const stages: readonly Stage[] = (
    [
      { id: "buffered", label: "buffered", workload: buffered, concurrency: o.concurrency },
      { id: "streaming", label: "streaming", workload: streaming, concurrency: o.concurrency },
      // Unloaded latency: what each target adds to one call when nothing queues.
      { id: "unloaded", label: "buffered, one in flight", workload: buffered, concurrency: 1 },
      { id: "unloaded", label: "streaming, one in flight", workload: streaming, concurrency: 1 },
      { id: "unloaded", label: "mcp, one in flight", workload: MCP_WORKLOAD, concurrency: 1 },
      { id: "mcp", label: "mcp", workload: MCP_WORKLOAD, concurrency: o.concurrency },
      { id: "embeddings", label: "embeddings", workload: EMBEDDINGS_WORKLOAD, concurrency: o.concurrency },
    ] satisfies Stage[]
  ).filter((st) => o.stages.includes(st.id));
  // bedrock-streaming runs on its own targets (Sluice's two backend protocols), after these.
  const protocolsStage = o.stages.includes("bedrock-streaming");
  const workloads = [...new Set(stages.map((st) => st.workload))];
  const stack = await startStack(o);
  // Each target asks its own embeddings model for an embedding, its chat model otherwise.
  const targetsOf = (w: Workload) => (w.name === "embeddings" ? stack.embeddingTargets : stack.targets);

  for (const w of workloads) {
    await configureSimulator(stack.simUrl, w);
    for (const t of targetsOf(w)) await preflight(t, w);
  }
  console.log(
    `all targets answer; ${stages.length} stages × ${o.runs} runs × ${stack.targets.length} targets` +
      `${protocolsStage ? ` and the bedrock-streaming stage (${o.runs} runs × 2 protocols × ${o.longStreamTokens > 0 && o.longStreamTokens !== o.streamTokens ? 2 : 1} sizes)` : ""}, ` +
      `${o.warmupMs / 1000} s warm-up + ${o.durationMs / 1000} s each, concurrency ${o.concurrency}` +
      `${o.accessLog ? "" : ", Sluice access log off"}\n`,
  );

  const reports: string[] = [];
  const problems: string[] = [];
  const streamed = await streamsStage(stack, o, streaming, problems);
  reports.push(...streamed.reports);
  const results: Record<string, { stage: Stage; runs: Record<TargetName, RunRecord[]>; median: Record<TargetName, TargetSummary>; ratios: Ratios }> = {};
  for (const st of stages) {
    const w = st.workload;
    await configureSimulator(stack.simUrl, w);
    const booksBefore = w.name === "mcp" ? await settledTenantMoney(stack) : undefined;
    const runs: Record<TargetName, RunRecord[]> = { direct: [], null: [], sluice: [], "sluice-open": [] };
    for (let run = 1; run <= o.runs; run++) {
      // Interleaved: direct, null, sluice, direct, null, sluice, … so drift hits every target alike.
      for (const t of targetsOf(w)) {
        const rec = await oneRun(stack, t, w, o, run, st.concurrency);
        runs[t.name].push(rec);
        logRun(st.label, t.name, rec, o.runs, problems);
      }
    }
    const med = { direct: summarize(runs.direct), null: summarize(runs.null), sluice: summarize(runs.sluice), "sluice-open": summarize(runs["sluice-open"]) };
    const rat = ratios(med);
    results[st.label] = { stage: st, runs, median: med, ratios: rat };
    const books = booksBefore === undefined ? [] : [await checkToolCharges(stack, booksBefore, runs.sluice, problems)];
    reports.push([report(st, o, med, rat), ...books].join("\n"));
  }

  const protocols = protocolsStage ? await protocolStage(stack, o, problems) : undefined;
  if (protocols) reports.push(protocols.report);

  /** A paired stage, when selected: the simulator set up for it, its cells run, its report kept. */
  const paired = async <R,>(id: StageId, cells: readonly CellSpec[], setUp: () => Promise<unknown>, result: (runs: Map<string, RunRecord[]>) => R, reportOf: (r: R) => string): Promise<R | undefined> => {
    if (!o.stages.includes(id)) return undefined;
    await setUp();
    const r = result(await pairedStage(stack, o, id, cells, buffered, problems));
    reports.push(reportOf(r));
    return r;
  };
  const plainSimulator = () => configureSimulator(stack.simUrl, buffered);
  const cache = await paired<CacheStageResult<RunRecord, TargetSummary>>("cache", CACHE_CELLS, plainSimulator, (runs) => cacheStageResult(KEYS, runs, summarize), (r) => cacheStageReport(r, o));
  // Every model unsure: the first step always escalates, the second is accepted as it is.
  const cascadeSimulator = () => simJson(stack.simUrl, "PUT", "/__sim/config", { tokens: buffered.tokens, "latency-ms": 0, "ttft-ms": 0, "token-interval-ms": 0, quality: CASCADE_QUALITY });
  const cascade = await paired<CascadeStageResult<RunRecord, TargetSummary>>("cascade", CASCADE_CELLS, cascadeSimulator, (runs) => cascadeStageResult(KEYS, runs, summarize), (r) => cascadeStageReport(r, o));
  const similarity = await paired<SimilarityStageResult<RunRecord, TargetSummary>>("similarity", SIMILARITY_CELLS, plainSimulator, (runs) => similarityStageResult(KEYS, runs, summarize), (r) => similarityStageReport(r, o));

  let scale: ScaleStageResult<RunRecord, TargetSummary> | undefined;
  if (o.stages.includes("scale")) {
    // Started only when selected: the scale config takes seconds to compile, and its process stays large.
    const starts = await measureScaleStarts();
    const gw = await startScaleGateway(stack, o.accessLog);
    try {
      await configureSimulator(stack.simUrl, buffered);
      const cells = [{ spec: {}, t: stack.cell(BUNDLED_CELL, "budgeted") }, ...gw.endpoints.map((t) => ({ spec: {}, t }))];
      scale = scaleStageResult(await interleaved(stack, o, "scale", cells, buffered, problems), summarize, starts);
    } finally {
      await gw.stop();
    }
    reports.push(scaleStageReport(scale, o));
  }

  const soaked = await soakStage(stack, o, streaming, problems);
  reports.push(...soaked.reports);

  console.log(`\n${reports.join("\n\n")}\n`);
  console.log(
    "server CPU = user+system time of the serving process (workerd; the simulator for direct) per request;\n" +
      "sim CPU = the simulator's; other load = CPUs busy with anything outside the bench's processes.\n" +
      "Absolute figures depend on the machine; compare the ratios.",
  );
  const busiest = Math.max(
    ...Object.values(results).flatMap((r) => Object.values(r.median).map((t) => t.otherBusyCores)),
    ...(protocols?.result.cells.map((c) => c.median.otherBusyCores) ?? []),
    ...[...(cache?.miss ?? []), ...(cache?.bypass ?? []), ...(cascade ?? []), ...(similarity?.local ?? []), ...(similarity?.similarity ?? []), ...(scale ? [scale.first, scale.last] : [])].flatMap((p) => [p.a.median.otherBusyCores, p.b.median.otherBusyCores]),
  );
  if (busiest > 0.25) console.log(`note: up to ${f(busiest, 2)} CPUs were busy with other work during the runs; expect noisy figures.`);

  const json = {
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? "unknown", node: process.version, platform: process.platform },
    options: { ...o, out: undefined },
    targets: stack.targets.map((t) => ({ name: t.name, description: t.description })),
    workloads: results,
    bedrockStreaming: protocols?.result,
    cache,
    cascade,
    similarity,
    scale,
    streams: streamed.streams,
    soak: soaked.soak,
    problems,
  };
  mkdirSync(dirname(o.out), { recursive: true });
  writeFileSync(o.out, `${JSON.stringify(json, null, 2)}\n`);
  console.log(`results: ${o.out}`);

  if (problems.length > 0) {
    console.error(`\nBENCH FAILED: ${problems.length} run(s) had errors; the figures above are not valid:\n  ${problems.join("\n  ")}`);
    return 1;
  }
  return 0;
}

await runBench(main);
