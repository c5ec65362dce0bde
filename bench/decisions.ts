/**
 * `npm run bench:decisions`: what a similarity decision adds to a request, on this tree's Sluice.
 * One simulator and one gateway; three targets measured in rotating order, run after run, so drift
 * of a shared machine hits them alike:
 *
 * - `local`: a chat completion to an entrypoint whose decisions read only local signals (a
 *   jailbreak check, the prompt's size), which the bench prompt meets none of;
 * - `similarity`: the same request to an entrypoint with the same decisions and two more on a
 *   similarity signal (one embedding of the prompt through the embeddings entrypoint, as a
 *   sub-request on the one runner, then cosine against the utterances' vectors);
 * - `embeddings`: one plain `POST /v1/embeddings` of the same prompt: the price of an embedding
 *   request as a client pays it, to set the sub-request's cost beside.
 *
 *   npm run bench:decisions -- [--workload buffered|streaming] [--tokens N] [--runs 5] [--duration 3]
 *                              [--warmup 1] [--concurrency 32] [--no-access-log]
 *
 * Reports each run, the medians of workerd CPU per request, and per run the similarity path's CPU
 * minus the local path's (what the similarity decision adds) and the embedding request's. Before
 * the gateway starts, it times in this process, with the gateway's code (`decide-work.ts`), the
 * decide phase of the local decisions and of the public model's routes, and the similarity
 * signal's own work with its embedding answered from memory: what the decision adds besides its
 * embedding's sub-request. It checks
 * that every similarity request reached the simulator exactly twice (its embedding and its chat
 * call) and every other request once.
 *
 * Decisions exist only from this tree on: there is no base to compare with, so this is its own
 * driver rather than a stage of `bench:compare`.
 */
import { buildBundle } from "../local-stack/build.ts";
import { BenchError, numberFlag, parseFlags, runBench } from "./entry.ts";
import { configureSimulator, exchange, runLoad, simJson, table } from "./load-runner.ts";
import type { LoadResult } from "./load-spec.ts";
import { clockTicksPerSecond, resolveWorkerPid } from "./proc.ts";
import { localDecideWork, similarityWork, type Work } from "./decide-work.ts";
import { benchGatewayConfig, embeddingsEntrypoint, LOCAL_DECISIONS_MODEL, OPEN_KEY, PUBLIC_MODEL, SIMILARITY_DECISIONS_MODEL, SIMILARITY_SIGNAL, startBenchGateway, startBenchSimulator, workloadFlag } from "./sluice-config.ts";
import { median } from "./stats.ts";
import { EMBEDDINGS_WORKLOAD, gatewayPath, invalidBody, requestBody, requestHeaders, type Workload } from "./workload.ts";

const USAGE = `Usage: npm run bench:decisions -- [options]
  --workload buffered|streaming   the chat request of the local and similarity targets (default buffered)
  --tokens N                 output tokens per chat answer (default: 16 buffered, 32 streaming)
  --runs N                   rounds; each target once per round, in rotating order (default 5)
  --duration S               measured seconds per run (default 3)
  --warmup S                 discarded warm-up seconds before each run (default 1)
  --concurrency N            requests in flight (default 32)
  --no-access-log            Sluice with observability.accessLog off
  --help                     show this text`;

const REQUEST_TIMEOUT_MS = 30_000;

interface Target {
  readonly name: "local" | "similarity" | "embeddings";
  readonly workload: Workload;
  readonly model: string;
  /** Simulator requests per client request. */
  readonly upstreamPerRequest: number;
}

interface SimStats {
  readonly total: number;
  readonly outcomes: Readonly<Record<string, number>>;
}

