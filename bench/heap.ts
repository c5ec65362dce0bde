/**
 * `npm run bench:heap`: what a held stream costs Sluice's isolate, from V8 heap snapshots taken
 * through workerd's inspector, and (with `--soak`) the isolate's heap beside the process's resident
 * memory over minutes of mixed load.
 *
 *   npm run bench:heap -- [--key open|budgeted] [--streams 200] [--hold 20] [--top 30] [--soak 0] [--out DIR]
 *
 * Streams: after a warm-up, a snapshot; then `--streams` streams are opened and held (the simulator
 * sends the first token at once and the rest `--hold` seconds later), a second snapshot while all
 * are held, a third once they have all ended. The table is the difference by constructor (object
 * count and self size, per stream): what each open stream keeps alive, and what is left after.
 * Self sizes, not retained sizes: the rows add up to the heap's growth.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { request, Agent } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../local-stack/ports.ts";
import { BenchError, numberFlag, parseFlags, runBench } from "./entry.ts";
import { cdp, inspectorTarget, type Inspector } from "./inspector.ts";
import { configureSimulator, runLoad, simJson, table } from "./load-runner.ts";
import { rssKiB } from "./memory.ts";
import { clockTicksPerSecond, resolveWorkerPid } from "./proc.ts";
import { keyFlag, PUBLIC_MODEL, startBenchGateway, startBenchSimulator } from "./sluice-config.ts";
import { gatewayPath, requestBody, type ChatWorkload, type Workload } from "./workload.ts";

const USAGE = `Usage: npm run bench:heap -- [options]
  --key open|budgeted   the open key (no budgets) or the demo key (strict budgets) (default budgeted)
  --streams N           streams held open at once for the snapshots, 0 to skip (default 200)
  --hold S              seconds each stream is held between its first and its last token (default 20)
  --prompt-kib N        pad each held stream's prompt to about N KiB, to see whether a stream keeps
                        its prompt (default 0: the bench's short prompt)
  --top N               rows of the by-constructor table (default 30)
  --soak S              seconds of mixed load (buffered and streaming, 8 in flight each) with RSS and
                        the isolate's heap sampled, 0 to skip (default 0)
  --out DIR             where the .heapsnapshot files go (default: the OS temp directory)
  --help                show this text`;

// ---------------------------------------------------------------------------------------------
// Snapshots

interface HeapSnapshot {
  readonly snapshot: { readonly meta: { readonly node_fields: readonly string[]; readonly node_types: readonly [readonly string[], ...unknown[]] } };
  readonly nodes: readonly number[];
  readonly strings: readonly string[];
}

/** Count and self size by constructor (objects) or by kind (strings, arrays, code …). */
type Census = Map<string, { count: number; bytes: number }>;

/** Takes a snapshot (V8 collects garbage first), writes it to `file` and returns its census. */
async function snapshot(inspector: Inspector, file: string): Promise<{ census: Census; totalBytes: number }> {
  const chunks: string[] = [];
  const stop = inspector.on("HeapProfiler.addHeapSnapshotChunk", (p) => chunks.push((p as { chunk: string }).chunk));
  await inspector.send("HeapProfiler.collectGarbage");
  await inspector.send("HeapProfiler.takeHeapSnapshot", { reportProgress: false, captureNumericValue: false });
  stop();
  const text = chunks.join("");
  writeFileSync(file, text);
  return census(JSON.parse(text) as HeapSnapshot);
}

function census(s: HeapSnapshot): { census: Census; totalBytes: number } {
  const fields = s.snapshot.meta.node_fields;
  const types = s.snapshot.meta.node_types[0];
  const width = fields.length;
  const typeAt = fields.indexOf("type");
  const nameAt = fields.indexOf("name");
  const sizeAt = fields.indexOf("self_size");
  const out: Census = new Map();
  let totalBytes = 0;
  for (let i = 0; i < s.nodes.length; i += width) {
    const type = types[s.nodes[i + typeAt]!]!;
    const name = s.strings[s.nodes[i + nameAt]!]!;
    const bytes = s.nodes[i + sizeAt]!;
    // As DevTools groups them: objects by constructor, closures by function, the rest by kind.
    const key =
      type === "object" || type === "native" ? name
      : type === "closure" ? `(closure) ${name || "(anonymous)"}`
      : type === "string" || type === "concatenated string" || type === "sliced string" ? "(string)"
      : type === "hidden" || type === "object shape" ? `(system) ${name.replace(/ \/ .*$/, "")}`
      : `(${type})`;
    const row = out.get(key) ?? { count: 0, bytes: 0 };
    row.count++;
    row.bytes += bytes;
    out.set(key, row);
    totalBytes += bytes;
  }
  return { census: out, totalBytes };
}

