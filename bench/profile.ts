/**
 * `npm run bench:profile`: a CPU profile of Sluice's isolate under the bench's load, taken through
 * workerd's V8 inspector, summarised by function and by source file of the bundle.
 *
 *   npm run bench:profile -- [--key open|budgeted] [--workload buffered|streaming|mcp] [--model NAME] [--tokens N]
 *                            [--concurrency 16] [--duration 10] [--interval-us 250] [--top 40] [--no-access-log] [--out FILE]
 *
 * The attached profiler slows the isolate down, so only proportions mean anything; the bench
 * (`npm run bench`) is what measures. The raw profile is written as a `.cpuprofile` file that
 * Chrome DevTools opens.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { buildBundle } from "../local-stack/build.ts";
import { freePort } from "../local-stack/ports.ts";
import { BenchError, numberFlag, parseFlags, runBench } from "./entry.ts";
import { configureSimulator, runLoad, simJson, table } from "./load-runner.ts";
import { clockTicksPerSecond } from "./proc.ts";
import {
  ANTHROPIC_MODEL,
  BEDROCK_MODEL,
  CACHE_MODEL,
  CASCADE_MODEL,
  keyFlag,
  LOCAL_DECISIONS_MODEL,
  PUBLIC_MODEL,
  SIMILARITY_DECISIONS_MODEL,
  SIMULATOR_AWS_ARGS,
  SSE_MODEL,
  startBenchGateway,
  startBenchSimulator,
  workloadFlag,
} from "./sluice-config.ts";
import { CASCADE_QUALITY } from "./cascade-stage.ts";
import { cdp, inspectorTarget } from "./inspector.ts";
import { gatewayPath, requestBody } from "./workload.ts";

const USAGE = `Usage: npm run bench:profile -- [options]
  --key open|budgeted        the open key (no budgets) or the demo key (strict budgets) (default open)
  --workload buffered|streaming|mcp   a chat completion, or an MCP tools/call (default buffered)
  --model NAME               the public model a chat asks for (default ${PUBLIC_MODEL}); ${LOCAL_DECISIONS_MODEL} and
                             ${SIMILARITY_DECISIONS_MODEL} are the decision entrypoints bench:decisions measures;
                             ${SSE_MODEL}, ${BEDROCK_MODEL} and ${ANTHROPIC_MODEL} the same model over OpenAI Chat,
                             over Bedrock ConverseStream (SigV4-signed), which the bedrock-streaming stage
                             compares, and over Anthropic Messages;
                             ${CACHE_MODEL} (answered from the cache after its first request) and ${CASCADE_MODEL}
                             (a two-step cascade), the cache and cascade stages'
  --tokens N                 output tokens of a chat answer (default: the bench's, 16 buffered, 32 streaming)
  --concurrency N            requests in flight (default 16)
  --duration S               profiled seconds, after 2 s of unprofiled warm-up (default 10)
  --interval-us N            sampling interval (default 250)
  --top N                    rows of the function table (default 40)
  --no-access-log            Sluice with observability.accessLog off
  --out FILE                 where the .cpuprofile goes (default: the OS temp directory)
  --help                     show this text`;

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
  readonly columnNumber: number;
}
interface ProfileNode {
  readonly id: number;
  readonly callFrame: CallFrame;
  readonly hitCount?: number;
  readonly children?: readonly number[];
}
interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly startTime: number;
  readonly endTime: number;
  readonly samples?: readonly number[];
  readonly timeDeltas?: readonly number[];
}

/**
 * The bundle's module markers (esbuild writes `// path/to/file.ts` before each module's code):
 * line → source file, so samples can be charged to the file they ran in.
 */
