/**
 * `npm run bench:compare`: this working tree's Sluice against another revision's, side by side
 * behind one simulator, measured alternately (A B A B …) so that drift of a shared machine hits
 * both alike. Reports each run and the medians of workerd CPU per request and of throughput, and
 * the ratio B/A per pair. The workload is a chat completion (buffered or streamed) or an MCP
 * `tools/call` through `/mcp/<server>` to the simulator's MCP server.
 *
 *   npm run bench:compare -- [--base HEAD] [--workload buffered|streaming|mcp] [--tokens N] [--key open|budgeted] [--model NAME]
 *                            [--runs 5] [--duration 3] [--warmup 1] [--concurrency 32]
 *                            [--base-no-access-log] [--no-access-log] [--streams N] [--simultaneous]
 *
 * With `--simultaneous` each run loads both sides at the same time instead (half the concurrency
 * each, two load generators), so both see the same machine: on a box that other work keeps busy,
 * the per-run ratio then moves far less than between consecutive runs.
 *
 * With `--streams N` it measures memory instead: per run and side, a fresh gateway takes N
 * concurrent streams at once (20 tokens 100 ms apart, as `npm run bench` does), and the resident
 * memory per stream and the streams' first bytes are reported.
 *
 * The base revision is checked out into a temporary git worktree (sharing this checkout's
 * node_modules) and bundled there exactly as `npm start` bundles; the worktree is removed at the end.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildBundle, OFFLINE_ENV, ROOT } from "../local-stack/build.ts";
import { compatibilitySettings } from "../cli/workerd-config.ts";
import { register } from "./children.ts";
import { BenchError, numberFlag, parseFlags, runBench } from "./entry.ts";
import { configureSimulator, runLoad, simJson, table } from "./load-runner.ts";
import { concurrentStreams } from "./memory.ts";
import { clockTicksPerSecond, resolveWorkerPid } from "./proc.ts";
import { ANTHROPIC_MODEL, BEDROCK_MODEL, keyFlag, OPEN_KEY, PUBLIC_MODEL, SIMULATOR_AWS_ARGS, SSE_MODEL, startBenchGateway, startBenchSimulator, workloadFlag } from "./sluice-config.ts";
import { median } from "./stats.ts";
import { gatewayPath, requestBody, type Workload } from "./workload.ts";

const USAGE = `Usage: npm run bench:compare -- [options]
  --base REV                 the revision to compare against (default HEAD)
  --workload buffered|streaming|mcp   a chat completion, or an MCP tools/call (default buffered;
                             mcp needs a base that has the MCP gateway)
  --tokens N                 output tokens per chat answer (default: 16 buffered, 32 streaming)
  --client openai-chat|anthropic-messages   the protocol a chat is asked in (default openai-chat; /v1/messages
                             for anthropic-messages, which with ${ANTHROPIC_MODEL} is a pass-through)
  --key open|budgeted        the open key (no budgets) or the demo key (strict budgets) (default open)
  --model NAME               the public model a chat asks for (default ${PUBLIC_MODEL}); ${SSE_MODEL}, ${BEDROCK_MODEL}
                             and ${ANTHROPIC_MODEL} are one model over OpenAI Chat, over Bedrock ConverseStream
                             and over Anthropic Messages (needs a base that has the bedrock-converse protocol)
  --runs N                   alternating runs of each side (default 5)
  --duration S               measured seconds per run (default 3)
  --warmup S                 discarded warm-up seconds before each run (default 1)
  --concurrency N            requests in flight (default 32)
  --base-no-access-log       the base side with observability.accessLog off
  --no-access-log            this side with observability.accessLog off
  --streams N                measure N concurrent streams on fresh processes instead of throughput
  --simultaneous             load both sides at once in each run (concurrency split between them)
  --help                     show this text`;

function git(args: readonly string[], cwd = ROOT): string {
  const res = spawnSync("git", args, { cwd, encoding: "utf8" });
  if (res.status !== 0) throw new BenchError(`git ${args.join(" ")} failed: ${res.stderr}`);
  return res.stdout.trim();
}

/** Bundles `rev` in a temporary worktree; returns the bundle directory, its compatibility settings and a cleanup. */
function bundleOf(rev: string): { dir: string; compatibility: ReturnType<typeof compatibilitySettings>; remove(): void } {
  const sha = git(["rev-parse", "--verify", `${rev}^{commit}`]);
  const tree = mkdtempSync(join(tmpdir(), "sluice-compare-"));
  git(["worktree", "add", "--detach", tree, sha]);
  const remove = () => {
    spawnSync("git", ["worktree", "remove", "--force", tree], { cwd: ROOT });
    rmSync(tree, { recursive: true, force: true });
  };
  try {
    symlinkSync(join(ROOT, "node_modules"), join(tree, "node_modules"));
    const out = join(tree, "dist");
    const res = spawnSync(join(ROOT, "node_modules", ".bin", "wrangler"), ["deploy", "--dry-run", "--outdir", out], { cwd: tree, env: { ...process.env, ...OFFLINE_ENV }, encoding: "utf8" });
    if (res.status !== 0) throw new BenchError(`bundling ${rev} failed:\n${res.stdout}\n${res.stderr}`);
    return { dir: out, compatibility: compatibilitySettings(tree), remove };
  } catch (err) {
    remove();
    throw err;
  }
}

