/**
 * The decide phase's own work, measured in this process with the gateway's own code (the same V8
 * as workerd's, none of its I/O), for `bench:decisions`:
 *
 * - local decisions: a request's signal set, the local signals its decisions read, the decisions
 *   tried in order, the plan and its record — everything the decide phase does for a request that
 *   local signals decide;
 * - a similarity signal: its text read once, the request's embedding memo, the signal's deadline
 *   timer and abort wiring, the cosine against every utterance, the value built — with the
 *   embedding itself answered at once from memory (what the embedding's sub-request costs is what
 *   `bench:decisions` measures on the gateway).
 *
 * Each iteration is a fresh request (its own decoded body, signal set and memo), so nothing a
 * request keeps is reused; the body's decoding is timed apart and taken off. Times are this
 * process's CPU time, not the wall clock: on a busy machine the process waits its turn.
 */
import { decideChat, type DecisionInput } from "../src/decide/decide.ts";
import { loadConfig, type ConfigTexts } from "../src/config/load-config.ts";
import { systemScheduler } from "../src/deps/scheduler.ts";
import { decodeChatRequest } from "../src/protocol/openai-chat/decode-request.ts";
import type { NeutralRequest } from "../src/protocol/neutral.ts";
import { compilePublication } from "../src/publication/compile-publication.ts";
import { memoizedModels, type SignalModels } from "../src/signals/signal-models.ts";
import { SignalSet, signalIndex, type SignalIndex } from "../src/signals/signal-set.ts";
import { embed as simulatorEmbedding } from "../simulator/embedding.ts";
import { BenchError } from "./entry.ts";
import { median } from "./stats.ts";

/** Microseconds of CPU per request: the median batch, and every batch. */
export interface Work {
  readonly usPerRequest: number;
  readonly perBatchUs: readonly number[];
}

const cpuUs = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

/** `one` timed over `batches` × `perBatch` calls after one batch of warm-up, less `baseline` (the body's decoding) timed alike. */
async function timed(one: () => unknown, baseline: () => unknown, batches: number, perBatch: number): Promise<Work> {
  const perBatchUs: number[] = [];
  for (let b = 0; b <= batches; b++) {
    const t0 = cpuUs();
    for (let i = 0; i < perBatch; i++) await one();
    const t1 = cpuUs();
    for (let i = 0; i < perBatch; i++) baseline();
    const t2 = cpuUs();
    if (b > 0) perBatchUs.push((t1 - t0 - (t2 - t1)) / perBatch);
  }
  return { usPerRequest: median(perBatchUs), perBatchUs };
}

function setOf(index: SignalIndex, request: NeutralRequest, models: SignalModels | undefined): SignalSet {
  return new SignalSet(index, {
    input: () => ({ subject: { kind: "model", request }, principal: undefined, trustedHeaders: new Map(), models }),
    signal: new AbortController().signal,
    scheduler: systemScheduler,
    onFailure: (name, err) => {
      throw new BenchError(`signal ${name} failed: ${String(err)}`);
    },
  });
}

/**
 * The decide phase of `model` (an entrypoint of `texts`' publication whose decisions local
 * signals settle) for the chat request `body`; also returns the decision's name.
 */
export async function localDecideWork(texts: ConfigTexts, model: string, body: string, batches = 7, perBatch = 20_000): Promise<Work & { readonly decision: string }> {
  const publication = compilePublication(loadConfig(texts).publication);
  const ep = publication.entrypoints.get(model);
  if (ep === undefined) throw new BenchError(`the bench publication has no entrypoint ${model}`);
  const index = signalIndex([...publication.signals.values()].map((s) => s.definition));
  const parsed = JSON.parse(body) as unknown;
  let decision = "";
  const one = () => {
    const request = decodeChatRequest(parsed);
    const now = Date.now();
    const input: DecisionInput = { requestId: "req_bench", receivedAt: now, now, clock: Date.now, clientProtocol: "openai-chat", trustedHeaders: new Map(), requestDeadlineMs: 60_000 };
    const out = decideChat(publication, ep, request, input, setOf(index, request, undefined));
    if (out instanceof Promise) throw new BenchError(`${model}: the decide phase waited for a model-backed signal`);
    decision = out.record.name;
  };
  const work = await timed(one, () => decodeChatRequest(parsed), batches, perBatch);
  return { ...work, decision };
}

/** The similarity signal `name` of `texts`' publication on the chat request `body`; also returns its value. */
export async function similarityWork(texts: ConfigTexts, name: string, body: string, batches = 7, perBatch = 4000): Promise<Work & { readonly value: unknown }> {
  const publication = compilePublication(loadConfig(texts).publication);
  const signal = publication.signals.get(name);
  if (signal === undefined || signal.kind !== "similarity") throw new BenchError(`the bench publication has no similarity signal ${name}`);
  const index = signalIndex([signal.definition]);
  const vectors = new Map<string, Float32Array>();
  // The simulator's vectors, so the scores are those the gateway computes against it; answered at once.
  const backend: SignalModels = { embed: (_model, texts) => Promise.resolve(texts.map((t) => vectors.get(t) ?? vectors.set(t, simulatorEmbedding(t)).get(t)!)) };
  const parsed = JSON.parse(body) as unknown;
  let value: unknown;
  const one = async () => {
    const set = setOf(index, decodeChatRequest(parsed), memoizedModels(backend));
    await set.startModels([name], Date.now() + 500, Date.now());
    value = set.peek(name);
  };
  const work = await timed(one, () => decodeChatRequest(parsed), batches, perBatch);
  return { ...work, value };
}
