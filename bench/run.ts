/**
 * `npm run bench`: Sluice against the provider simulator directly and against a null gateway on the
 * same runtime, under the same closed-loop load: chat completions, and MCP tool calls to the
 * simulator's MCP server; Sluice streaming from an OpenAI Chat backend (SSE) against a Bedrock
 * ConverseStream one (binary event stream); a response-cache hit against a buffered miss; and a
 * cascade step against a buffered request. See docs/performance.md.
 *
 *   npm run bench -- [--duration 5] [--warmup 1] [--concurrency 32] [--runs 3] [--quick]
 *                    [--buffered-tokens 16] [--stream-tokens 32] [--long-stream-tokens 256]
 *                    [--no-access-log] [--out FILE] [--stages buffered,streaming,unloaded,mcp,bedrock-streaming,cache,cascade]
 *
 * Every process runs on loopback and is stopped at the end, on error and on SIGINT/SIGTERM. Any
 * failed, incomplete or unexpected response makes the bench exit non-zero after printing the table.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { SIMULATOR_API_KEY } from "../local-stack/stack.ts";
import { BenchError, numberFlag, parseFlags, runBench } from "./entry.ts";
import { configureSimulator, exchange, runLoad, simJson, table } from "./load-runner.ts";
import { startNullGateway } from "./null-gateway.ts";
import { BACKEND_MODEL, BEDROCK_MODEL, DEMO_KEY, DEMO_TENANT, ECHO_PRICE_MICROS, OPEN_KEY, PUBLIC_MODEL, SIMULATOR_AWS_ARGS, SSE_MODEL, startBenchGateway, startBenchSimulator } from "./sluice-config.ts";
import { logRun, summarize, type RunRecord, type TargetSummary } from "./run-records.ts";
import { CACHE_CELLS, cacheStageReport, cacheStageResult, fillCache, UNIQUE_MARKER, uniquePrompt, type CacheStageResult, type CellSpec } from "./cache-stage.ts";
import { CASCADE_CELLS, CASCADE_QUALITY, cascadeStageReport, cascadeStageResult, type CascadeStageResult } from "./cascade-stage.ts";
import { cellName, type KeyName } from "./paired-stage.ts";
import { clockTicksPerSecond, procAvailable, resolveWorkerPid } from "./proc.ts";
import { concurrentStreams, soak, type SoakResult, type StreamsResult } from "./memory.ts";
import { cellKey, protocolStageReport, protocolStageResult, type ProtocolName, type ProtocolStageResult } from "./bedrock-streaming.ts";
import { countEventStreamFrames, countSseEvents, type UpstreamCount } from "./upstream-events.ts";
import { gatewayPath, invalidBody, MCP_SERVER, MCP_WORKLOAD, requestBody, requestHeaders, simulatorPath, unexpectedHeader, type ChatWorkload, type ExpectedHeader, type Workload } from "./workload.ts";

const USAGE = `Usage: npm run bench -- [options]
  --duration S          measured seconds per run (default 5)
  --warmup S            discarded warm-up seconds before each run (default 1)
  --concurrency N       requests in flight (default 32)
  --runs N              interleaved runs per target and workload; the median is reported (default 3)
  --quick               smoke test: 1 run of 1 s after 0.3 s warm-up (explicit flags still win)
  --buffered-tokens N   output tokens of the buffered workload (default 16)
  --stream-tokens N     output tokens of the streaming workload (default 32)
  --long-stream-tokens N  the bedrock-streaming stage's second answer size, for the cost of one more
                        event; 0 measures --stream-tokens only (default 256)
  --no-access-log       run Sluice with observability.accessLog off (default: as shipped, on)
  --stages LIST         load stages to run, of buffered, streaming, unloaded (buffered, one in
                        flight), mcp (MCP tools/call), bedrock-streaming (Sluice streaming from an
                        OpenAI Chat backend against a Bedrock ConverseStream one), cache (a cache hit
                        against a buffered miss) and cascade (a two-step cascade against a buffered
                        request) (default: all seven)
  --streams N           concurrent streams of the memory stage, 0 to skip (default 1000)
  --soak S              seconds of the soak stage (steady mixed load on Sluice), 0 to skip (default 180)
  --out FILE            where the JSON results go (default: the OS temp directory)
  --help                show this text`;

const REQUEST_TIMEOUT_MS = 30_000;

// ---------------------------------------------------------------------------------------------
// Options

interface Options {
  readonly durationMs: number;
  readonly warmupMs: number;
  readonly concurrency: number;
  readonly runs: number;
  readonly bufferedTokens: number;
  readonly streamTokens: number;
  readonly longStreamTokens: number;
  readonly accessLog: boolean;
  readonly out: string;
  readonly quick: boolean;
  readonly streams: number;
  readonly soakMs: number;
  readonly stages: readonly StageId[];
}

type StageId = "buffered" | "streaming" | "unloaded" | "mcp" | "bedrock-streaming" | "cache" | "cascade";
const STAGE_IDS: readonly StageId[] = ["buffered", "streaming", "unloaded", "mcp", "bedrock-streaming", "cache", "cascade"];

function stagesFlag(text: string | undefined): StageId[] {
  if (text === undefined) return [...STAGE_IDS];
  const ids = text.split(",").map((s) => s.trim());
  const unknown = ids.filter((id) => !(STAGE_IDS as readonly string[]).includes(id));
  if (unknown.length > 0 || ids.length === 0) throw new BenchError(`--stages takes a comma-separated list of ${STAGE_IDS.join(", ")}, got '${text}'\n${USAGE}`);
  return STAGE_IDS.filter((id) => ids.includes(id));
}

function parseOptions(): Options {
  const values = parseFlags(
    {
      duration: { type: "string" },
      warmup: { type: "string" },
      concurrency: { type: "string" },
      runs: { type: "string" },
      quick: { type: "boolean" },
      "buffered-tokens": { type: "string" },
      "stream-tokens": { type: "string" },
      "long-stream-tokens": { type: "string" },
      "no-access-log": { type: "boolean" },
      streams: { type: "string" },
      soak: { type: "string" },
      stages: { type: "string" },
      out: { type: "string" },
      help: { type: "boolean" },
    },
    USAGE,
  );
  const quick = values.quick === true;
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  return {
    durationMs: Math.round(numberFlag("duration", values.duration, quick ? 1 : 5, 0.2, 600, false) * 1000),
    warmupMs: Math.round(numberFlag("warmup", values.warmup, quick ? 0.3 : 1, 0, 120, false) * 1000),
    concurrency: numberFlag("concurrency", values.concurrency, 32, 1, 1024, true),
    runs: numberFlag("runs", values.runs, quick ? 1 : 3, 1, 21, true),
    bufferedTokens: numberFlag("buffered-tokens", values["buffered-tokens"], 16, 1, 4096, true),
    streamTokens: numberFlag("stream-tokens", values["stream-tokens"], 32, 1, 4096, true),
    longStreamTokens: numberFlag("long-stream-tokens", values["long-stream-tokens"], 256, 0, 4096, true),
    accessLog: values["no-access-log"] !== true,
    out: values.out ?? join(tmpdir(), "sluice-bench", `results-${stamp}.json`),
    quick,
    streams: numberFlag("streams", values.streams, quick ? 100 : 1000, 0, 5000, true),
    soakMs: Math.round(numberFlag("soak", values.soak, quick ? 5 : 180, 0, 3600, false) * 1000),
    stages: stagesFlag(values.stages),
  };
}

// ---------------------------------------------------------------------------------------------
// Targets

type TargetName = "direct" | "null" | "sluice" | "sluice-open";
const TARGETS: readonly TargetName[] = ["direct", "null", "sluice", "sluice-open"];

/** Something a load runs against: a gateway's (or the simulator's) endpoint for a workload. */
interface Endpoint {
  readonly name: string;
  readonly description: string;
  /** The endpoint a workload's requests go to. */
  readonly url: (w: Workload) => string;
  readonly headers: Readonly<Record<string, string>>;
  readonly model: string;
  /** The process whose CPU time is "server CPU" (the simulator itself for `direct`). */
  readonly serverPid: number;
  readonly alive: () => boolean;
  readonly output: () => string;
  /** A header every answer must carry with a given value (or must not carry). */
  readonly expectHeader?: ExpectedHeader;
  /** Requests each client request makes to the simulator (default 1). */
  readonly upstreamPerRequest?: number;
  /** Every request asks a new prompt (the cache stage's miss): the body carries this marker. */
  readonly uniqueMarker?: string;
}