async function main(): Promise<number> {
  const values = parseFlags(
    {
      base: { type: "string" },
      workload: { type: "string" },
      tokens: { type: "string" },
      client: { type: "string" },
      key: { type: "string" },
      model: { type: "string" },
      runs: { type: "string" },
      duration: { type: "string" },
      warmup: { type: "string" },
      concurrency: { type: "string" },
      "base-no-access-log": { type: "boolean" },
      "no-access-log": { type: "boolean" },
      streams: { type: "string" },
      simultaneous: { type: "boolean" },
      help: { type: "boolean" },
    },
    USAGE,
  );
  const base = values.base ?? "HEAD";
  const chosen = workloadFlag(values.workload, USAGE, values.tokens === undefined ? undefined : numberFlag("tokens", values.tokens, 0, 1, 4096, true));
  const client = values.client;
  if (client !== undefined && client !== "openai-chat" && client !== "anthropic-messages") throw new BenchError(`--client must be openai-chat or anthropic-messages\n${USAGE}`);
  if (client !== undefined && (chosen.name === "mcp" || chosen.name === "embeddings")) throw new BenchError(`--client names a chat protocol; a ${chosen.name} request has none\n${USAGE}`);
  const workload: Workload = (chosen.name === "buffered" || chosen.name === "streaming") && client !== undefined ? { ...chosen, client } : chosen;
  const key = keyFlag(values.key, USAGE);
  const model = values.model ?? PUBLIC_MODEL;
  if (![PUBLIC_MODEL, SSE_MODEL, BEDROCK_MODEL, ANTHROPIC_MODEL].includes(model)) throw new BenchError(`--model must be ${PUBLIC_MODEL}, ${SSE_MODEL}, ${BEDROCK_MODEL} or ${ANTHROPIC_MODEL}\n${USAGE}`);
  if (workload.name === "mcp" && values.model !== undefined) throw new BenchError(`--model names a chat model; an MCP call has none\n${USAGE}`);
  // The protocol entrypoints exist only in the bench's Bedrock config, with the simulator checking signatures.
  const bedrock = model !== PUBLIC_MODEL;
  const runs = numberFlag("runs", values.runs, 5, 1, 100, true);
  const durationMs = numberFlag("duration", values.duration, 3, 0.5, 600, false) * 1000;
  const warmupMs = numberFlag("warmup", values.warmup, 1, 0, 60, false) * 1000;
  const concurrency = numberFlag("concurrency", values.concurrency, 32, 1, 1024, true);
  const streams = numberFlag("streams", values.streams, 0, 0, 10_000, true);

  console.log(`bundling ${base} in a temporary worktree …`);
  const baseBundle = bundleOf(base);
  register({ name: "base worktree", stop: async () => baseBundle.remove() });
  const headBundle = buildBundle();

  const sim = await startBenchSimulator(["--history", "0", ...(bedrock ? SIMULATOR_AWS_ARGS : [])]);
  const start = (name: string, bundleDir: string, compatibility: ReturnType<typeof compatibilitySettings>, accessLog: boolean) =>
    // Another revision's gateway.yaml may predate the egress allowlist this renderer reads; both
    // sides only ever talk to the loopback simulator, so both get workerd's local network.
    // Only the MCP workload configures MCP: a revision from before the MCP gateway refuses it.
    startBenchGateway(sim.url, { name, accessLog, bundleDir, compatibility, networkAllow: ["public", "local"], mcp: workload.name === "mcp", bedrock });
  const sideOptions = [
    { label: `A ${base}`, name: "Sluice (base)", bundleDir: baseBundle.dir, compatibility: baseBundle.compatibility, accessLog: values["base-no-access-log"] !== true },
    { label: "B this tree", name: "Sluice (this tree)", bundleDir: headBundle, compatibility: compatibilitySettings(), accessLog: values["no-access-log"] !== true },
  ];
  if (streams > 0) return await compareStreams(sim.url, sideOptions, (o) => start(o.name, o.bundleDir, o.compatibility, o.accessLog), streams, runs);
  await configureSimulator(sim.url, workload);
  const sides: { label: string; gw: Awaited<ReturnType<typeof start>> }[] = [];
  for (const o of sideOptions) sides.push({ label: o.label, gw: await start(o.name, o.bundleDir, o.compatibility, o.accessLog) });
  const ticks = clockTicksPerSecond();
  const simultaneous = values.simultaneous === true;
  if (simultaneous && concurrency < 2) throw new BenchError(`--simultaneous splits --concurrency between the sides: give at least 2\n${USAGE}`);
  const spec = (gw: (typeof sides)[number]["gw"]) => ({
    url: `${gw.publicUrl}${gatewayPath(workload)}`,
    headers: { authorization: `Bearer ${key.key}` },
    body: requestBody(workload, model),
    workload,
    concurrency: simultaneous ? Math.ceil(concurrency / 2) : concurrency,
    warmupMs,
    durationMs,
    requestTimeoutMs: 30_000,
    cpuPids: { server: resolveWorkerPid(gw.process.pid ?? 0, "workerd") },
    clockTicksPerSecond: ticks,
  });
  console.log(
    simultaneous
      ? `${runs} runs of both sides at once, ${workload.name}, ${key.name} key, ${Math.ceil(concurrency / 2)} in flight to each, ${warmupMs / 1000} s warm-up + ${durationMs / 1000} s each\n`
      : `${runs} alternating runs per side, ${workload.name}, ${key.name} key, ${concurrency} in flight, ${warmupMs / 1000} s warm-up + ${durationMs / 1000} s each\n`,
  );
  const cpu: number[][] = [[], []];
  const rps: number[][] = [[], []];
  let errors = 0;
  for (let i = 0; i < runs; i++) {
    // Alternate which side goes first, so neither always runs on the warmer machine.
    const order = i % 2 === 0 ? [0, 1] : [1, 0];
    const together = simultaneous ? await Promise.all(order.map((s) => runLoad(spec(sides[s]!.gw)))) : undefined;
    for (const [j, s] of order.entries()) {
      const r = together?.[j] ?? (await runLoad(spec(sides[s]!.gw)));
      errors += r.errors + r.warmup.errors;
      const perReq = (r.cpuMs.server ?? Number.NaN) / Math.max(1, r.requests);
      cpu[s]!.push(perReq);
      rps[s]!.push(r.rps);
      console.log(`run ${i + 1}/${runs} ${sides[s]!.label.padEnd(14)} ${r.rps.toFixed(0).padStart(6)} req/s  workerd CPU ${perReq.toFixed(3)} ms/req  p50 ${r.latencyMs.p50.toFixed(2)} ms  other load ${r.otherBusyCores.toFixed(2)}  ${r.errors} errors`);
      if (r.errors > 0) console.log(`  ${r.errorSamples.slice(0, 3).join("; ")}`);
    }
  }
  const ratios = cpu[1]!.map((b, i) => b / cpu[0]![i]!);
  console.log(
    `\n${table(
      ["side", "median req/s", "median CPU ms/req"],
      sides.map((s, i) => [s.label, median(rps[i]!).toFixed(0), median(cpu[i]!).toFixed(3)]),
      1,
    )}\n\nCPU per request B/A: median ×${median(ratios).toFixed(3)} (per pair ${ratios.map((r) => r.toFixed(2)).join(", ")})`,
  );
  if (errors > 0) throw new BenchError(`${errors} requests failed`);
  return 0;
}

