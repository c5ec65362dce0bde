/**
 * `npm run bench:ledger`: what the strict budget ledger costs. See docs/performance.md.
 *
 *   npm run bench:ledger -- [--duration 3] [--warmup 1] [--runs 3] [--quick] [--concurrency 1,16,64]
 *                           [--stripes 4,8] [--gateway-concurrency 4] [--tokens 16] [--out FILE]
 *
 * 1. The ledger alone: a bench-only Worker (`ledger-worker/`) serving the real BudgetLedger Durable
 *    Object on `workerd serve`, each request making one attempt's ledger calls through the real
 *    client, next to a baseline route that skips the ledger; one object, and a tenant striped over
 *    several; closed-loop load at a few concurrencies.
 * 2. One ledger hop in a real gateway call: Sluice and the provider simulator, two keys that differ
 *    only in that one's tenant has budgets, identical buffered chat requests, unloaded (sequential,
 *    the two keys interleaved) and under light closed-loop load.
 *
 * Everything runs on loopback and is stopped at the end, on error and on SIGINT/SIGTERM. A failed
 * or unexpected response, or books that do not match the requests sent, make it exit non-zero.
 */
import { Agent } from "node:http";
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { performance } from "node:perf_hooks";
import { stopOne } from "./children.ts";
import { BenchError, numberFlag, parseFlags, runBench } from "./entry.ts";
import { exchange, runLoad, table, type Answer } from "./load-runner.ts";
import type { LoadResult } from "./load-spec.ts";
import { GATEWAY_KEYS, GATEWAY_TENANTS, startLedgerGateway, startLedgerWorker, type LedgerGatewayStack, type RunningLedgerWorker } from "./ledger-stack.ts";
import { RESERVE_AMOUNT, SETTLE_AMOUNT, type LedgerBooks } from "./ledger-worker/handler.ts";
import { clockTicksPerSecond, procAvailable, resolveWorkerPid } from "./proc.ts";
import { Samples, median, percentile } from "./stats.ts";
import { invalidBody, type Workload } from "./workload.ts";

const USAGE = `Usage: npm run bench:ledger -- [options]
  --duration S              measured seconds per cell (default 3)
  --warmup S                discarded warm-up seconds before each cell (default 1)
  --runs N                  interleaved runs; the median is reported (default 3)
  --quick                   smoke test: 1 run of 0.3 s after 0.1 s warm-up (explicit flags still win)
  --concurrency LIST        concurrencies for the ledger Worker (default 1,16,64)
  --stripes LIST            stripe counts tried besides one object (default 4,8)
  --gateway-concurrency N   the gateway's light load (default 4)
  --tokens N                output tokens of the simulator's answers (default 16)
  --out FILE                where the JSON results go (default: the OS temp directory)
  --help                    show this text`;

const REQUEST_TIMEOUT_MS = 30_000;
/** The load generator checks a buffered chat completion; the ledger Worker answers in that shape. */
const BUFFERED: Workload = { name: "buffered", stream: false, tokens: 0 };
const PUBLIC_MODEL = "sluice-chat";
/**
 * An explicit output cap, so the budgeted key's request is not given an injected one (which would
 * change what goes upstream and add a header): both keys send and receive exactly the same.
 */
const MAX_TOKENS = 64;
const PROMPT = "Hello from the ledger benchmark. Please answer briefly.";

// ---------------------------------------------------------------------------------------------
// Options

interface Options {
  readonly durationMs: number;
  readonly warmupMs: number;
  readonly runs: number;
  readonly concurrencies: readonly number[];
  readonly stripes: readonly number[];
  readonly gatewayConcurrency: number;
  readonly tokens: number;
  readonly out: string;
  readonly quick: boolean;
}