interface Target extends Endpoint {
  readonly name: TargetName;
}

interface Stack {
  readonly simUrl: string;
  readonly simPid: number;
  readonly targets: readonly Target[];
  /** Sluice's admin API, where the books are read. */
  readonly admin: { readonly url: string; readonly token: string };
  /** Sluice (open key) streaming from an OpenAI Chat backend and from a Bedrock one: the bedrock-streaming stage's. */
  readonly protocols: readonly ProtocolTarget[];
  /** A cell of the cache or cascade stage: Sluice, with either key, asked one kind of request. */
  readonly cell: (spec: CellSpec, key: KeyName) => Endpoint;
}

async function startStack(o: Options): Promise<Stack> {
  const bedrock = o.stages.includes("bedrock-streaming");
  console.log("starting the provider simulator …");
  // With the Bedrock stage, the simulator verifies every Bedrock request's SigV4 signature.
  const sim = await startBenchSimulator(["--history", "0", ...(bedrock ? SIMULATOR_AWS_ARGS : [])]);
  const simPid = sim.process.pid ?? 0;

  console.log("building the gateway bundle (when stale) and starting Sluice on workerd …");
  const looper = o.stages.includes("cache") || o.stages.includes("cascade");
  const sluice = await startBenchGateway(sim.url, { name: "Sluice (workerd)", accessLog: o.accessLog, mcp: o.stages.includes("mcp"), bedrock, looper });
  const sluicePid = resolveWorkerPid(sluice.process.pid ?? 0, "workerd");
  const viaSluice = (name: ProtocolName, model: string, description: string): ProtocolTarget => ({
    name,
    description,
    url: (w) => `${sluice.publicUrl}${gatewayPath(w)}`,
    headers: { authorization: `Bearer ${OPEN_KEY}` },
    model,
    serverPid: sluicePid,
    alive: () => sluice.alive() && sim.alive(),
    output: sluice.output,
  });

  console.log("starting the null gateway on workerd …");
  const nul = await startNullGateway({ upstreamUrl: `${sim.url}/v1`, upstreamKey: SIMULATOR_API_KEY, upstreamModel: BACKEND_MODEL, upstreamMcpUrl: `${sim.url}${simulatorPath(MCP_WORKLOAD)}` });

  return {
    simUrl: sim.url,
    simPid,
    admin: { url: sluice.adminUrl, token: sluice.adminToken },
    cell: (spec, key) => ({
      ...viaSluice("sse", spec.model, `client → Sluice (${key} key) → ${spec.model}: ${spec.kind}`),
      name: cellName(spec.kind, key),
      headers: { authorization: `Bearer ${key === "open" ? OPEN_KEY : DEMO_KEY}`, ...spec.headers },
      expectHeader: spec.expectHeader,
      upstreamPerRequest: spec.upstreamPerRequest,
      ...(spec.unique ? { uniqueMarker: UNIQUE_MARKER } : {}),
    }),
    protocols: bedrock
      ? [
          viaSluice("sse", SSE_MODEL, "client → Sluice (open key) → simulator over OpenAI Chat: an SSE stream"),
          viaSluice("bedrock", BEDROCK_MODEL, "client → Sluice (open key) → simulator over Bedrock ConverseStream: SigV4-signed, a binary event stream"),
        ]
      : [],
    targets: [
      {
        name: "direct",
        description: "client → simulator",
        url: (w) => `${sim.url}${simulatorPath(w)}`,
        headers: { authorization: `Bearer ${SIMULATOR_API_KEY}` },
        model: BACKEND_MODEL,
        serverPid: simPid,
        alive: sim.alive,
        output: sim.output,
      },
      {
        name: "null",
        description: "client → null-gateway Worker (workerd) → simulator",
        url: (w) => `${nul.url}${gatewayPath(w)}`,
        headers: { authorization: `Bearer ${DEMO_KEY}` },
        model: PUBLIC_MODEL,
        serverPid: resolveWorkerPid(nul.pid, "workerd"),
        alive: () => nul.alive() && sim.alive(),
        output: nul.output,
      },
      {
        name: "sluice",
        description: "client → Sluice (workerd) → simulator",
        url: (w) => `${sluice.publicUrl}${gatewayPath(w)}`,
        headers: { authorization: `Bearer ${DEMO_KEY}` },
        model: PUBLIC_MODEL,
        serverPid: resolveWorkerPid(sluice.process.pid ?? 0, "workerd"),
        alive: () => sluice.alive() && sim.alive(),
        output: sluice.output,
      },
      {
        name: "sluice-open",
        description: "the same Sluice process, a key of a tenant without budgets",
        url: (w) => `${sluice.publicUrl}${gatewayPath(w)}`,
        headers: { authorization: `Bearer ${OPEN_KEY}` },
        model: PUBLIC_MODEL,
        serverPid: resolveWorkerPid(sluice.process.pid ?? 0, "workerd"),
        alive: () => sluice.alive() && sim.alive(),
        output: sluice.output,
      },
    ],
  };
}

