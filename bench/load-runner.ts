/**
 * What the two bench drivers (`run.ts`, `ledger.ts`) share: running the load generator as a child
 * process, single HTTP exchanges for checks and control calls, and the plain-text result tables.
 */
import { spawn } from "node:child_process";
import { request as httpRequest, type Agent, type IncomingHttpHeaders } from "node:http";
import { join } from "node:path";
import { captureOutput, register, stopOne } from "./children.ts";
import { BenchError } from "./entry.ts";
import type { LoadResult, LoadSpec } from "./load-spec.ts";
import type { Workload } from "./workload.ts";

/**
 * Runs `bench/load.ts` (the closed-loop load generator) as a child process, registered with
 * `children.ts` so a shutdown stops it, and resolves with the result it prints. Rejects with a
 * {@link BenchError} carrying the generator's output when it fails, overruns or prints no result.
 */
export function runLoad(spec: LoadSpec): Promise<LoadResult> {
  // Warm-up, measurement, the slowest requests' timeouts and a margin for start and teardown.
  const budgetMs = spec.warmupMs + spec.durationMs + 2 * spec.requestTimeoutMs + 20_000;
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [join(import.meta.dirname, "load.ts"), JSON.stringify(spec)], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    proc.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    const output = captureOutput(proc);
    let exited = false;
    const exit = new Promise<void>((r) => proc.once("exit", () => ((exited = true), r())));
    const child = register({
      name: "load generator",
      process: proc,
      async stop() {
        if (exited) return;
        proc.kill("SIGTERM");
        const t = setTimeout(() => proc.kill("SIGKILL"), 3000);
        await exit;
        clearTimeout(t);
      },
    });
    const timer = setTimeout(() => proc.kill("SIGKILL"), budgetMs);
    proc.once("error", (err) => reject(new BenchError(`load generator could not start: ${String(err)}`)));
    proc.once("exit", (code, signal) => {
      clearTimeout(timer);
      void stopOne(child);
      if (code !== 0) return reject(new BenchError(`load generator exited with ${signal ?? `code ${code}`}:\n${output()}`));
      try {
        resolve(JSON.parse(stdout.trim().split("\n").pop() ?? "") as LoadResult);
      } catch {
        reject(new BenchError(`load generator printed no result:\n${output()}`));
      }
    });
  });
}

/** A complete HTTP answer, body decoded as UTF-8. */
export interface Answer {
  readonly status: number;
  readonly text: string;
  readonly headers: Readonly<IncomingHttpHeaders>;
}

/**
 * One HTTP exchange, failing after `timeoutMs` without an answer. Without `agent` it uses a fresh
 * connection: control calls happen seconds apart, and a pooled connection the server has meanwhile
 * closed would fail the call for no good reason. A loop of timed requests passes a keep-alive
 * agent instead, as the load generator uses.
 */
export function exchange(url: string, method: string, headers: Record<string, string>, body: string | undefined, timeoutMs: number, agent: Agent | false = false): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const length = body === undefined ? {} : { "content-length": String(Buffer.byteLength(body)) };
    const req = httpRequest(url, { method, headers: { ...headers, ...length }, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("error", reject);
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8"), headers: res.headers }));
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on("error", reject);
    req.end(body);
  });
}

/**
 * A plain-text table: a header line, a rule, one line per row, columns two spaces apart. The first
 * `leftAligned` columns (labels) are padded on the right, the rest (figures) on the left.
 */
export function table(header: readonly string[], rows: readonly (readonly string[])[], leftAligned: number): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) => cells.map((c, i) => (i < leftAligned ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}

/** Zero latency everywhere, so the simulator never waits and the proxies' own cost dominates; a chat workload's answer size. */
export function configureSimulator(simUrl: string, w: Workload): Promise<unknown> {
  return simJson(simUrl, "PUT", "/__sim/config", { ...("tokens" in w ? { tokens: w.tokens } : {}), "latency-ms": 0, "ttft-ms": 0, "token-interval-ms": 0 });
}

/** A JSON call to the simulator's control API (`/__sim/…`); any answer but 200 is a {@link BenchError}. */
export async function simJson(simUrl: string, method: "GET" | "PUT", path: string, body?: unknown): Promise<unknown> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const headers: Record<string, string> = payload === undefined ? {} : { "content-type": "application/json" };
  const res = await exchange(`${simUrl}${path}`, method, headers, payload, 10_000);
  if (res.status !== 200) throw new BenchError(`simulator ${method} ${path} answered ${res.status}: ${res.text}`);
  return JSON.parse(res.text) as unknown;
}
