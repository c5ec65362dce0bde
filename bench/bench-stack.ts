/**
 * What `npm run bench` (bench/run.ts) measures against: the simulator, the null gateway and Sluice
 * started on loopback, the endpoints each stage's load goes to, and one measured run of load
 * against one of them (checked request by request and against the simulator's own count).
 */
import { SIMULATOR_API_KEY } from "../local-stack/stack.ts";
import { BenchError } from "./entry.ts";
import { exchange, runLoad, simJson } from "./load-runner.ts";
import { startNullGateway } from "./null-gateway.ts";
import { BACKEND_MODEL, BEDROCK_MODEL, EMBED_BACKEND_MODEL, embeddingsEntrypoint, DEMO_KEY, OPEN_KEY, PUBLIC_MODEL, SIMULATOR_AWS_ARGS, SSE_MODEL, startBenchGateway, startBenchSimulator } from "./sluice-config.ts";
import type { RunRecord } from "./run-records.ts";
import { UNIQUE_MARKER, uniquePrompt, type CellSpec } from "./cache-stage.ts";
import { cellName, type KeyName } from "./paired-stage.ts";
import { clockTicksPerSecond, resolveWorkerPid } from "./proc.ts";
import type { ProtocolName } from "./bedrock-streaming.ts";
import { gatewayPath, invalidBody, MCP_WORKLOAD, requestBody, requestHeaders, simulatorPath, unexpectedHeader, type ExpectedHeader, type Workload } from "./workload.ts";
import type { Options } from "./run-options.ts";

export const REQUEST_TIMEOUT_MS = 30_000;

/** Clock ticks per second of /proc's CPU times. */
export const TICKS = clockTicksPerSecond();

// ---------------------------------------------------------------------------------------------
// Targets

export type TargetName = "direct" | "null" | "sluice" | "sluice-open";
export const TARGETS: readonly TargetName[] = ["direct", "null", "sluice", "sluice-open"];

/** Something a load runs against: a gateway's (or the simulator's) endpoint for a workload. */
export interface Endpoint {
  readonly name: string;
  readonly description: string;
  /** The endpoint a workload's requests go to. */
  readonly url: (w: Workload) => string;
  readonly headers: Readonly<Record<string, string>>;
  readonly model: string;
  /** The process whose CPU time is "server CPU" (the simulator itself for `direct`). */
  readonly serverPid: number;
  readonly alive: () => boolean;
  readonly output: () => string;
  /** A header every answer must carry with a given value (or must not carry). */
  readonly expectHeader?: ExpectedHeader;
  /** Requests each client request makes to the simulator (default 1). */
  readonly upstreamPerRequest?: number;
  /** Every request asks a new prompt (the cache stage's miss): the body carries this marker. */
  readonly uniqueMarker?: string;
}

export interface Target extends Endpoint {
  readonly name: TargetName;
}

export interface Stack {
  readonly simUrl: string;
  readonly simPid: number;
  readonly targets: readonly Target[];
  /** Sluice's admin API, where the books are read. */
  readonly admin: { readonly url: string; readonly token: string };
  /** Sluice (open key) streaming from an OpenAI Chat backend and from a Bedrock one: the bedrock-streaming stage's. */
  readonly protocols: readonly ProtocolTarget[];
  /** A cell of the cache, cascade or similarity stage: Sluice, with either key, asked one kind of request. */
  readonly cell: (spec: CellSpec, key: KeyName) => Endpoint;
  /** The targets, each asking its own embeddings model: the embeddings stage's. */
  readonly embeddingTargets: readonly Target[];
  /** The simulator: the scale stage's gateway calls it too. */
  readonly sim: { readonly url: string; readonly alive: () => boolean; readonly output: () => string };
}