// ---------------------------------------------------------------------------------------------
// Simulator control

interface SimStats {
  readonly total: number;
  readonly outcomes: Readonly<Record<string, number>>;
}

const simStats = (simUrl: string) => simJson(simUrl, "GET", "/__sim/stats") as Promise<SimStats>;

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
// Running load

/** A target's request body for `w`; with a marker for the load generator to make each prompt new, when the target asks for that. */
const bodyOf = (t: Endpoint, w: Workload): string => (t.uniqueMarker === undefined ? requestBody(w, t.model) : uniquePrompt(requestBody(w, t.model)));

/** One request per target, checked like the load generator checks them, so a broken target fails fast and readably. */
async function preflight(t: Endpoint, w: Workload): Promise<void> {
  let status: number;
  let text: string;
  let headers: Awaited<ReturnType<typeof exchange>>["headers"];
  try {
    ({ status, text, headers } = await exchange(t.url(w), "POST", requestHeaders(w, t.headers), bodyOf(t, w).replace(UNIQUE_MARKER, "preflight"), REQUEST_TIMEOUT_MS));
  } catch (err) {
    throw new BenchError(`${t.name}: the ${w.name} check request failed: ${String(err)}\n${t.output()}`);
  }
  const problem = status < 200 || status > 299 ? `HTTP ${status}` : (invalidBody(w, text) ?? (t.expectHeader && unexpectedHeader(t.expectHeader, headers[t.expectHeader.name])));
  if (problem !== undefined) throw new BenchError(`${t.name}: the ${w.name} check request got ${problem}:\n${text.slice(0, 2000)}\n${t.output()}`);
}