function diffTable(before: Census, after: Census, perN: number, top: number): string {
  const keys = new Set([...before.keys(), ...after.keys()]);
  const rows = [...keys]
    .map((k) => ({ k, count: (after.get(k)?.count ?? 0) - (before.get(k)?.count ?? 0), bytes: (after.get(k)?.bytes ?? 0) - (before.get(k)?.bytes ?? 0) }))
    .filter((r) => r.bytes !== 0 || r.count !== 0)
    .sort((a, b) => Math.abs(b.bytes) - Math.abs(a.bytes));
  const total = rows.reduce((n, r) => n + r.bytes, 0);
  return [
    table(
      ["bytes/stream", "objects/stream", "constructor or kind"],
      rows.slice(0, top).map((r) => [(r.bytes / perN).toFixed(0), (r.count / perN).toFixed(2), r.k]),
      0,
    ),
    `total: ${(total / perN / 1024).toFixed(2)} KiB per stream (${rows.length} rows, ${Math.min(top, rows.length)} shown)`,
  ].join("\n");
}

// ---------------------------------------------------------------------------------------------
// Held streams

/** The bench's chat body, its prompt padded to about `kib` KiB (each request its own text, as real prompts are). */
function paddedBody(w: ChatWorkload, kib: number): string {
  const body = JSON.parse(requestBody(w, PUBLIC_MODEL)) as { messages: { content: string }[] };
  if (kib > 0) body.messages[0]!.content += ` ${"lorem ipsum ".repeat(Math.ceil((kib * 1024) / 12))}`.slice(0, kib * 1024);
  return JSON.stringify(body);
}

interface Held {
  /** Resolves once every stream has had its first bytes. */
  readonly allStarted: Promise<void>;
  /** Resolves once every stream has ended; the errors, deduplicated. */
  readonly allEnded: Promise<string[]>;
}

function holdStreams(o: { url: string; headers: Record<string, string>; body: string; n: number }): Held {
  const agent = new Agent({ keepAlive: false, maxSockets: Infinity });
  const errors: string[] = [];
  let started = 0;
  let markStarted!: () => void;
  const allStarted = new Promise<void>((r) => (markStarted = r));
  const started1 = () => {
    if (++started === o.n) markStarted();
  };
  const one = () =>
    new Promise<void>((resolve) => {
      const url = new URL(o.url);
      const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: "POST", agent, headers: { ...o.headers, "content-type": "application/json", "content-length": Buffer.byteLength(o.body) } }, (res) => {
        let text = "";
        let first = true;
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          if (first) started1();
          first = false;
          text += chunk;
        });
        res.on("end", () => {
          if (first) started1();
          if (res.statusCode !== 200) errors.push(`http ${res.statusCode}: ${text.slice(0, 200)}`);
          else if (!text.includes("data: [DONE]")) errors.push("incomplete stream (no [DONE])");
          resolve();
        });
        res.on("error", (err) => {
          if (first) started1();
          errors.push(String(err));
          resolve();
        });
      });
      req.on("error", (err) => {
        started1();
        errors.push(String(err));
        resolve();
      });
      req.end(o.body);
    });
  const allEnded = Promise.all(Array.from({ length: o.n }, one)).then(() => {
    agent.destroy();
    return [...new Set(errors)].slice(0, 5);
  });
  return { allStarted, allEnded };
}

// ---------------------------------------------------------------------------------------------
// Soak

interface HeapUsage {
  readonly usedSize: number;
  readonly totalSize: number;
}