export async function startStack(o: Options): Promise<Stack> {
  const bedrock = o.stages.includes("bedrock-streaming");
  console.log("starting the provider simulator …");
  // With the Bedrock stage, the simulator verifies every Bedrock request's SigV4 signature.
  const sim = await startBenchSimulator(["--history", "0", ...(bedrock ? SIMULATOR_AWS_ARGS : [])]);
  const simPid = sim.process.pid ?? 0;

  console.log("building the gateway bundle (when stale) and starting Sluice on workerd …");
  const looper = o.stages.includes("cache") || o.stages.includes("cascade");
  const embeddings = o.stages.includes("embeddings") || o.stages.includes("similarity");
  const sluice = await startBenchGateway(sim.url, { name: "Sluice (workerd)", accessLog: o.accessLog, mcp: o.stages.includes("mcp") || o.stages.includes("unloaded"), bedrock, looper, embeddings });
  const sluicePid = resolveWorkerPid(sluice.process.pid ?? 0, "workerd");
  const viaSluice = (name: ProtocolName, model: string, description: string): ProtocolTarget => ({
    name,
    description,
    url: (w) => `${sluice.publicUrl}${gatewayPath(w)}`,
    headers: { authorization: `Bearer ${OPEN_KEY}` },
    model,
    serverPid: sluicePid,
    alive: () => sluice.alive() && sim.alive(),
    output: sluice.output,
  });

  console.log("starting the null gateway on workerd …");
  const nul = await startNullGateway({ upstreamUrl: `${sim.url}/v1`, upstreamKey: SIMULATOR_API_KEY, upstreamModel: BACKEND_MODEL, upstreamEmbedModel: EMBED_BACKEND_MODEL, upstreamMcpUrl: `${sim.url}${simulatorPath(MCP_WORKLOAD)}` });

  /** A gateway in front of the simulator, called with the public model and one of its keys. */
  const gatewayTarget = (name: TargetName, description: string, base: string, key: string, serverPid: number, gw: { alive(): boolean; output: Target["output"] }): Target => ({
    name,
    description,
    url: (w) => `${base}${gatewayPath(w)}`,
    headers: { authorization: `Bearer ${key}` },
    model: PUBLIC_MODEL,
    serverPid,
    alive: () => gw.alive() && sim.alive(),
    output: gw.output,
  });
  const targets: Target[] = [
    {
      name: "direct",
      description: "client → simulator",
      url: (w) => `${sim.url}${simulatorPath(w)}`,
      headers: { authorization: `Bearer ${SIMULATOR_API_KEY}` },
      model: BACKEND_MODEL,
      serverPid: simPid,
      alive: sim.alive,
      output: sim.output,
    },
    gatewayTarget("null", "client → null-gateway Worker (workerd) → simulator", nul.url, DEMO_KEY, resolveWorkerPid(nul.pid, "workerd"), nul),
    gatewayTarget("sluice", "client → Sluice (workerd) → simulator", sluice.publicUrl, DEMO_KEY, sluicePid, sluice),
    gatewayTarget("sluice-open", "the same Sluice process, a key of a tenant without budgets", sluice.publicUrl, OPEN_KEY, sluicePid, sluice),
  ];
  // The embeddings entrypoint is this tree's shipped one, which a null gateway maps to the simulator's embedding model.
  const embedModel = embeddings ? embeddingsEntrypoint() : PUBLIC_MODEL;
  const embeddingModels: Record<TargetName, string> = { direct: EMBED_BACKEND_MODEL, null: embedModel, sluice: embedModel, "sluice-open": embedModel };
  return {
    simUrl: sim.url,
    simPid,
    sim: { url: sim.url, alive: sim.alive, output: sim.output },
    targets,
    embeddingTargets: targets.map((t) => ({ ...t, model: embeddingModels[t.name] })),
    admin: { url: sluice.adminUrl, token: sluice.adminToken },
    cell: (spec, key) => ({
      ...viaSluice("sse", spec.model, `client → Sluice (${key} key) → ${spec.model}: ${spec.kind}`),
      name: cellName(spec.kind, key),
      headers: { authorization: `Bearer ${key === "open" ? OPEN_KEY : DEMO_KEY}`, ...spec.headers },
      expectHeader: spec.expectHeader,
      upstreamPerRequest: spec.upstreamPerRequest,
      ...(spec.unique ? { uniqueMarker: UNIQUE_MARKER } : {}),
    }),
    protocols: bedrock
      ? [
          viaSluice("sse", SSE_MODEL, "client → Sluice (open key) → simulator over OpenAI Chat: an SSE stream"),
          viaSluice("bedrock", BEDROCK_MODEL, "client → Sluice (open key) → simulator over Bedrock ConverseStream: SigV4-signed, a binary event stream"),
        ]
      : [],
  };
}