async function oneRun(stack: Stack, t: Endpoint, w: Workload, o: Options, run: number, concurrency: number): Promise<RunRecord> {
  const before = await simStats(stack.simUrl);
  const result = await runLoad({
    url: t.url(w),
    headers: t.headers,
    body: bodyOf(t, w),
    ...(t.uniqueMarker ? { uniqueMarker: t.uniqueMarker } : {}),
    workload: w,
    ...(t.expectHeader ? { expectHeader: t.expectHeader } : {}),
    concurrency,
    warmupMs: o.warmupMs,
    durationMs: o.durationMs,
    requestTimeoutMs: REQUEST_TIMEOUT_MS,
    cpuPids: { server: t.serverPid, simulator: stack.simPid },
    clockTicksPerSecond: TICKS,
  });
  if (!t.alive()) throw new BenchError(`${t.name}: a server process exited during the run:\n${t.output()}`);
  const after = await simStats(stack.simUrl);
  const anomalies: Record<string, number> = {};
  for (const [kind, n] of Object.entries(after.outcomes)) {
    const delta = n - (before.outcomes[kind] ?? 0);
    if (kind !== "completed" && delta > 0) anomalies[kind] = delta;
  }
  const per = (ms: number | undefined) => (result.requests > 0 && ms !== undefined ? ms / result.requests : Number.NaN);
  return {
    run,
    result,
    serverCpuMsPerReq: per(result.cpuMs.server),
    simCpuMsPerReq: per(result.cpuMs.simulator),
    clientCpuMsPerReq: per(result.clientCpuMs),
    upstreamAnomalies: anomalies,
    upstreamRequests: after.total - before.total,
    upstreamPerRequest: t.upstreamPerRequest ?? 1,
  };
}