function parseOptions(): Options {
  const values = parseFlags(
    {
      duration: { type: "string" },
      warmup: { type: "string" },
      runs: { type: "string" },
      quick: { type: "boolean" },
      concurrency: { type: "string" },
      stripes: { type: "string" },
      "gateway-concurrency": { type: "string" },
      tokens: { type: "string" },
      out: { type: "string" },
      help: { type: "boolean" },
    },
    USAGE,
  );
  const quick = values.quick === true;
  const list = (flag: string, text: string | undefined, fallback: readonly number[], min: number, max: number) =>
    text === undefined ? fallback : [...new Set(text.split(",").map((t) => numberFlag(flag, t.trim(), 0, min, max, true)))];
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  return {
    durationMs: Math.round(numberFlag("duration", values.duration, quick ? 0.3 : 3, 0.1, 600, false) * 1000),
    warmupMs: Math.round(numberFlag("warmup", values.warmup, quick ? 0.1 : 1, 0, 120, false) * 1000),
    runs: numberFlag("runs", values.runs, quick ? 1 : 3, 1, 21, true),
    concurrencies: list("concurrency", values.concurrency, [1, 16, 64], 1, 1024),
    // One object is always measured; these are the striped variants (the client's limit is 64).
    stripes: list("stripes", values.stripes, [4, 8], 2, 64),
    gatewayConcurrency: numberFlag("gateway-concurrency", values["gateway-concurrency"], 4, 1, 256, true),
    tokens: numberFlag("tokens", values.tokens, 16, 1, MAX_TOKENS, true),
    out: values.out ?? join(tmpdir(), "sluice-bench", `ledger-${stamp}.json`),
    quick,
  };
}

// ---------------------------------------------------------------------------------------------
// Load and control requests

const TICKS = clockTicksPerSecond();

async function getJson<T>(url: string, headers: Record<string, string> = {}): Promise<T> {
  const res = await exchange(url, "GET", headers, undefined, REQUEST_TIMEOUT_MS);
  if (res.status !== 200) throw new BenchError(`GET ${url} answered ${res.status}: ${res.text.slice(0, 500)}`);
  return JSON.parse(res.text) as T;
}

// ---------------------------------------------------------------------------------------------
// Statistics

interface Latency {
  readonly p50: number;
  readonly p99: number;
}

function latencyOf(s: Samples): Latency {
  const sorted = s.sorted();
  const r = (v: number) => Math.round(v * 1000) / 1000;
  return { p50: r(percentile(sorted, 50)), p99: r(percentile(sorted, 99)) };
}

/** What one load-generator cell yields, flattened for medians and the JSON. */
interface CellRun {
  readonly run: number;
  readonly rps: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly meanMs: number;
  /** workerd CPU (user + system) per measured request, ms. */
  readonly serverCpuMsPerReq: number;
  readonly otherBusyCores: number;
  readonly requests: number;
  readonly errors: number;
  readonly result: LoadResult;
}

interface CellSummary {
  readonly rps: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** Far above p50 when a few requests wait much longer than most (unfair queueing). */
  readonly meanMs: number;
  readonly serverCpuMsPerReq: number;
  readonly otherBusyCores: number;
  readonly requests: number;
  readonly errors: number;
}

function cellRun(run: number, result: LoadResult, extraErrors: number): CellRun {
  return {
    run,
    rps: result.rps,
    p50Ms: result.latencyMs.p50,
    p99Ms: result.latencyMs.p99,
    meanMs: result.latencyMs.mean,
    serverCpuMsPerReq: result.requests > 0 ? (result.cpuMs["server"] ?? Number.NaN) / result.requests : Number.NaN,
    otherBusyCores: result.otherBusyCores,
    requests: result.requests,
    errors: result.errors + result.warmup.errors + extraErrors,
    result,
  };
}

function summarize(runs: readonly CellRun[]): CellSummary {
  const m = (f: (r: CellRun) => number) => median(runs.map(f));
  return {
    rps: m((r) => r.rps),
    p50Ms: m((r) => r.p50Ms),
    p99Ms: m((r) => r.p99Ms),
    meanMs: m((r) => r.meanMs),
    serverCpuMsPerReq: m((r) => r.serverCpuMsPerReq),
    otherBusyCores: m((r) => r.otherBusyCores),
    requests: runs.reduce((a, r) => a + r.requests, 0),
    errors: runs.reduce((a, r) => a + r.errors, 0),
  };
}

