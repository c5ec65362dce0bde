/**
 * The options of `npm run bench` (bench/run.ts): its flags, their defaults, and the stages it runs.
 */
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BenchError, numberFlag, parseFlags } from "./entry.ts";

export const USAGE = `Usage: npm run bench -- [options]
  --duration S          measured seconds per run (default 5)
  --warmup S            discarded warm-up seconds before each run (default 1)
  --concurrency N       requests in flight (default 32)
  --runs N              interleaved runs per target and workload; the median is reported (default 3)
  --quick               smoke test: 1 run of 1 s after 0.3 s warm-up (explicit flags still win)
  --buffered-tokens N   output tokens of the buffered workload (default 16)
  --stream-tokens N     output tokens of the streaming workload (default 32)
  --long-stream-tokens N  the bedrock-streaming stage's second answer size, for the cost of one more
                        event; 0 measures --stream-tokens only (default 256)
  --no-access-log       run Sluice with observability.accessLog off (default: as shipped, on)
  --stages LIST         load stages to run, of buffered, streaming, unloaded (buffered, streaming
                        and an MCP tools/call, one in flight each), mcp (MCP tools/call), bedrock-streaming (Sluice streaming from an
                        OpenAI Chat backend against a Bedrock ConverseStream one), cache (a cache hit
                        against a buffered miss), cascade (a two-step cascade against a buffered
                        request), embeddings (POST /v1/embeddings), similarity (a chat request decided
                        on local signals and on a similarity signal, against a plain one) and scale
                        (the buffered request on a Sluice serving a generated publication of 1,000
                        models, 10,000 keys, 100 tenants and 1,000 backends, against the bench
                        config; also that config's validate time, start and resting memory)
                        (default: all ten)
  --streams N           concurrent streams of the memory stage, 0 to skip (default 1000)
  --soak S              seconds of the soak stage (steady mixed load on Sluice), 0 to skip (default 180)
  --out FILE            where the JSON results go (default: the OS temp directory)
  --help                show this text`;

// ---------------------------------------------------------------------------------------------
// Options

export interface Options {
  readonly durationMs: number;
  readonly warmupMs: number;
  readonly concurrency: number;
  readonly runs: number;
  readonly bufferedTokens: number;
  readonly streamTokens: number;
  readonly longStreamTokens: number;
  readonly accessLog: boolean;
  readonly out: string;
  readonly quick: boolean;
  readonly streams: number;
  readonly soakMs: number;
  readonly stages: readonly StageId[];
}

export type StageId = "buffered" | "streaming" | "unloaded" | "mcp" | "embeddings" | "bedrock-streaming" | "cache" | "cascade" | "similarity" | "scale";
export const STAGE_IDS: readonly StageId[] = ["buffered", "streaming", "unloaded", "mcp", "embeddings", "bedrock-streaming", "cache", "cascade", "similarity", "scale"];

function stagesFlag(text: string | undefined): StageId[] {
  if (text === undefined) return [...STAGE_IDS];
  const ids = text.split(",").map((s) => s.trim());
  const unknown = ids.filter((id) => !(STAGE_IDS as readonly string[]).includes(id));
  if (unknown.length > 0 || ids.length === 0) throw new BenchError(`--stages takes a comma-separated list of ${STAGE_IDS.join(", ")}, got '${text}'\n${USAGE}`);
  return STAGE_IDS.filter((id) => ids.includes(id));
}

export function parseOptions(): Options {
  const values = parseFlags(
    {
      duration: { type: "string" },
      warmup: { type: "string" },
      concurrency: { type: "string" },
      runs: { type: "string" },
      quick: { type: "boolean" },
      "buffered-tokens": { type: "string" },
      "stream-tokens": { type: "string" },
      "long-stream-tokens": { type: "string" },
      "no-access-log": { type: "boolean" },
      streams: { type: "string" },
      soak: { type: "string" },
      stages: { type: "string" },
      out: { type: "string" },
      help: { type: "boolean" },
    },
    USAGE,
  );
  const quick = values.quick === true;
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  return {
    durationMs: Math.round(numberFlag("duration", values.duration, quick ? 1 : 5, 0.2, 600, false) * 1000),
    warmupMs: Math.round(numberFlag("warmup", values.warmup, quick ? 0.3 : 1, 0, 120, false) * 1000),
    concurrency: numberFlag("concurrency", values.concurrency, 32, 1, 1024, true),
    runs: numberFlag("runs", values.runs, quick ? 1 : 3, 1, 21, true),
    bufferedTokens: numberFlag("buffered-tokens", values["buffered-tokens"], 16, 1, 4096, true),
    streamTokens: numberFlag("stream-tokens", values["stream-tokens"], 32, 1, 4096, true),
    longStreamTokens: numberFlag("long-stream-tokens", values["long-stream-tokens"], 256, 0, 4096, true),
    accessLog: values["no-access-log"] !== true,
    out: values.out ?? join(tmpdir(), "sluice-bench", `results-${stamp}.json`),
    quick,
    streams: numberFlag("streams", values.streams, quick ? 100 : 1000, 0, 5000, true),
    soakMs: Math.round(numberFlag("soak", values.soak, quick ? 5 : 180, 0, 3600, false) * 1000),
    stages: stagesFlag(values.stages),
  };
}