// ---------------------------------------------------------------------------------------------
// The report

interface Ratios {
  readonly throughputVsDirect: number;
  readonly throughputVsNull: number;
  readonly p50VsNull: number;
  readonly p50AddedVsNullMs: number;
  readonly cpuPerReqVsNull: number;
  readonly cpuPerReqAddedVsNullMs: number;
  /** The key without budgets against the null gateway. */
  readonly openCpuPerReqVsNull: number;
  /** What strict budgets cost: the budgeted key against the open one, same process. */
  readonly budgetedCpuVsOpen: number;
  /** Latency each key adds over calling the simulator directly, budgeted against open (p50). */
  readonly budgetedAddedP50VsOpen: number;
  readonly addedP50Ms: { readonly sluice: number; readonly open: number; readonly null: number };
}

function ratios(s: Record<TargetName, TargetSummary>): Ratios {
  const added = (t: TargetName) => s[t].p50Ms - s.direct.p50Ms;
  return {
    throughputVsDirect: s.sluice.rps / s.direct.rps,
    throughputVsNull: s.sluice.rps / s.null.rps,
    p50VsNull: s.sluice.p50Ms / s.null.p50Ms,
    p50AddedVsNullMs: s.sluice.p50Ms - s.null.p50Ms,
    cpuPerReqVsNull: s.sluice.serverCpuMsPerReq / s.null.serverCpuMsPerReq,
    cpuPerReqAddedVsNullMs: s.sluice.serverCpuMsPerReq - s.null.serverCpuMsPerReq,
    openCpuPerReqVsNull: s["sluice-open"].serverCpuMsPerReq / s.null.serverCpuMsPerReq,
    budgetedCpuVsOpen: s.sluice.serverCpuMsPerReq / s["sluice-open"].serverCpuMsPerReq,
    budgetedAddedP50VsOpen: added("sluice") / added("sluice-open"),
    addedP50Ms: { sluice: added("sluice"), open: added("sluice-open"), null: added("null") },
  };
}

const f = (n: number, digits: number) => (Number.isFinite(n) ? n.toFixed(digits) : "n/a");

/** One measured stage: a workload at a concurrency. */
interface Stage {
  readonly id: StageId;
  readonly label: string;
  readonly workload: Workload;
  readonly concurrency: number;
}

function report(st: Stage, o: Options, s: Record<TargetName, TargetSummary>, r: Ratios): string {
  const w = st.workload;
  const header = ["target", "req/s", "p50 ms", "p99 ms", ...(w.stream ? ["TTFB p50 ms"] : []), "server CPU ms/req", "sim CPU ms/req", "other load", "errors"];
  const rows = TARGETS.map((name) => {
    const t = s[name];
    return [
      name,
      f(t.rps, 0),
      f(t.p50Ms, 2),
      f(t.p99Ms, 2),
      ...(w.stream ? [f(t.ttfbP50Ms, 2)] : []),
      name === "direct" ? `${f(t.serverCpuMsPerReq, 3)} (sim)` : f(t.serverCpuMsPerReq, 3),
      f(t.simCpuMsPerReq, 3),
      f(t.otherBusyCores, 2),
      t.errors > 0 ? `${t.errors} !!` : "0",
    ];
  });
  const what =
    w.name === "mcp"
      ? `tools/call of the simulator's echo tool (2026-07-28) at /mcp/${MCP_SERVER}, direct at the simulator's /mcp`
      : w.name === "embeddings"
        ? "one embedding of the prompt"
        : `${w.stream ? "stream: true + include_usage, " : ""}${w.tokens} output tokens`;
  const title = `${st.label}: ${what}, concurrency ${st.concurrency}, median of ${o.runs} × ${o.durationMs / 1000} s`;
  return [
    title,
    table(header, rows, 1),
    `sluice vs null:   throughput ×${f(r.throughputVsNull, 2)}, p50 ×${f(r.p50VsNull, 2)} (+${f(r.p50AddedVsNullMs, 2)} ms), workerd CPU/req ×${f(r.cpuPerReqVsNull, 2)} (+${f(r.cpuPerReqAddedVsNullMs, 3)} ms)`,
    `open key vs null: workerd CPU/req ×${f(r.openCpuPerReqVsNull, 2)}`,
    `budgeted vs open key (same process): workerd CPU/req ×${f(r.budgetedCpuVsOpen, 2)}, p50 added over direct ×${f(r.budgetedAddedP50VsOpen, 2)} ` +
      `(budgeted +${f(r.addedP50Ms.sluice, 2)} ms, open +${f(r.addedP50Ms.open, 2)} ms, null +${f(r.addedP50Ms.null, 2)} ms)`,
    // Sluice's own account (whole milliseconds per answer, so the mean is the figure to compare) beside the bench's.
    `Server-Timing gw (sluice's own, to the headers): budgeted mean ${f(s.sluice.serverTimingGw.meanMs, 2)} ms (p50 ${f(s.sluice.serverTimingGw.p50Ms, 0)}), ` +
      `open mean ${f(s["sluice-open"].serverTimingGw.meanMs, 2)} ms (p50 ${f(s["sluice-open"].serverTimingGw.p50Ms, 0)}); the bench's TTFB p50 added over direct: ` +
      `budgeted +${f(s.sluice.ttfbP50Ms - s.direct.ttfbP50Ms, 2)} ms, open +${f(s["sluice-open"].ttfbP50Ms - s.direct.ttfbP50Ms, 2)} ms`,
  ].join("\n");
}