function loadErrors(what: string, res: LoadResult): string | undefined {
  if (res.errors + res.warmup.errors === 0) return undefined;
  const kinds = Object.entries(res.errorKinds).map(([k, n]) => `${n} × ${k}`);
  if (res.warmup.errors > 0) kinds.push(`${res.warmup.errors} × error during warm-up`);
  return `${what}: ${kinds.join(", ")}${res.errorSamples.length ? `\n    e.g. ${res.errorSamples.join("\n    e.g. ")}` : ""}`;
}

// ---------------------------------------------------------------------------------------------
// Part 1: the ledger Worker

/** One measured route of the ledger Worker. */
interface Variant {
  readonly name: string;
  readonly route: "baseline" | "reserve" | "reserve-settle";
  readonly stripes: number;
}

function variants(o: Options): Variant[] {
  return [
    { name: "baseline (no ledger)", route: "baseline", stripes: 1 },
    { name: "reserve, 1 object", route: "reserve", stripes: 1 },
    { name: "reserve+settle, 1 object", route: "reserve-settle", stripes: 1 },
    ...o.stripes.map((n): Variant => ({ name: `reserve+settle, ${n} stripes`, route: "reserve-settle", stripes: n })),
  ];
}

const cellKey = (v: Variant, concurrency: number) => `${v.name} @${concurrency}`;

/**
 * Checks the books of one cell's fresh tenant: every request answered must have been reserved
 * (and settled) exactly once, so a route that skipped the ledger cannot pass for a fast one.
 */
async function checkBooks(w: RunningLedgerWorker, v: Variant, tenant: string, answered: number): Promise<string | undefined> {
  if (v.route === "baseline") return undefined;
  const b = await getJson<LedgerBooks>(`${w.url}/books/${tenant}/${v.stripes}`);
  const want: LedgerBooks =
    v.route === "reserve"
      ? { spentTokens: 0, heldTokens: answered * RESERVE_AMOUNT.tokens, pendingTokens: 0 }
      : { spentTokens: answered * SETTLE_AMOUNT.tokens, heldTokens: 0, pendingTokens: 0 };
  if (b.spentTokens === want.spentTokens && b.heldTokens === want.heldTokens && b.pendingTokens === want.pendingTokens) return undefined;
  return `books of ${tenant} do not match its ${answered} answered requests: got ${JSON.stringify(b)}, want ${JSON.stringify(want)}`;
}

interface LedgerPart {
  readonly runs: Record<string, CellRun[]>;
  readonly median: Record<string, CellSummary>;
}

