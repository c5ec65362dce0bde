/**
 * Memory stages of `npm run bench`: many concurrent streams (resident memory per stream, and how
 * long the last of them waits for its first byte), and a soak (resident memory over minutes of
 * steady mixed load). Resident memory is the serving workerd process's VmRSS.
 */
import { request, Agent } from "node:http";
import { readFileSync } from "node:fs";
import { median } from "./stats.ts";

/** Resident memory of a process, KiB (VmRSS). */
export function rssKiB(pid: number): number {
  const m = /^VmRSS:\s+(\d+)\s+kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  if (!m) throw new Error(`no VmRSS for process ${pid}`);
  return Number(m[1]);
}

/** What one round of N concurrent streams did to one target. */
export interface StreamsResult {
  readonly streams: number;
  readonly ok: number;
  readonly errors: readonly string[];
  readonly rssBeforeKiB: number;
  readonly rssPeakKiB: number;
  readonly rssAfterKiB: number;
  /** (peak − before) / streams. */
  readonly perStreamKiB: number;
  readonly firstByteP50Ms: number;
  readonly firstByteMaxMs: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Opens `n` streams at once against `url` (every one its own connection), samples the server's
 * resident memory while they run, and checks that every stream ended with `[DONE]`. The body
 * must make the upstream hold each stream open long enough for all to overlap.
 */
export async function concurrentStreams(opts: { url: string; headers: Record<string, string>; body: string; n: number; pid: number; settleMs: number }): Promise<StreamsResult> {
  const agent = new Agent({ keepAlive: false, maxSockets: Infinity });
  const before = rssKiB(opts.pid);
  let peak = before;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      peak = Math.max(peak, rssKiB(opts.pid));
      await sleep(25);
    }
  })();
  const start = performance.now();
  const firstBytes: number[] = [];
  const errors: string[] = [];
  const one = () =>
    new Promise<void>((resolve) => {
      const url = new URL(opts.url);
      const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: "POST", agent, headers: { ...opts.headers, "content-type": "application/json", "content-length": Buffer.byteLength(opts.body) } }, (res) => {
        let text = "";
        let first = true;
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          if (first) firstBytes.push(performance.now() - start);
          first = false;
          text += chunk;
        });
        res.on("end", () => {
          if (res.statusCode !== 200) errors.push(`http ${res.statusCode}: ${text.slice(0, 200)}`);
          else if (!text.includes("data: [DONE]")) errors.push("incomplete stream (no [DONE])");
          resolve();
        });
        res.on("error", (err) => {
          errors.push(String(err));
          resolve();
        });
      });
      req.on("error", (err) => {
        errors.push(String(err));
        resolve();
      });
      req.end(opts.body);
    });
  await Promise.all(Array.from({ length: opts.n }, one));
  sampling = false;
  await sampler;
  agent.destroy();
  await sleep(opts.settleMs);
  const after = rssKiB(opts.pid);
  firstBytes.sort((a, b) => a - b);
  return {
    streams: opts.n,
    ok: opts.n - errors.length,
    errors: [...new Set(errors)].slice(0, 5),
    rssBeforeKiB: before,
    rssPeakKiB: peak,
    rssAfterKiB: after,
    perStreamKiB: (peak - before) / opts.n,
    firstByteP50Ms: median(firstBytes),
    firstByteMaxMs: firstBytes.at(-1) ?? Number.NaN,
  };
}

/** Resident memory over a soak: sampled every `everyMs` while `load` runs. */
export interface SoakResult {
  readonly samples: readonly { readonly atS: number; readonly rssKiB: number }[];
  /** The first sample after the warm-up. */
  readonly afterWarmupKiB: number;
  readonly maxKiB: number;
  readonly endKiB: number;
  /** end − after warm-up. */
  readonly growthKiB: number;
}

export async function soak(pid: number, load: Promise<unknown>, opts: { warmupMs: number; everyMs: number }): Promise<SoakResult> {
  const samples: { atS: number; rssKiB: number }[] = [];
  const start = performance.now();
  let done = false;
  void load.finally(() => (done = true));
  while (!done) {
    samples.push({ atS: Math.round((performance.now() - start) / 100) / 10, rssKiB: rssKiB(pid) });
    await Promise.race([sleep(opts.everyMs), load.catch(() => undefined)]);
  }
  await load;
  samples.push({ atS: Math.round((performance.now() - start) / 100) / 10, rssKiB: rssKiB(pid) });
  const afterWarmup = samples.find((s) => s.atS * 1000 >= opts.warmupMs) ?? samples[0]!;
  const end = samples.at(-1)!;
  return { samples, afterWarmupKiB: afterWarmup.rssKiB, maxKiB: Math.max(...samples.map((s) => s.rssKiB)), endKiB: end.rssKiB, growthKiB: end.rssKiB - afterWarmup.rssKiB };
}