// ---------------------------------------------------------------------------------------------
// Simulator control

interface SimStats {
  readonly total: number;
  readonly outcomes: Readonly<Record<string, number>>;
}

export const simStats = (simUrl: string) => simJson(simUrl, "GET", "/__sim/stats") as Promise<SimStats>;

/** Sluice (open key) streaming from one backend protocol: the bedrock-streaming stage's targets. */
export interface ProtocolTarget extends Endpoint {
  readonly name: ProtocolName;
}

// ---------------------------------------------------------------------------------------------
// Running load

/** A target's request body for `w`; with a marker for the load generator to make each prompt new, when the target asks for that. */
const bodyOf = (t: Endpoint, w: Workload): string => (t.uniqueMarker === undefined ? requestBody(w, t.model) : uniquePrompt(requestBody(w, t.model)));

/** One request per target, checked like the load generator checks them, so a broken target fails fast and readably. */
export async function preflight(t: Endpoint, w: Workload): Promise<void> {
  let status: number;
  let text: string;
  let headers: Awaited<ReturnType<typeof exchange>>["headers"];
  try {
    ({ status, text, headers } = await exchange(t.url(w), "POST", requestHeaders(w, t.headers), bodyOf(t, w).replace(UNIQUE_MARKER, "preflight"), REQUEST_TIMEOUT_MS));
  } catch (err) {
    throw new BenchError(`${t.name}: the ${w.name} check request failed: ${String(err)}\n${t.output()}`);
  }
  const problem = status < 200 || status > 299 ? `HTTP ${status}` : (invalidBody(w, text) ?? (t.expectHeader && unexpectedHeader(t.expectHeader, headers[t.expectHeader.name])));
  if (problem !== undefined) throw new BenchError(`${t.name}: the ${w.name} check request got ${problem}:\n${text.slice(0, 2000)}\n${t.output()}`);
}

export async function oneRun(stack: Stack, t: Endpoint, w: Workload, o: Options, run: number, concurrency: number): Promise<RunRecord> {
  const before = await simStats(stack.simUrl);
  const result = await runLoad({
    url: t.url(w),
    headers: t.headers,
    body: bodyOf(t, w),
    ...(t.uniqueMarker ? { uniqueMarker: t.uniqueMarker } : {}),
    workload: w,
    ...(t.expectHeader ? { expectHeader: t.expectHeader } : {}),
    concurrency,
    warmupMs: o.warmupMs,
    durationMs: o.durationMs,
    requestTimeoutMs: REQUEST_TIMEOUT_MS,
    cpuPids: { server: t.serverPid, simulator: stack.simPid },
    clockTicksPerSecond: TICKS,
  });
  if (!t.alive()) throw new BenchError(`${t.name}: a server process exited during the run:\n${t.output()}`);
  const after = await simStats(stack.simUrl);
  const anomalies: Record<string, number> = {};
  for (const [kind, n] of Object.entries(after.outcomes)) {
    const delta = n - (before.outcomes[kind] ?? 0);
    if (kind !== "completed" && delta > 0) anomalies[kind] = delta;
  }
  const per = (ms: number | undefined) => (result.requests > 0 && ms !== undefined ? ms / result.requests : Number.NaN);
  return {
    run,
    result,
    serverCpuMsPerReq: per(result.cpuMs.server),
    simCpuMsPerReq: per(result.cpuMs.simulator),
    clientCpuMsPerReq: per(result.clientCpuMs),
    upstreamAnomalies: anomalies,
    upstreamRequests: after.total - before.total,
    upstreamPerRequest: t.upstreamPerRequest ?? 1,
  };
}