async function ledgerPart(o: Options, problems: string[]): Promise<LedgerPart> {
  console.log("building the ledger Worker and starting it on workerd …");
  const w = await startLedgerWorker();
  const pid = resolveWorkerPid(w.pid, "workerd");
  const vs = variants(o);
  const preflight = await exchange(`${w.url}/reserve-settle/preflight/1`, "POST", { "content-type": "application/json" }, "{}", REQUEST_TIMEOUT_MS);
  if (preflight.status !== 200) throw new BenchError(`the ledger Worker's check request got HTTP ${preflight.status}: ${preflight.text}\n${w.output()}`);
  console.log(
    `ledger Worker answers; ${o.runs} runs × ${o.concurrencies.length} concurrencies × ${vs.length} routes, ` +
      `${o.warmupMs / 1000} s warm-up + ${o.durationMs / 1000} s each\n`,
  );
  const runs: Record<string, CellRun[]> = {};
  for (let run = 1; run <= o.runs; run++) {
    for (const c of o.concurrencies) {
      // Interleaved (every route at every concurrency once per run), so drift hits them alike.
      for (const v of vs) {
        // A fresh tenant per cell: each starts from empty books, so no cell inherits another's rows.
        const tenant = `r${run}-c${c}-${v.route}-s${v.stripes}`;
        const path = v.route === "baseline" ? "" : `/${tenant}/${v.stripes}`;
        const result = await runLoad({
          url: `${w.url}/${v.route}${path}`,
          headers: {},
          body: "{}",
          workload: BUFFERED,
          concurrency: c,
          warmupMs: o.warmupMs,
          durationMs: o.durationMs,
          requestTimeoutMs: REQUEST_TIMEOUT_MS,
          cpuPids: { server: pid },
          clockTicksPerSecond: TICKS,
        });
        if (!w.alive()) throw new BenchError(`the ledger Worker exited during a run:\n${w.output()}`);
        const where = `ledger run ${run} c=${c} ${v.name}`;
        const failed = loadErrors(where, result);
        const books = failed === undefined ? await checkBooks(w, v, tenant, result.requests + result.warmup.requests) : undefined;
        if (failed !== undefined) problems.push(failed);
        if (books !== undefined) problems.push(`${where}: ${books}`);
        const rec = cellRun(run, result, books === undefined ? 0 : 1);
        (runs[cellKey(v, c)] ??= []).push(rec);
        console.log(
          `run ${run}/${o.runs} c=${String(c).padEnd(3)} ${v.name.padEnd(26)} ${f(rec.rps, 0).padStart(6)} req/s  ` +
            `p50 ${f(rec.p50Ms, 2)} ms  p99 ${f(rec.p99Ms, 2)} ms  workerd CPU ${f(rec.serverCpuMsPerReq, 3)} ms/req  ` +
            `${rec.errors > 0 ? `ERRORS ${rec.errors}` : "0 errors"}`,
        );
      }
    }
  }
  await stopOne(w);
  return { runs, median: Object.fromEntries(Object.entries(runs).map(([k, r]) => [k, summarize(r)])) };
}

// ---------------------------------------------------------------------------------------------
// Part 2: one ledger hop in the gateway

type KeyRole = keyof typeof GATEWAY_KEYS;
const ROLES: readonly KeyRole[] = ["open", "budgeted"];

const chatBody = JSON.stringify({ model: PUBLIC_MODEL, max_tokens: MAX_TOKENS, messages: [{ role: "user", content: PROMPT }] });
const chatHeaders = (role: KeyRole) => ({ authorization: `Bearer ${GATEWAY_KEYS[role]}`, "content-type": "application/json" });

/** Why an answer of the gateway is not the complete, plain one both keys must get; undefined when it is. */
function badAnswer(a: Answer): string | undefined {
  if (a.status !== 200) return `HTTP ${a.status}: ${a.text.slice(0, 300)}`;
  const invalid = invalidBody(BUFFERED, a.text);
  if (invalid !== undefined) return `${invalid}: ${a.text.slice(0, 300)}`;
  // A strict route never goes ahead unchecked; this would mean the ledger was not consulted.
  if (a.headers["x-sluice-budget"] !== undefined) return `x-sluice-budget: ${String(a.headers["x-sluice-budget"])}`;
  if (a.headers["x-sluice-max-output-tokens"] !== undefined) return "an output cap was injected, so the two keys' requests differ";
  return undefined;
}

interface UnloadedRun {
  readonly run: number;
  readonly requests: Record<KeyRole, number>;
  readonly latencyMs: Record<KeyRole, Latency>;
}

/**
 * A pause before each unloaded request, so the previous one's work after its response (the
 * budgeted key's settlement runs under waitUntil on the same thread) is over and every request
 * meets an idle gateway instead of paying for its predecessor.
 */
const UNLOADED_GAP_MS = 5;

/**
 * Sequential requests on one keep-alive connection, alternating the keys in ABBA order so neither
 * key always follows the other: each pair sees the same machine state, and the difference of the
 * two keys' latencies is the ledger hop.
 */