const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function soakWithHeap(inspector: Inspector, pid: number, load: Promise<unknown>, everyMs: number): Promise<{ atS: number; rss: number; used: number; total: number }[]> {
  const samples: { atS: number; rss: number; used: number; total: number }[] = [];
  const start = performance.now();
  let done = false;
  void load.finally(() => (done = true));
  const sample = async () => {
    const h = (await inspector.send("Runtime.getHeapUsage")) as HeapUsage;
    samples.push({ atS: Math.round((performance.now() - start) / 1000), rss: rssKiB(pid) * 1024, used: h.usedSize, total: h.totalSize });
  };
  while (!done) {
    await sample();
    await Promise.race([sleep(everyMs), load.catch(() => undefined)]);
  }
  await load;
  await sample();
  return samples;
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  const values = parseFlags(
    {
      key: { type: "string" },
      streams: { type: "string" },
      hold: { type: "string" },
      top: { type: "string" },
      "prompt-kib": { type: "string" },
      soak: { type: "string" },
      out: { type: "string" },
      help: { type: "boolean" },
    },
    USAGE,
  );
  const key = keyFlag(values.key ?? "budgeted", USAGE);
  const n = numberFlag("streams", values.streams, 200, 0, 5000, true);
  const holdMs = numberFlag("hold", values.hold, 20, 1, 600, false) * 1000;
  const top = numberFlag("top", values.top, 30, 1, 500, true);
  const promptKib = numberFlag("prompt-kib", values["prompt-kib"], 0, 0, 1024, true);
  const soakMs = numberFlag("soak", values.soak, 0, 0, 3600, false) * 1000;
  const outDir = values.out ?? join(tmpdir(), "sluice-bench", `heap-${new Date().toISOString().replace(/[:.]/g, "-")}`);
  mkdirSync(outDir, { recursive: true });

  console.log("starting the simulator and Sluice with the inspector open …");
  const sim = await startBenchSimulator(["--history", "0"]);
  const inspectorPort = await freePort();
  const sluice = await startBenchGateway(sim.url, { name: "Sluice (workerd)", accessLog: true, inspectorPort });
  const pid = resolveWorkerPid(sluice.process.pid ?? 0, "workerd");
  const streaming: ChatWorkload = { name: "streaming", stream: true, tokens: 32 };
  const buffered: ChatWorkload = { name: "buffered", stream: false, tokens: 16 };
  const spec = (w: Workload, concurrency: number, durationMs: number) => ({
    url: `${sluice.publicUrl}${gatewayPath(w)}`,
    headers: { authorization: `Bearer ${key.key}` },
    body: requestBody(w, PUBLIC_MODEL),
    workload: w,
    concurrency,
    warmupMs: 0,
    durationMs,
    requestTimeoutMs: 30_000,
    cpuPids: {},
    clockTicksPerSecond: clockTicksPerSecond(),
  });
  await configureSimulator(sim.url, streaming);
  console.log(`warming up (3 s of buffered and streaming, ${key.name} key) …`);
  await Promise.all([runLoad(spec(streaming, 8, 3000)), runLoad(spec(buffered, 8, 3000))]);
  const inspector = await cdp(await inspectorTarget(inspectorPort));
  await inspector.send("HeapProfiler.enable");
  const report = (text: string) => {
    console.log(`\n${text}\n`);
  };

  if (n > 0) {
    // First a round without snapshots (taking one grows the process by its serialised size): the
    // process's growth per stream, and how much of it is the isolate's heap.
    await simJson(sim.url, "PUT", "/__sim/config", { tokens: 20, "latency-ms": 0, "ttft-ms": 0, "token-interval-ms": 100 });
    await inspector.send("HeapProfiler.collectGarbage");
    const base = { rss: rssKiB(pid) * 1024, heap: (await inspector.send("Runtime.getHeapUsage")) as HeapUsage };
    const peak = { rss: base.rss, used: base.heap.usedSize, total: base.heap.totalSize };
    const round = holdStreams({ url: spec(streaming, 1, 0).url, headers: spec(streaming, 1, 0).headers, body: paddedBody(streaming, promptKib), n });
    let ended = false;
    const roundEnded = round.allEnded.finally(() => (ended = true));
    while (!ended) {
      const h = (await inspector.send("Runtime.getHeapUsage")) as HeapUsage;
      peak.rss = Math.max(peak.rss, rssKiB(pid) * 1024);
      peak.used = Math.max(peak.used, h.usedSize);
      peak.total = Math.max(peak.total, h.totalSize);
      await sleep(25);
    }
    const roundErrors = await roundEnded;
    if (roundErrors.length > 0) throw new BenchError(`streams failed: ${roundErrors.join("; ")}`);
    const kib = (bytes: number) => (bytes / n / 1024).toFixed(1);
    report(
      [
        `${n} concurrent streams of 20 tokens 100 ms apart (${key.name} key${promptKib > 0 ? `, prompts of ${promptKib} KiB` : ""}), growth from rest to peak, per stream:`,
        `  process RSS ${kib(peak.rss - base.rss)} KiB; isolate heap total ${kib(peak.total - base.heap.totalSize)} KiB, heap used ${kib(peak.used - base.heap.usedSize)} KiB`,
        `  (at rest: RSS ${mib(base.rss)} MiB, heap used ${mib(base.heap.usedSize)} of ${mib(base.heap.totalSize)} MiB)`,
      ].join("\n"),
    );

    const before = await snapshot(inspector, join(outDir, "0-before.heapsnapshot"));
    // Three tokens: the first at once, the second after the hold, so every stream is open and
    // past its first byte when the second snapshot is taken.
    await simJson(sim.url, "PUT", "/__sim/config", { tokens: 3, "latency-ms": 0, "ttft-ms": 0, "token-interval-ms": Math.round(holdMs / 2) });
    console.log(`holding ${n} streams for ${holdMs / 1000} s …`);
    const rssBefore = rssKiB(pid);
    const heldAt = performance.now();
    const held = holdStreams({ url: spec(streaming, 1, 0).url, headers: spec(streaming, 1, 0).headers, body: paddedBody(streaming, promptKib), n });
    await held.allStarted;
    const startedMs = performance.now() - heldAt;
    const rssHeld = rssKiB(pid);
    const usage = (await inspector.send("Runtime.getHeapUsage")) as HeapUsage;
    const during = await snapshot(inspector, join(outDir, "1-held.heapsnapshot"));
    const snapMs = performance.now() - heldAt;
    // A stream that ended before the snapshot finished is not in it: the per-stream figures undercount.
    const late = snapMs > holdMs ? `\nwarning: the snapshot ended ${(snapMs / 1000).toFixed(1)} s after the streams opened, after the hold: pass a longer --hold` : "";
    const errors = await held.allEnded;
    if (errors.length > 0) throw new BenchError(`held streams failed: ${errors.join("; ")}`);
    await configureSimulator(sim.url, streaming);
    const after = await snapshot(inspector, join(outDir, "2-after.heapsnapshot"));
    report(
      [
        `${n} streams held (${key.name} key${promptKib > 0 ? `, prompts of ${promptKib} KiB` : ""}), all past their first byte after ${startedMs.toFixed(0)} ms`,
        `isolate heap: ${mib(before.totalBytes)} MiB live before, ${mib(during.totalBytes)} MiB while held (${((during.totalBytes - before.totalBytes) / n / 1024).toFixed(2)} KiB per stream), ${mib(after.totalBytes)} MiB after they ended`,
        `  (Runtime.getHeapUsage while held, before the snapshot's collection: used ${mib(usage.usedSize)} MiB of ${mib(usage.totalSize)} MiB)`,
        `process RSS: ${mib(rssBefore * 1024)} MiB before, ${mib(rssHeld * 1024)} MiB while held (${((rssHeld - rssBefore) / n).toFixed(1)} KiB per stream)`,
        "",
        "held − before, per stream (live objects after a collection, self sizes):",
        diffTable(before.census, during.census, n, top),
        "",
        "after − before, per stream (what outlives a stream; should be near zero):",
        diffTable(before.census, after.census, n, Math.min(top, 12)),
      ].join("\n") + late,
    );
  }

  if (soakMs > 0) {
    await configureSimulator(sim.url, streaming);
    console.log(`soak ${soakMs / 1000} s of buffered and streaming load (8 in flight each), RSS and isolate heap sampled …`);
    const load = Promise.all([runLoad(spec(streaming, 8, soakMs)), runLoad(spec(buffered, 8, soakMs))]);
    const samples = await soakWithHeap(inspector, pid, load, Math.max(2_000, soakMs / 30));
    const results = await load;
    const requests = results.reduce((k, r) => k + r.requests, 0);
    const failed = results.reduce((k, r) => k + r.errors, 0);
    await inspector.send("HeapProfiler.collectGarbage");
    await sleep(2000);
    const idle = (await inspector.send("Runtime.getHeapUsage")) as HeapUsage;
    const idleRss = rssKiB(pid) * 1024;
    const warm = samples.find((s) => s.atS * 1000 >= Math.min(30_000, soakMs / 5)) ?? samples[0]!;
    const end = samples.at(-1)!;
    const every = Math.max(1, Math.floor(samples.length / 15));
    report(
      [
        `soak: ${soakMs / 1000} s, ${requests} requests, ${failed} failed`,
        table(
          ["at s", "RSS MiB", "heap used MiB", "heap total MiB"],
          samples.filter((_, i) => i % every === 0 || i === samples.length - 1).map((s) => [String(s.atS), mib(s.rss), mib(s.used), mib(s.total)]),
          0,
        ),
        `after warm-up (${warm.atS} s) → end: RSS ${mib(warm.rss)} → ${mib(end.rss)} MiB (${end.rss >= warm.rss ? "+" : ""}${mib(end.rss - warm.rss)}), heap used ${mib(warm.used)} → ${mib(end.used)} MiB, heap total ${mib(warm.total)} → ${mib(end.total)} MiB`,
        `idle after a collection: heap used ${mib(idle.usedSize)} MiB of ${mib(idle.totalSize)} MiB, RSS ${mib(idleRss)} MiB`,
      ].join("\n"),
    );
  }
  inspector.close();
  console.log(`snapshots (Chrome DevTools opens them): ${outDir}`);
  return 0;
}

await runBench(main);