/** Memory per stream, each run on fresh processes: memory a process took is rarely given back. */
async function compareStreams<O extends { readonly label: string }>(
  simUrl: string,
  sides: readonly O[],
  start: (o: O) => Promise<{ publicUrl: string; process: { pid?: number | undefined }; stop(): Promise<void> }>,
  n: number,
  runs: number,
): Promise<number> {
  await simJson(simUrl, "PUT", "/__sim/config", { tokens: 20, "latency-ms": 0, "ttft-ms": 0, "token-interval-ms": 100 });
  const body = requestBody({ name: "streaming", stream: true, tokens: 20 }, PUBLIC_MODEL);
  const kib: number[][] = sides.map(() => []);
  const firstMax: number[][] = sides.map(() => []);
  const firstP50: number[][] = sides.map(() => []);
  let failed = 0;
  console.log(`${runs} alternating runs per side of ${n} concurrent streams (20 tokens 100 ms apart), each on a fresh gateway\n`);
  for (let i = 0; i < runs; i++) {
    const order = i % 2 === 0 ? [0, 1] : [1, 0];
    for (const s of order) {
      const gw = await start(sides[s]!);
      const r = await concurrentStreams({ url: `${gw.publicUrl}/v1/chat/completions`, headers: { authorization: `Bearer ${OPEN_KEY}` }, body, n, pid: resolveWorkerPid(gw.process.pid ?? 0, "workerd"), settleMs: 500 });
      await gw.stop();
      failed += r.streams - r.ok;
      kib[s]!.push(r.perStreamKiB);
      firstP50[s]!.push(r.firstByteP50Ms);
      firstMax[s]!.push(r.firstByteMaxMs);
      console.log(`run ${i + 1}/${runs} ${sides[s]!.label.padEnd(14)} ${r.perStreamKiB.toFixed(0).padStart(5)} KiB/stream  first byte p50 ${r.firstByteP50Ms.toFixed(0)} ms, max ${r.firstByteMaxMs.toFixed(0)} ms  ${r.streams - r.ok} failed`);
    }
  }
  console.log(
    `\n${table(
      ["side", "median KiB/stream", "first byte p50 ms", "first byte max ms"],
      sides.map((s, i) => [s.label, median(kib[i]!).toFixed(0), median(firstP50[i]!).toFixed(0), median(firstMax[i]!).toFixed(0)]),
      1,
    )}`,
  );
  if (failed > 0) throw new BenchError(`${failed} streams failed`);
  return 0;
}

await runBench(main);
