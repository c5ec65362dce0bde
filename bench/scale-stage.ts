/**
 * The scale stage of `npm run bench`: what a large publication costs a request, and its start. A
 * second Sluice serves the generated scale config (bench/scale-config.ts: 1,000 logical models,
 * 10,000 keys in 100 tenants, 1,000 backends), its backends pointed at the bench's simulator; the
 * buffered request goes to it with the first key of the first tenant (model `scale-0`) and with
 * the last key of the last tenant (the last entrypoint it may call), paired run by run with the
 * same request to the bench's Sluice with the budgeted key. Every scale tenant has a money budget,
 * as the demo tenant has. Before the load, `sluice config validate`, the start to `/health` and the
 * resting RSS of both configs are taken once, with bench/scale-start.ts's code. The measuring loop
 * stays in run.ts.
 */
import { rmSync } from "node:fs";
import { buildBundle } from "../local-stack/build.ts";
import { startGateway } from "../local-stack/stack.ts";
import type { MeasuredRun, MeasuredSummary } from "./bedrock-streaming.ts";
import type { Endpoint, Stack } from "./bench-stack.ts";
import type { CellSpec } from "./cache-stage.ts";
import { starting, stopOne } from "./children.ts";
import { table } from "./load-runner.ts";
import { cellName, f, pairs, pairTable, type Pair } from "./paired-stage.ts";
import { resolveWorkerPid } from "./proc.ts";
import { SCALE_SIZES, scaleConfigTexts, scaleEntrypoint, scaleKey, scaleKeyEntrypoints } from "./scale-config.ts";
import { serveOnce, startConfigs, THIS_CLI, validateSeconds, writeScaleConfigDir } from "./scale-start.ts";
import { benchGatewayYaml, PUBLIC_MODEL } from "./sluice-config.ts";
import { gatewayPath } from "./workload.ts";

const BUNDLED = "bundled";
const FIRST = "scale-first";
const LAST = "scale-last";

/** Every answer, of either config, came from the entrypoint's default tiers. */
const DEFAULT_DECISION = { name: "x-sluice-decision", value: "default" } as const;

/** The bench's Sluice, budgeted key, public model: the baseline every scale cell is paired with. */
export const BUNDLED_CELL: CellSpec = { kind: BUNDLED, model: PUBLIC_MODEL, headers: {}, expectHeader: DEFAULT_DECISION, upstreamPerRequest: 1 };

/** The last key of the last tenant, and the last entrypoint it may call. */
const LAST_KEY = { t: SCALE_SIZES.tenants - 1, k: SCALE_SIZES.keysPerTenant - 1 };
const LAST_MODEL = scaleKeyEntrypoints(LAST_KEY.t, LAST_KEY.k).at(-1)!;

/** One config's start, as bench/scale-start.ts measures it. */
export interface ScaleStart {
  readonly config: "bundled" | "scale";
  readonly validateS: number;
  readonly startS: number;
  readonly restingMiB: number;
  readonly afterModelsMiB: number;
}