function moduleMap(bundle: string): (line: number) => string {
  const starts: { line: number; file: string }[] = [];
  bundle.split("\n").forEach((text, i) => {
    // A package may be marked as `../x/node_modules/…` (a worktree whose node_modules is a link): cut to `node_modules/`.
    const m = /^\/\/ (?:\S*?\/)?((?:src|durable-objects|node_modules)\/\S+\.(?:ts|js|mjs|cjs))$/.exec(text);
    if (m) starts.push({ line: i, file: m[1]!.includes("node_modules/") ? m[1]!.slice(m[1]!.lastIndexOf("node_modules/")) : m[1]! });
  });
  return (line) => {
    let lo = 0;
    let hi = starts.length - 1;
    let found = "(bundle)";
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (starts[mid]!.line <= line) {
        found = starts[mid]!.file;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return found;
  };
}

/** Groups a node_modules path by package. */
function groupOf(file: string): string {
  const m = /^node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(file);
  return m ? `${m[1]} (package)` : file;
}

function summarise(profile: CpuProfile, fileOf: (line: number) => string, top: number): string {
  // Self time per node from the sample stream (time deltas), not hit counts × nominal interval.
  const selfUs = new Map<number, number>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  for (let i = 0; i < samples.length; i++) {
    const dt = deltas[i + 1] ?? 0;
    selfUs.set(samples[i]!, (selfUs.get(samples[i]!) ?? 0) + Math.max(0, dt));
  }
  const total = [...selfUs.values()].reduce((a, b) => a + b, 0);
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const isBundle = (f: CallFrame) => f.url.endsWith("index.js");
  const label = (f: CallFrame) => {
    if (!isBundle(f)) return `${f.functionName || "(anonymous)"} ${f.url ? "" : "[native]"}`.trim();
    return `${f.functionName || "(anonymous)"}  ${fileOf(f.lineNumber)}:${f.lineNumber + 1}`;
  };
  const fnSelf = new Map<string, number>();
  const fileSelf = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const f = byId.get(id)!.callFrame;
    fnSelf.set(label(f), (fnSelf.get(label(f)) ?? 0) + us);
    const file = isBundle(f) ? groupOf(fileOf(f.lineNumber)) : f.functionName.startsWith("(") ? f.functionName : "(runtime built-ins)";
    fileSelf.set(file, (fileSelf.get(file) ?? 0) + us);
  }
  // Inclusive time per bundle file: a sample counts once for each file on its stack.
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const fileTotal = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const f = byId.get(cur)!.callFrame;
      if (isBundle(f)) seen.add(groupOf(fileOf(f.lineNumber)));
    }
    for (const file of seen) fileTotal.set(file, (fileTotal.get(file) ?? 0) + us);
  }
  const pct = (us: number) => `${((100 * us) / total).toFixed(1)}%`;
  const rows = (m: Map<string, number>, n: number) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([k, us]) => [pct(us), k]);
  return [
    `${samples.length} samples over ${((profile.endTime - profile.startTime) / 1e6).toFixed(1)} s; percentages of sampled isolate time (idle included)`,
    "",
    "self time by function",
    table(["self", "function  file:line"], rows(fnSelf, top), 0),
    "",
    "self time by source file (bundle) or kind (runtime)",
    table(["self", "file"], rows(fileSelf, 30), 0),
    "",
    "inclusive time by source file (a sample counts once per file on its stack)",
    table(["total", "file"], rows(fileTotal, 30), 0),
  ].join("\n");
}