// ---------------------------------------------------------------------------------------------
// Memory

const mib = (kib: number) => f(kib / 1024, 1);

/**
 * The concurrent-streams stage (every workerd target, one after the other) and the soak stage
 * (Sluice, budgeted key, buffered and streaming load at once).
 */
async function streamsStage(stack: Stack, o: Options, streaming: ChatWorkload, problems: string[]): Promise<{ reports: string[]; streams: Partial<Record<TargetName, StreamsResult>> }> {
  const reports: string[] = [];
  const streams: Partial<Record<TargetName, StreamsResult>> = {};
  if (o.streams > 0) {
    // 20 tokens 100 ms apart: every stream stays open about 2 s, so all of them overlap.
    await simJson(stack.simUrl, "PUT", "/__sim/config", { tokens: 20, "latency-ms": 0, "ttft-ms": 0, "token-interval-ms": 100 });
    // First, on fresh processes: memory a process took once is rarely given back, so a process
    // measured after other load shows less. The open key shares Sluice's process: not measured here.
    for (const t of stack.targets) {
      if (t.name === "direct" || t.name === "sluice-open") continue;
      console.log(`streams   ${o.streams} concurrent ${t.name} …`);
      const r = await concurrentStreams({ url: t.url(streaming), headers: t.headers, body: requestBody(streaming, t.model), n: o.streams, pid: t.serverPid, settleMs: 3_000 });
      streams[t.name] = r;
      if (r.ok !== r.streams) problems.push(`streams ${t.name}: ${r.streams - r.ok} of ${r.streams} failed: ${r.errors.join("; ")}`);
    }
    const rows = (Object.keys(streams) as TargetName[]).map((name) => {
      const r = streams[name]!;
      return [name, mib(r.rssBeforeKiB), mib(r.rssPeakKiB), mib(r.rssAfterKiB), f(r.perStreamKiB, 0), f(r.firstByteP50Ms, 0), f(r.firstByteMaxMs, 0), r.ok === r.streams ? "0" : `${r.streams - r.ok} !!`];
    });
    const n = streams.null?.perStreamKiB ?? Number.NaN;
    reports.push(
      [
        `concurrent streams: ${o.streams} at once, each 20 tokens 100 ms apart`,
        table(["target", "RSS before MiB", "peak MiB", "after MiB", "KiB/stream", "first byte p50 ms", "max ms", "errors"], rows, 1),
        `memory per stream vs null: sluice ×${f((streams.sluice?.perStreamKiB ?? Number.NaN) / n, 2)}`,
      ].join("\n"),
    );
  }
  return { reports, streams };
}