async function unloadedRun(url: string, o: Options, run: number, problems: string[]): Promise<UnloadedRun & { sent: Record<KeyRole, number> }> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const sent: Record<KeyRole, number> = { open: 0, budgeted: 0 };
  const one = async (role: KeyRole, samples: Samples | undefined) => {
    await new Promise((r) => setTimeout(r, UNLOADED_GAP_MS));
    const start = performance.now();
    sent[role]++;
    let a: Answer;
    try {
      a = await exchange(url, "POST", chatHeaders(role), chatBody, REQUEST_TIMEOUT_MS, agent);
    } catch (err) {
      problems.push(`gateway unloaded run ${run} ${role}: ${String(err)}`);
      return;
    }
    const elapsed = performance.now() - start;
    const bad = badAnswer(a);
    if (bad !== undefined) problems.push(`gateway unloaded run ${run} ${role}: ${bad}`);
    else samples?.push(elapsed);
  };
  try {
    const phase = async (ms: number, samples: Record<KeyRole, Samples> | undefined) => {
      const until = performance.now() + ms;
      for (let i = 0; performance.now() < until; i++) {
        const order: readonly KeyRole[] = i % 2 === 0 ? ["budgeted", "open"] : ["open", "budgeted"];
        for (const role of order) await one(role, samples?.[role]);
      }
    };
    await phase(o.warmupMs, undefined);
    const samples = { open: new Samples(), budgeted: new Samples() };
    await phase(o.durationMs, samples);
    return {
      run,
      requests: { open: samples.open.size, budgeted: samples.budgeted.size },
      latencyMs: { open: latencyOf(samples.open), budgeted: latencyOf(samples.budgeted) },
      sent,
    };
  } finally {
    agent.destroy();
  }
}

interface SimStats {
  readonly total: number;
  readonly outcomes: Readonly<Record<string, number>>;
}

interface UsageRow {
  readonly attempts: number;
  readonly settledTokens: number;
  readonly pendingTokens: number;
}

/**
 * The gateway's books after the stage: no attempt left held or pending, and exactly one settled
 * attempt per budgeted request, each at the tokens the simulator reported. The usage report scans
 * at most 10 000 attempts per call, so the stage is read in one-second slices.
 */