async function main(): Promise<number> {
  const values = parseFlags(
    {
      key: { type: "string" },
      workload: { type: "string" },
      model: { type: "string" },
      tokens: { type: "string" },
      concurrency: { type: "string" },
      duration: { type: "string" },
      "interval-us": { type: "string" },
      top: { type: "string" },
      "no-access-log": { type: "boolean" },
      out: { type: "string" },
      help: { type: "boolean" },
    },
    USAGE,
  );
  const tokens = values.tokens === undefined ? undefined : numberFlag("tokens", values.tokens, 0, 1, 4096, true);
  const workload = workloadFlag(values.workload, USAGE, tokens);
  const key = keyFlag(values.key, USAGE);
  const model = values.model ?? PUBLIC_MODEL;
  if (workload.name === "mcp" && values.model !== undefined) throw new BenchError(`--model names a chat model; an MCP call has none\n${USAGE}`);
  // The decision entrypoints exist only in the bench's decisions config.
  const decisions = model === LOCAL_DECISIONS_MODEL || model === SIMILARITY_DECISIONS_MODEL;
  // And the protocol entrypoints only in its Bedrock config, with the simulator checking signatures.
  const bedrock = model === SSE_MODEL || model === BEDROCK_MODEL || model === ANTHROPIC_MODEL;
  // And the cache and cascade entrypoints only in its looper config.
  const looper = model === CACHE_MODEL || model === CASCADE_MODEL;
  const concurrency = numberFlag("concurrency", values.concurrency, 16, 1, 1024, true);
  const durationMs = numberFlag("duration", values.duration, 10, 1, 600, false) * 1000;
  const intervalUs = numberFlag("interval-us", values["interval-us"], 250, 50, 10_000, true);
  const top = numberFlag("top", values.top, 40, 1, 500, true);
  const out = values.out ?? join(tmpdir(), "sluice-bench", `profile-${key.name}-${workload.name}-${new Date().toISOString().replace(/[:.]/g, "-")}.cpuprofile`);

  console.log("starting the simulator and Sluice with the inspector open …");
  const sim = await startBenchSimulator(["--history", "0", ...(bedrock ? SIMULATOR_AWS_ARGS : [])]);
  // The answer's size and zero latency, as the bench sets them.
  await configureSimulator(sim.url, workload);
  // Every model unsure, as the cascade stage sets it: each cascade takes two steps.
  if (model === CASCADE_MODEL) await simJson(sim.url, "PUT", "/__sim/config", { ...("tokens" in workload ? { tokens: workload.tokens } : {}), "latency-ms": 0, "ttft-ms": 0, "token-interval-ms": 0, quality: CASCADE_QUALITY });
  const inspectorPort = await freePort();
  const sluice = await startBenchGateway(sim.url, { name: "Sluice (workerd)", accessLog: values["no-access-log"] !== true, inspectorPort, mcp: workload.name === "mcp", decisions, bedrock, looper });
  const fileOf = moduleMap(readFileSync(join(buildBundle(), "index.js"), "utf8"));
  const spec = {
    url: `${sluice.publicUrl}${gatewayPath(workload)}`,
    headers: { authorization: `Bearer ${key.key}` },
    body: requestBody(workload, model),
    workload,
    concurrency,
    requestTimeoutMs: 30_000,
    cpuPids: {},
    clockTicksPerSecond: clockTicksPerSecond(),
  };
  console.log(`warming up (2 s, ${key.name} key, ${workload.name}${workload.name === "mcp" ? "" : ` to ${model}`}, ${concurrency} in flight) …`);
  await runLoad({ ...spec, warmupMs: 0, durationMs: 2000 });

  const inspector = await cdp(await inspectorTarget(inspectorPort));
  await inspector.send("Profiler.enable");
  await inspector.send("Profiler.setSamplingInterval", { interval: intervalUs });
  await inspector.send("Profiler.start");
  console.log(`profiling ${durationMs / 1000} s …`);
  const load = await runLoad({ ...spec, warmupMs: 0, durationMs });
  const { profile } = (await inspector.send("Profiler.stop")) as { profile: CpuProfile };
  inspector.close();
  if (load.errors > 0) throw new BenchError(`${load.errors} requests failed while profiling: ${load.errorSamples.join("; ")}`);

  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, JSON.stringify(profile));
  console.log(`\n${load.requests} requests (${load.rps.toFixed(0)} req/s under the profiler)\n`);
  console.log(summarise(profile, fileOf, top));
  console.log(`\nraw profile: ${out}`);
  return 0;
}

await runBench(main);
