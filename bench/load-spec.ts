/** The contract between the orchestrator (`run.ts`) and the load generator child (`load.ts`). */
import type { ExpectedHeader, Workload } from "./workload.ts";

export interface LoadSpec {
  /** Full URL of the workload's endpoint (chat completions, or an MCP server's). */
  readonly url: string;
  /** The target's own headers (its credential); the workload's are added to them. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  /**
   * When set, each request's body has this marker replaced by a number no other request of the run
   * sends: every prompt is new (a response cache misses on each, and stores each).
   */
  readonly uniqueMarker?: string;
  readonly workload: Workload;
  /** A response header every answer must carry with exactly this value (or must not carry); anything else is an error. */
  readonly expectHeader?: ExpectedHeader;
  readonly concurrency: number;
  readonly warmupMs: number;
  readonly durationMs: number;
  /** A request taking longer than this is aborted and counted as an error. */
  readonly requestTimeoutMs: number;
  /** Processes whose CPU time is read at the edges of the measured window, by label. */
  readonly cpuPids: Readonly<Record<string, number>>;
  readonly clockTicksPerSecond: number;
}

export interface LatencySummary {
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly max: number;
  readonly mean: number;
}

export interface LoadResult {
  /** Requests started (and finished) in the measured window. */
  readonly requests: number;
  readonly ok: number;
  readonly errors: number;
  /** Error counts by kind (`http 502`, `incomplete stream (no [DONE])`, `ECONNRESET`, …). */
  readonly errorKinds: Readonly<Record<string, number>>;
  /** A few distinct error details (status and start of the body) for the report. */
  readonly errorSamples: readonly string[];
  /** From the window's start until its last request finished. */
  readonly elapsedMs: number;
  /** Successful requests per second. */
  readonly rps: number;
  /** Whole-request latency of successful requests, ms. */
  readonly latencyMs: LatencySummary;
  /** Time to the first response body byte of successful requests, ms. */
  readonly ttfbMs: LatencySummary;
  /** Time to the response's headers of successful requests, ms (absent in results from before it was measured). */
  readonly headersMs?: LatencySummary | undefined;
  /** The `gw` figure of successful answers' `Server-Timing` header (the gateway's own time as it reports it), ms; absent when none carried one. */
  readonly serverTimingGwMs?: LatencySummary | undefined;
  /** CPU time (user + system) each watched process spent in the window, ms. */
  readonly cpuMs: Readonly<Record<string, number>>;
  /** CPU time of the load generator itself in the window, ms. */
  readonly clientCpuMs: number;
  /** CPUs the whole machine kept busy on average during the window. */
  readonly machineBusyCores: number;
  /** Of those, what neither the watched processes nor the load generator used: other load on the machine. */
  readonly otherBusyCores: number;
  readonly warmup: { readonly requests: number; readonly errors: number; readonly errorKinds: Readonly<Record<string, number>>; readonly errorSamples: readonly string[] };
}