/** `config validate`, the start to `/health` and the resting RSS of the bundled config and of the scale one, once each. */
export async function measureScaleStarts(): Promise<ScaleStart[]> {
  const dir = writeScaleConfigDir();
  try {
    const bundle = buildBundle();
    const starts: ScaleStart[] = [];
    for (const c of startConfigs(dir)) {
      console.log(`scale     config validate and start of the ${c.name} config …`);
      const validateS = validateSeconds(THIS_CLI, c.dir);
      starts.push({ config: c.name, validateS, ...(await serveOnce(THIS_CLI, c.dir, bundle, c.key)) });
    }
    return starts;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Sluice serving the scale config, its backends at the simulator, with the bench's gateway.yaml,
 * and the stage's two endpoints on it; `stop` ends it (it is registered for shutdown as well).
 */
export async function startScaleGateway(stack: Stack, accessLog: boolean): Promise<{ readonly endpoints: readonly Endpoint[]; readonly stop: () => Promise<void> }> {
  const texts = scaleConfigTexts();
  const backends = texts.backends.replaceAll("http://127.0.0.1:9901/v1", `${stack.simUrl}/v1`);
  if (backends === texts.backends) throw new Error("the scale config's backends have no address to point at the simulator");
  console.log("scale     starting Sluice on the scale config …");
  const gw = await starting(() => startGateway({ adminToken: "scale-admin-token", config: { gateway: benchGatewayYaml(stack.simUrl, accessLog), publication: texts.publication, backends } }).then((g) => ({ ...g, name: "Sluice (scale config)" })));
  const pid = resolveWorkerPid(gw.process.pid ?? 0, "workerd");
  const endpoint = (kind: string, key: string, model: string): Endpoint => ({
    name: cellName(kind, "budgeted"),
    description: `client → Sluice (scale config, ${key}) → ${model}`,
    url: (w) => `${gw.publicUrl}${gatewayPath(w)}`,
    headers: { authorization: `Bearer ${key}` },
    model,
    serverPid: pid,
    alive: () => gw.alive() && stack.sim.alive(),
    output: gw.output,
    expectHeader: DEFAULT_DECISION,
    upstreamPerRequest: 1,
  });
  return {
    endpoints: [endpoint(FIRST, scaleKey(0, 0), scaleEntrypoint(0)), endpoint(LAST, scaleKey(LAST_KEY.t, LAST_KEY.k), LAST_MODEL)],
    stop: () => stopOne(gw),
  };
}

/** Each scale cell over the bundled one, and the starts. */
export interface ScaleStageResult<R extends MeasuredRun, S extends MeasuredSummary> {
  readonly first: Pair<R, S>;
  readonly last: Pair<R, S>;
  readonly starts: readonly ScaleStart[];
}

/** The stage's pairs, from the runs (keyed by `cellName`, all with the budgeted key's name). */
export function scaleStageResult<R extends MeasuredRun, S extends MeasuredSummary>(runs: ReadonlyMap<string, readonly R[]>, summarize: (runs: readonly R[]) => S, starts: readonly ScaleStart[]): ScaleStageResult<R, S> {
  const pair = (a: string) => pairs(["budgeted"], { a, b: BUNDLED }, runs, summarize)[0]!;
  return { first: pair(FIRST), last: pair(LAST), starts };
}

/** The stage's tables and the lines that read them. */
export function scaleStageReport(result: ScaleStageResult<MeasuredRun, MeasuredSummary>, o: { readonly concurrency: number; readonly runs: number; readonly durationMs: number; readonly bufferedTokens: number }): string {
  const s = SCALE_SIZES;
  const bundled = result.starts.find((x) => x.config === "bundled");
  const scale = result.starts.find((x) => x.config === "scale");
  const vs = (m: (x: ScaleStart) => number) => (bundled && scale ? ` (×${f(m(scale) / m(bundled), 2)})` : "");
  return [
    `scale: the buffered workload (${o.bufferedTokens} output tokens) to a Sluice serving ${s.models} models, ${s.tenants * s.keysPerTenant} keys in ${s.tenants} tenants and ${s.backends} backends ` +
      `(first: ${scaleKey(0, 0)} → ${scaleEntrypoint(0)}; last: ${scaleKey(LAST_KEY.t, LAST_KEY.k)} → ${LAST_MODEL}) and to the bench's Sluice (budgeted key); ` +
      `concurrency ${o.concurrency}, median of ${o.runs} × ${o.durationMs / 1000} s, interleaved`,
    pairTable([result.first], { a: "scale, first key", b: "bench config" }),
    table(["key", "request", "req/s", "p50 ms", "p99 ms", "workerd CPU ms/req"], [[`budgeted key`, "scale, last key", f(result.last.a.median.rps, 0), f(result.last.a.median.p50Ms, 2), f(result.last.a.median.p99Ms, 2), f(result.last.a.median.serverCpuMsPerReq, 3)]], 2),
    `scale over bench config (median of per-run ratios): first key workerd CPU ×${f(result.first.cpuRatio, 2)}, throughput ×${f(result.first.throughputRatio, 2)}; ` +
      `last key CPU ×${f(result.last.cpuRatio, 2)}, throughput ×${f(result.last.throughputRatio, 2)}`,
    table(
      ["config", "config validate s", "start to /health s", "resting RSS MiB", "after /v1/models MiB"],
      result.starts.map((x) => [x.config, f(x.validateS, 2), f(x.startS, 2), f(x.restingMiB, 0), f(x.afterModelsMiB, 0)]),
      1,
    ),
    `scale over bundled, once each: config validate${vs((x) => x.validateS)}, start${vs((x) => x.startS)}, resting RSS${vs((x) => x.restingMiB)}`,
  ].join("\n");
}