async function checkGatewayBooks(s: LedgerGatewayStack, from: number, budgetedRequests: number, tokensPerRequest: number): Promise<string[]> {
  const admin = `${s.gateway.adminUrl}/admin/budgets`;
  const auth = { authorization: `Bearer ${s.adminToken}` };
  const out: string[] = [];
  const { tenants } = await getJson<{ tenants: { tenant: string }[] }>(admin, auth);
  const ids = tenants.map((t) => t.tenant);
  if (ids.length !== 1 || ids[0] !== GATEWAY_TENANTS.budgeted) out.push(`tenants on the ledger: ${JSON.stringify(ids)}, want only ${GATEWAY_TENANTS.budgeted}`);
  const tenant = `${admin}/${GATEWAY_TENANTS.budgeted}`;
  // Settlement runs after the response (waitUntil): give the last ones a moment.
  for (const until = Date.now() + 10_000; ; ) {
    const { attempts } = await getJson<{ attempts: unknown[] }>(`${tenant}/attempts?state=held&limit=1000`, auth);
    if (attempts.length === 0) break;
    if (Date.now() > until) {
      out.push(`${attempts.length} attempt(s) still held 10 s after the last request`);
      break;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const { pending } = await getJson<{ pending: unknown[] }>(`${tenant}/reconciliations?limit=1000`, auth);
  if (pending.length > 0) out.push(`${pending.length} attempt(s) pending reconciliation`);
  let attempts = 0;
  let settledTokens = 0;
  let pendingTokens = 0;
  const to = Date.now() + 1000;
  for (let t = from - 1000; t < to; t += 1000) {
    const { models } = await getJson<{ models: UsageRow[] }>(`${tenant}/usage?scope=key:budgeted&from=${t}&to=${Math.min(t + 1000, to)}`, auth);
    const n = models.reduce((a, m) => a + m.attempts, 0);
    if (n >= 10_000) out.push(`more than 10 000 attempts in one second from ${t}: the books cannot be checked`);
    attempts += n;
    settledTokens += models.reduce((a, m) => a + m.settledTokens, 0);
    pendingTokens += models.reduce((a, m) => a + m.pendingTokens, 0);
  }
  if (attempts !== budgetedRequests) out.push(`${attempts} attempts in the ledger for ${budgetedRequests} budgeted requests`);
  if (settledTokens !== budgetedRequests * tokensPerRequest) out.push(`${settledTokens} tokens settled, want ${budgetedRequests} × ${tokensPerRequest}`);
  if (pendingTokens !== 0) out.push(`${pendingTokens} tokens still held or pending`);
  return out;
}

interface GatewayPart {
  readonly unloaded: { readonly runs: UnloadedRun[]; readonly median: Record<KeyRole, Latency> };
  readonly loaded: { readonly concurrency: number; readonly runs: Record<KeyRole, CellRun[]>; readonly median: Record<KeyRole, CellSummary> };
  readonly tokensPerRequest: number;
}

async function gatewayPart(o: Options, problems: string[]): Promise<GatewayPart> {
  console.log("\nstarting the provider simulator, building the gateway bundle (when stale) and starting Sluice on workerd …");
  const from = Date.now();
  const s = await startLedgerGateway(o.tokens);
  const url = `${s.gateway.publicUrl}/v1/chat/completions`;
  const serverPid = resolveWorkerPid(s.gateway.process.pid ?? 0, "workerd");
  const sent: Record<KeyRole, number> = { open: 0, budgeted: 0 };

  let tokensPerRequest = 0;
  for (const role of ROLES) {
    sent[role]++;
    const a = await exchange(url, "POST", chatHeaders(role), chatBody, REQUEST_TIMEOUT_MS);
    const bad = badAnswer(a);
    if (bad !== undefined) throw new BenchError(`gateway: the ${role} key's check request got ${bad}\n${s.output()}`);
    tokensPerRequest = (JSON.parse(a.text) as { usage: { total_tokens: number } }).usage.total_tokens;
  }
  console.log(
    `both keys answer; ${o.runs} runs of: unloaded (sequential, keys interleaved, ${UNLOADED_GAP_MS} ms apart) then concurrency ${o.gatewayConcurrency} per key, ` +
      `${o.warmupMs / 1000} s warm-up + ${o.durationMs / 1000} s each\n`,
  );

  const unloaded: UnloadedRun[] = [];
  const loaded: Record<KeyRole, CellRun[]> = { open: [], budgeted: [] };
  for (let run = 1; run <= o.runs; run++) {
    const u = await unloadedRun(url, o, run, problems);
    for (const role of ROLES) sent[role] += u.sent[role];
    unloaded.push({ run: u.run, requests: u.requests, latencyMs: u.latencyMs });
    console.log(
      `run ${run}/${o.runs} unloaded  open p50 ${f(u.latencyMs.open.p50, 2)} p99 ${f(u.latencyMs.open.p99, 2)} ms  ` +
        `budgeted p50 ${f(u.latencyMs.budgeted.p50, 2)} p99 ${f(u.latencyMs.budgeted.p99, 2)} ms  (${u.requests.open} + ${u.requests.budgeted} requests)`,
    );
    const order: readonly KeyRole[] = run % 2 === 1 ? ["open", "budgeted"] : ["budgeted", "open"];
    for (const role of order) {
      const result = await runLoad({
        url,
        headers: { authorization: `Bearer ${GATEWAY_KEYS[role]}` },
        body: chatBody,
        workload: BUFFERED,
        concurrency: o.gatewayConcurrency,
        warmupMs: o.warmupMs,
        durationMs: o.durationMs,
        requestTimeoutMs: REQUEST_TIMEOUT_MS,
        cpuPids: { server: serverPid, simulator: s.simPid },
        clockTicksPerSecond: TICKS,
      });
      if (!s.alive()) throw new BenchError(`a server process exited during the run:\n${s.output()}`);
      sent[role] += result.requests + result.warmup.requests;
      const failed = loadErrors(`gateway run ${run} c=${o.gatewayConcurrency} ${role}`, result);
      if (failed !== undefined) problems.push(failed);
      const rec = cellRun(run, result, 0);
      loaded[role].push(rec);
      console.log(
        `run ${run}/${o.runs} c=${o.gatewayConcurrency} ${role.padEnd(8)} ${f(rec.rps, 0).padStart(6)} req/s  p50 ${f(rec.p50Ms, 2)} ms  ` +
          `p99 ${f(rec.p99Ms, 2)} ms  workerd CPU ${f(rec.serverCpuMsPerReq, 3)} ms/req  ${rec.errors > 0 ? `ERRORS ${rec.errors}` : "0 errors"}`,
      );
    }
  }

  // Every client request must have reached the simulator exactly once and completed there.
  const sim = await getJson<SimStats>(`${s.simUrl}/__sim/stats`);
  const total = sent.open + sent.budgeted;
  if (sim.total !== total) problems.push(`gateway: the simulator saw ${sim.total} requests for ${total} client requests`);
  for (const [kind, n] of Object.entries(sim.outcomes)) if (kind !== "completed" && n > 0) problems.push(`gateway: ${n} × simulator outcome '${kind}'`);
  for (const p of await checkGatewayBooks(s, from, sent.budgeted, tokensPerRequest)) problems.push(`gateway books: ${p}`);

  await s.stop();
  const med = (role: KeyRole): Latency => ({ p50: median(unloaded.map((u) => u.latencyMs[role].p50)), p99: median(unloaded.map((u) => u.latencyMs[role].p99)) });
  return {
    unloaded: { runs: unloaded, median: { open: med("open"), budgeted: med("budgeted") } },
    loaded: { concurrency: o.gatewayConcurrency, runs: loaded, median: { open: summarize(loaded.open), budgeted: summarize(loaded.budgeted) } },
    tokensPerRequest,
  };
}

// ---------------------------------------------------------------------------------------------
// Report

const f = (n: number, digits: number) => (Number.isFinite(n) ? n.toFixed(digits) : "n/a");
const signed = (n: number, digits: number) => (Number.isFinite(n) ? `${n >= 0 ? "+" : ""}${n.toFixed(digits)}` : "n/a");

function ledgerReport(o: Options, p: LedgerPart): string {
  const vs = variants(o);
  const rows: string[][] = [];
  for (const c of o.concurrencies) {
    const base = p.median[cellKey(vs[0]!, c)]!;
    const one = p.median[cellKey(vs[2]!, c)]!;
    for (const v of vs) {
      const s = p.median[cellKey(v, c)]!;
      const isBase = v.route === "baseline";
      rows.push([
        String(c),
        v.name,
        f(s.rps, 0),
        f(s.p50Ms, 2),
        f(s.p99Ms, 2),
        f(s.meanMs, 2),
        f(s.serverCpuMsPerReq, 3),
        isBase ? "" : signed(s.p50Ms - base.p50Ms, 2),
        isBase ? "" : signed(s.serverCpuMsPerReq - base.serverCpuMsPerReq, 3),
        isBase ? "" : `×${f(s.rps / base.rps, 2)}`,
        v.stripes > 1 ? `×${f(s.rps / one.rps, 2)}` : "",
        s.errors > 0 ? `${s.errors} !!` : "0",
      ]);
    }
  }
  return [
    `ledger Worker on workerd: per HTTP request, median of ${o.runs} × ${o.durationMs / 1000} s`,
    table(["conc", "route", "req/s", "p50 ms", "p99 ms", "mean ms", "CPU ms/req", "Δp50 ms", "ΔCPU ms", "req/s vs base", "vs 1 object", "errors"], rows, 2),
    "Δ = minus the baseline route at the same concurrency; CPU = the workerd process's user+system time per request.",
  ].join("\n");
}

function gatewayReport(o: Options, g: GatewayPart): string {
  const u = g.unloaded.median;
  const l = g.loaded.median;
  const c = g.loaded.concurrency;
  const rows = [
    ["unloaded", "open", "", f(u.open.p50, 2), f(u.open.p99, 2), "", String(g.unloaded.runs.reduce((a, r) => a + r.requests.open, 0)), "0"],
    ["unloaded", "budgeted", "", f(u.budgeted.p50, 2), f(u.budgeted.p99, 2), "", String(g.unloaded.runs.reduce((a, r) => a + r.requests.budgeted, 0)), "0"],
    ...ROLES.map((role) => [`c=${c}`, role, f(l[role].rps, 0), f(l[role].p50Ms, 2), f(l[role].p99Ms, 2), f(l[role].serverCpuMsPerReq, 3), String(l[role].requests), l[role].errors > 0 ? `${l[role].errors} !!` : "0"]),
  ];
  return [
    `gateway: client → Sluice (workerd) → simulator, buffered, ${g.tokensPerRequest} tokens per answer, median of ${o.runs} × ${o.durationMs / 1000} s`,
    table(["load", "key", "req/s", "p50 ms", "p99 ms", "CPU ms/req", "requests", "errors"], rows, 2),
    `one ledger hop (budgeted − open): unloaded p50 ${signed(u.budgeted.p50 - u.open.p50, 2)} ms, p99 ${signed(u.budgeted.p99 - u.open.p99, 2)} ms; ` +
      `c=${c} p50 ${signed(l.budgeted.p50Ms - l.open.p50Ms, 2)} ms, p99 ${signed(l.budgeted.p99Ms - l.open.p99Ms, 2)} ms, ` +
      `throughput ×${f(l.budgeted.rps / l.open.rps, 2)}, workerd CPU ${signed(l.budgeted.serverCpuMsPerReq - l.open.serverCpuMsPerReq, 3)} ms/req`,
  ].join("\n");
}

// ---------------------------------------------------------------------------------------------
// Main

async function main(): Promise<number> {
  const o = parseOptions();
  if (!procAvailable()) throw new BenchError("CPU accounting reads /proc/<pid>/stat; run the bench on Linux");
  const problems: string[] = [];
  const ledger = await ledgerPart(o, problems);
  const gateway = await gatewayPart(o, problems);

  console.log(`\n${ledgerReport(o, ledger)}\n\n${gatewayReport(o, gateway)}\n`);
  console.log("Absolute figures depend on the machine and its other load; compare the differences and ratios.");
  const busiest = Math.max(...Object.values(ledger.median).map((s) => s.otherBusyCores), ...ROLES.map((r) => gateway.loaded.median[r].otherBusyCores));
  if (busiest > 0.25) console.log(`note: up to ${f(busiest, 2)} CPUs were busy with other work during the runs; expect noisy figures.`);

  const json = {
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? "unknown", node: process.version, platform: process.platform },
    options: { ...o, out: undefined },
    ledgerWorker: {
      description: "bench/ledger-worker on workerd serve; per HTTP request: baseline = no ledger call, reserve = one reserve, reserve+settle = one reserve then one settle",
      amounts: { reserve: RESERVE_AMOUNT, settle: SETTLE_AMOUNT },
      ...ledger,
    },
    gateway: { keys: { open: GATEWAY_TENANTS.open, budgeted: GATEWAY_TENANTS.budgeted }, ...gateway },
    problems,
  };
  mkdirSync(dirname(o.out), { recursive: true });
  writeFileSync(o.out, `${JSON.stringify(json, null, 2)}\n`);
  console.log(`results: ${o.out}`);

  if (problems.length > 0) {
    console.error(`\nBENCH FAILED: ${problems.length} problem(s); the figures above are not valid:\n  ${problems.slice(0, 20).join("\n  ")}`);
    return 1;
  }
  return 0;
}

await runBench(main);
