/**
 * The memory stages of `npm run bench` (bench/run.ts): concurrent streams on every workerd target,
 * and the soak (steady mixed load on Sluice).
 */
import { configureSimulator, runLoad, simJson, table } from "./load-runner.ts";
import { concurrentStreams, soak, type SoakResult, type StreamsResult } from "./memory.ts";
import type { Options } from "./run-options.ts";
import { REQUEST_TIMEOUT_MS, TICKS, type Stack, type TargetName } from "./bench-stack.ts";
import { f } from "./stage-report.ts";
import { requestBody, type ChatWorkload, type Workload } from "./workload.ts";

// ---------------------------------------------------------------------------------------------
// Memory

const mib = (kib: number) => f(kib / 1024, 1);

/**
 * The concurrent-streams stage (every workerd target, one after the other) and the soak stage
 * (Sluice, budgeted key, buffered and streaming load at once).
 */
export async function streamsStage(stack: Stack, o: Options, streaming: ChatWorkload, problems: string[]): Promise<{ reports: string[]; streams: Partial<Record<TargetName, StreamsResult>> }> {
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

export async function soakStage(stack: Stack, o: Options, streaming: ChatWorkload, problems: string[]): Promise<{ reports: string[]; soak: SoakResult | undefined }> {
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