async function main(): Promise<number> {
  const values = parseFlags(
    {
      workload: { type: "string" },
      tokens: { type: "string" },
      runs: { type: "string" },
      duration: { type: "string" },
      warmup: { type: "string" },
      concurrency: { type: "string" },
      "no-access-log": { type: "boolean" },
      help: { type: "boolean" },
    },
    USAGE,
  );
  const chat = workloadFlag(values.workload, USAGE, values.tokens === undefined ? undefined : numberFlag("tokens", values.tokens, 0, 1, 4096, true));
  if (chat.name === "mcp") throw new BenchError(`--workload must be buffered or streaming\n${USAGE}`);
  const runs = numberFlag("runs", values.runs, 5, 1, 100, true);
  const durationMs = numberFlag("duration", values.duration, 3, 0.5, 600, false) * 1000;
  const warmupMs = numberFlag("warmup", values.warmup, 1, 0, 60, false) * 1000;
  const concurrency = numberFlag("concurrency", values.concurrency, 32, 1, 1024, true);

  // First, while nothing else of the bench runs: the decide phase's own work, in this process
  // (the config's backend address is never called there).
  const texts = benchGatewayConfig("http://127.0.0.1:9", true, undefined, false, true);
  const us = (w: Work) => `median ${w.usPerRequest.toFixed(1)} µs per request (per batch ${w.perBatchUs.map((u) => u.toFixed(1)).join(", ")})`;
  const routes = await localDecideWork(texts, PUBLIC_MODEL, requestBody(chat, PUBLIC_MODEL));
  const local = await localDecideWork(texts, LOCAL_DECISIONS_MODEL, requestBody(chat, LOCAL_DECISIONS_MODEL));
  const similar = await similarityWork(texts, SIMILARITY_SIGNAL, requestBody(chat, SIMILARITY_DECISIONS_MODEL));
  const inProcess = [
    "in this process, the gateway's code without its I/O:",
    `  decide phase, ${PUBLIC_MODEL} (its routes as decisions; ${routes.decision}): ${us(routes)}`,
    `  decide phase, ${LOCAL_DECISIONS_MODEL} (${local.decision}): ${us(local)}`,
    `  the similarity signal's own work, its embedding answered from memory: ${us(similar)}; value ${JSON.stringify(similar.value)}`,
  ].join("\n");
  console.log(inProcess);

  buildBundle();
  const sim = await startBenchSimulator();
  await configureSimulator(sim.url, chat);
  const gw = await startBenchGateway(sim.url, { name: "Sluice (this tree)", accessLog: values["no-access-log"] !== true, decisions: true });
  const pid = resolveWorkerPid(gw.process.pid ?? 0, "workerd");
  const targets: Target[] = [
    { name: "local", workload: chat, model: LOCAL_DECISIONS_MODEL, upstreamPerRequest: 1 },
    { name: "similarity", workload: chat, model: SIMILARITY_DECISIONS_MODEL, upstreamPerRequest: 2 },
    { name: "embeddings", workload: EMBEDDINGS_WORKLOAD, model: embeddingsEntrypoint(), upstreamPerRequest: 1 },
  ];
  const headers = { authorization: `Bearer ${OPEN_KEY}` };
  const stats = () => simJson(sim.url, "GET", "/__sim/stats") as Promise<SimStats>;

  // One request each, checked, before any load: the similarity target's first request also
  // embeds the utterances (once per isolate), so the runs never see that.
  for (const t of targets) {
    const res = await exchange(`${gw.publicUrl}${gatewayPath(t.workload)}`, "POST", requestHeaders(t.workload, headers), requestBody(t.workload, t.model), REQUEST_TIMEOUT_MS);
    const problem = res.status < 200 || res.status > 299 ? `HTTP ${res.status}` : invalidBody(t.workload, res.text);
    if (problem !== undefined) throw new BenchError(`${t.name}: the check request got ${problem}:\n${res.text.slice(0, 2000)}\n${gw.output()}`);
    const decision = res.headers["x-sluice-decision"];
    console.log(`${t.name.padEnd(10)} ${t.model} → ${res.status}${decision === undefined ? "" : `, decision ${String(decision)}`}`);
  }

  const ticks = clockTicksPerSecond();
  const cpu = new Map<Target["name"], number[]>(targets.map((t) => [t.name, []]));
  const rps = new Map<Target["name"], number[]>(targets.map((t) => [t.name, []]));
  const added: number[] = [];
  const embedding: number[] = [];
  let failures = 0;
  console.log(`\n${runs} rounds, ${chat.name} chat, open key, ${concurrency} in flight, ${warmupMs / 1000} s warm-up + ${durationMs / 1000} s each\n`);
  for (let i = 0; i < runs; i++) {
    const round = new Map<Target["name"], number>();
    // Rotate the order, so no target always runs first (or last) in a round.
    for (let k = 0; k < targets.length; k++) {
      const t = targets[(i + k) % targets.length]!;
      const before = await stats();
      const r: LoadResult = await runLoad({
        url: `${gw.publicUrl}${gatewayPath(t.workload)}`,
        headers,
        body: requestBody(t.workload, t.model),
        workload: t.workload,
        concurrency,
        warmupMs,
        durationMs,
        requestTimeoutMs: REQUEST_TIMEOUT_MS,
        cpuPids: { server: pid },
        clockTicksPerSecond: ticks,
      });
      const after = await stats();
      const sent = r.requests + r.warmup.requests;
      const upstream = after.total - before.total;
      const anomalies = Object.entries(after.outcomes).filter(([kind, n]) => kind !== "completed" && n > (before.outcomes[kind] ?? 0));
      const problems = r.errors + r.warmup.errors + anomalies.length + (upstream === sent * t.upstreamPerRequest ? 0 : 1);
      failures += problems;
      const perReq = (r.cpuMs.server ?? Number.NaN) / Math.max(1, r.requests);
      cpu.get(t.name)!.push(perReq);
      rps.get(t.name)!.push(r.rps);
      round.set(t.name, perReq);
      console.log(
        `run ${i + 1}/${runs} ${t.name.padEnd(10)} ${r.rps.toFixed(0).padStart(6)} req/s  workerd CPU ${perReq.toFixed(3)} ms/req  p50 ${r.latencyMs.p50.toFixed(2)} ms  upstream ${(upstream / Math.max(1, sent)).toFixed(2)}/req  other load ${r.otherBusyCores.toFixed(2)}  ${r.errors + r.warmup.errors} errors`,
      );
      if (r.errors > 0) console.log(`  ${r.errorSamples.slice(0, 3).join("; ")}`);
      if (anomalies.length > 0) console.log(`  simulator outcomes: ${anomalies.map(([k]) => k).join(", ")}`);
      if (upstream !== sent * t.upstreamPerRequest) console.log(`  the simulator saw ${upstream} requests for ${sent}; want ${t.upstreamPerRequest} each`);
    }
    added.push(round.get("similarity")! - round.get("local")!);
    embedding.push(round.get("embeddings")!);
  }
  const ratio = cpu.get("similarity")!.map((s, i) => s / cpu.get("local")![i]!);
  const beyond = added.map((a, i) => a - embedding[i]!);
  const f = (x: number) => x.toFixed(3);
  console.log(
    `\n${table(
      ["target", "model", "median req/s", "median CPU ms/req"],
      targets.map((t) => [t.name, t.model, median(rps.get(t.name)!).toFixed(0), f(median(cpu.get(t.name)!))]),
      2,
    )}\n\n` +
      `similarity − local, CPU per request: median +${f(median(added))} ms (per round ${added.map(f).join(", ")})\n` +
      `similarity / local, CPU per request: median ×${median(ratio).toFixed(3)} (per round ${ratio.map((r) => r.toFixed(2)).join(", ")})\n` +
      `(similarity − local) − a plain embeddings request: median ${f(median(beyond))} ms (per round ${beyond.map(f).join(", ")})\n\n${inProcess}`,
  );
  if (failures > 0) throw new BenchError(`${failures} runs had failed requests or the wrong number of upstream calls`);
  return 0;
}

await runBench(main);