async function soakStage(stack: Stack, o: Options, streaming: ChatWorkload, problems: string[]): Promise<{ reports: string[]; soak: SoakResult | undefined }> {
  const reports: string[] = [];
  let soaked: SoakResult | undefined;
  if (o.soakMs > 0) {
    const sluice = stack.targets.find((t) => t.name === "sluice")!;
    await configureSimulator(stack.simUrl, streaming);
    console.log(`soak      ${o.soakMs / 1000} s of buffered and streaming load on Sluice (budgeted key) …`);
    const run = (w: Workload) =>
      runLoad({ url: sluice.url(w), headers: sluice.headers, body: requestBody(w, sluice.model), workload: w, concurrency: 8, warmupMs: 0, durationMs: o.soakMs, requestTimeoutMs: REQUEST_TIMEOUT_MS, cpuPids: { server: sluice.serverPid }, clockTicksPerSecond: TICKS });
    const load = Promise.all([run({ name: "buffered", stream: false, tokens: streaming.tokens }), run(streaming)]);
    soaked = await soak(sluice.serverPid, load, { warmupMs: Math.min(30_000, o.soakMs / 5), everyMs: Math.max(1_000, o.soakMs / 60) });
    const results = await load;
    const errors = results.reduce((n, r) => n + r.errors, 0);
    if (errors > 0) problems.push(`soak: ${errors} failed requests: ${results.flatMap((r) => r.errorSamples).slice(0, 3).join("; ")}`);
    reports.push(
      [
        `soak: ${o.soakMs / 1000} s, buffered and streaming at 8 in flight each, Sluice with the budgeted key (${results.reduce((n, r) => n + r.requests, 0)} requests, ${errors} errors)`,
        `RSS after warm-up ${mib(soaked.afterWarmupKiB)} MiB, max ${mib(soaked.maxKiB)} MiB, at the end ${mib(soaked.endKiB)} MiB: growth ${soaked.growthKiB >= 0 ? "+" : ""}${mib(soaked.growthKiB)} MiB`,
      ].join("\n"),
    );
  }
  return { reports, soak: soaked };
}

// ---------------------------------------------------------------------------------------------
// Bedrock streaming: the binary event stream against SSE

/** Sluice (open key) streaming from one backend protocol. */
interface ProtocolTarget extends Endpoint {
  readonly name: ProtocolName;
}

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
  const cells = KEYS.flatMap((key) => specs.map((spec) => ({ spec, t: stack.cell(spec, key) })));
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

const TICKS = clockTicksPerSecond();

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
      { id: "mcp", label: "mcp", workload: MCP_WORKLOAD, concurrency: o.concurrency },
    ] satisfies Stage[]
  ).filter((st) => o.stages.includes(st.id));
  // bedrock-streaming runs on its own targets (Sluice's two backend protocols), after these.
  const protocolsStage = o.stages.includes("bedrock-streaming");
  const workloads = [...new Set(stages.map((st) => st.workload))];
  const stack = await startStack(o);

  for (const w of workloads) {
    await configureSimulator(stack.simUrl, w);
    for (const t of stack.targets) await preflight(t, w);
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
      for (const t of stack.targets) {
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

  let cache: CacheStageResult<RunRecord, TargetSummary> | undefined;
  if (o.stages.includes("cache")) {
    await configureSimulator(stack.simUrl, buffered);
    cache = cacheStageResult(KEYS, await pairedStage(stack, o, "cache", CACHE_CELLS, buffered, problems), summarize);
    reports.push(cacheStageReport(cache, o));
  }
  let cascade: CascadeStageResult<RunRecord, TargetSummary> | undefined;
  if (o.stages.includes("cascade")) {
    // Every model unsure: the first step always escalates, the second is accepted as it is.
    await simJson(stack.simUrl, "PUT", "/__sim/config", { tokens: buffered.tokens, "latency-ms": 0, "ttft-ms": 0, "token-interval-ms": 0, quality: CASCADE_QUALITY });
    cascade = cascadeStageResult(KEYS, await pairedStage(stack, o, "cascade", CASCADE_CELLS, buffered, problems), summarize);
    reports.push(cascadeStageReport(cascade, o));
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
    ...[...(cache?.miss ?? []), ...(cache?.bypass ?? []), ...(cascade ?? [])].flatMap((p) => [p.a.median.otherBusyCores, p.b.median.otherBusyCores]),
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
