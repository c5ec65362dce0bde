/**
 * The report of one load stage of `npm run bench` (bench/run.ts): every target's medians, and the
 * ratios of Sluice against the null gateway and of the budgeted key against the open one.
 */
import { table } from "./load-runner.ts";
import type { TargetSummary } from "./run-records.ts";
import type { Options, StageId } from "./run-options.ts";
import { TARGETS, type TargetName } from "./bench-stack.ts";
import { MCP_SERVER, type Workload } from "./workload.ts";

// ---------------------------------------------------------------------------------------------
// The report

export interface Ratios {
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

export function ratios(s: Record<TargetName, TargetSummary>): Ratios {
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

export const f = (n: number, digits: number) => (Number.isFinite(n) ? n.toFixed(digits) : "n/a");

/** One measured stage: a workload at a concurrency. */
export interface Stage {
  readonly id: StageId;
  readonly label: string;
  readonly workload: Workload;
  readonly concurrency: number;
}

/** Sluice's two keys and null, as `budgeted +x ms, open +y ms, null +z ms`: each over direct's, or as they are. */
function addedParts(s: Record<TargetName, TargetSummary>, of: (t: TargetSummary) => number, overDirect = true): string {
  const v = (t: TargetSummary) => of(t) - (overDirect ? of(s.direct) : 0);
  return `budgeted ${f(v(s.sluice), 2)} ms, open ${f(v(s["sluice-open"]), 2)} ms, null ${f(v(s.null), 2)} ms${overDirect ? "" : `, direct ${f(of(s.direct), 2)} ms`}`;
}

export function report(st: Stage, o: Options, s: Record<TargetName, TargetSummary>, r: Ratios): string {
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
    // A stream's first byte is its first event, after its headers: where the time added goes.
    ...(w.stream ? [`stream headers p50 added over direct: ${addedParts(s, (t) => t.headersP50Ms)}; headers to first event p50: ${addedParts(s, (t) => t.ttfbP50Ms - t.headersP50Ms, false)}`] : []),
  ].join("\n");
}
