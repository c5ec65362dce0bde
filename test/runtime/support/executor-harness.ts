import { loadConfig } from "../../../src/config/load-config.ts";
import type { AttemptRecord } from "../../../src/context/attempt-record.ts";
import type { SettleStep } from "../../../src/context/debt.ts";
import { RequestContext, type RecordSink } from "../../../src/context/request-context.ts";
import type { RequestRecord } from "../../../src/context/request-record.ts";
import { planRequest } from "../decide/decide-support.ts";
import type { DispatchPlan } from "../../../src/decide/dispatch-plan.ts";
import type { Scheduler } from "../../../src/deps/scheduler.ts";
import type { GatewayError } from "../../../src/errors/gateway-error.ts";
import { GatewayExecutor, type Execution, type InvocationContext } from "../../../src/invoker/executor.ts";
import type { NeutralRequest } from "../../../src/protocol/neutral.ts";
import { compilePublication } from "../../../src/publication/compile-publication.ts";
import { builtinCodecs } from "../../../src/protocol/registry.ts";
import { normalizeSnapshot } from "../../../src/snapshot/normalize.ts";
import { pinSnapshot, type PinnedSnapshot } from "../../../src/snapshot/pinned-snapshot.ts";
import { LoadTracker } from "../../../src/traffic/load-tracker.ts";
import { bundledTexts, FakeClock } from "./fixtures.ts";

/*
 * An executor over a fake fetch, plans from the bundled publication and snapshots of local
 * backends: shared by the executor's tests and the billing tests that run attempts through it.
 */
export const config = loadConfig(bundledTexts);
export const publication = compilePublication(config.publication);
export const clock = new FakeClock();

/** Timers that never fire: deadlines are seen at checkpoints against the fake clock. */
export const idleScheduler: Scheduler = { schedule: () => () => {} };

/** The settle step of a context whose test reserves nothing: a debt reaching it is the test's mistake, and says so. */
export const noSettle: SettleStep = () => {
  throw new Error("this test's request context has no settle step: pass one where the test reserves");
};

/** A request context over the fake clock whose sink collects what finished. */
export function requestContext(sink: Partial<RecordSink> = {}, requestId = "req_1", opts: { readonly settle?: SettleStep; readonly waitUntil?: (p: Promise<unknown>) => void } = {}): RequestContext {
  return new RequestContext({
    requestId,
    receivedAt: clock.now(),
    clock,
    scheduler: idleScheduler,
    sink: { attemptFinished: sink.attemptFinished ?? (() => {}), requestFinished: sink.requestFinished ?? (() => {}) },
    waitUntil: opts.waitUntil ?? (() => {}),
    settle: opts.settle ?? noSettle,
    onUndoError: (err) => {
      throw err;
    },
  });
}

/**
 * The executor's options as these tests pass them: the request's signal stands for the client;
 * `settle` and `waitUntil` are the request's (a test that reserves passes the settle step it checks).
 */
export interface RunOptions extends Omit<InvocationContext, "request"> {
  readonly clientSignal?: AbortSignal | undefined;
  readonly settle?: SettleStep | undefined;
  readonly waitUntil?: ((p: Promise<unknown>) => void) | undefined;
}

/** An execution with the request's attempts and context, for assertions. */
export type RunResult = Execution & { readonly attempts: readonly AttemptRecord[]; readonly context: RequestContext };

/** The client-facing error of a failed execution (fails the test when it succeeded). */
export function errorOf(r: RunResult): GatewayError {
  if (r.ok) throw new Error(`expected a failure, got a ${r.kind} answer`);
  return r.error;
}

/** The harness's fake backends answer on loopback: any port of 127.0.0.1 is allowed. */
export const LOOPBACK_EGRESS = { allow: ["127.0.0.1"] } as const;

export async function snapshot(backends: { name: string; port: number; caps?: string[]; weight?: number; responseHeaders?: string[] }[], selector = "weighted-round-robin", revision = 1): Promise<PinnedSnapshot> {
  const src = {
    version: 1,
    backends: backends.map((b) => ({
      name: b.name,
      protocol: "openai-chat",
      baseUrl: `http://127.0.0.1:${b.port}/v1`,
      credential: { secret: "SIM_KEY" },
      capabilities: b.caps ?? ["chat", "streaming", "stream-usage", "tools", "embeddings", "moderations", "logprobs"],
      responseHeaders: b.responseHeaders,
    })),
    pools: ["sim-small", "sim-large", "sim-embed", "sim-moderate", "sim-small-scored", "sim-large-scored"].map((name) => ({
      name,
      selector,
      members: backends.map((b) => ({ backend: b.name, model: `${name}-upstream`, weight: b.weight ?? 1 })),
    })),
  };
  const r = await normalizeSnapshot(src, { supportedProtocols: builtinCodecs.ids(), logprobsProtocols: builtinCodecs.logprobsIds(), requirements: publication.poolRequirements, egress: LOOPBACK_EGRESS });
  if (!r.ok) throw new Error(JSON.stringify(r.reasons));
  return pinSnapshot({ revision, digest: r.digest, snapshot: r.snapshot });
}

/**
 * A snapshot whose pools (the bundled publication's) each have one member, on a backend of the
 * protocol given: `sim-small` (chat-small, the first tier of sluice-chat's default route) on port
 * 9101 with upstream model `claude-small-upstream`, `sim-large` (and `sim-embed`, `sim-moderate`) on port 9102; the cascade's scored pools on an OpenAI Chat backend on port 9103.
 */
export async function protocolSnapshot(protocols: Record<"sim-small" | "sim-large", "anthropic-messages" | "openai-chat">): Promise<PinnedSnapshot> {
  const backend = (name: string, protocol: string, port: number) => ({
    name,
    protocol,
    baseUrl: `http://127.0.0.1:${port}/v1`,
    credential: { secret: "SIM_KEY", scheme: protocol === "anthropic-messages" ? "x-api-key" : "bearer" },
    capabilities: ["chat", "streaming", "stream-usage", "tools", "embeddings", "moderations"],
  });
  const src = {
    version: 1,
    backends: [
      backend("small", protocols["sim-small"], 9101),
      backend("large", protocols["sim-large"], 9102),
      // The bundled cascade's pools need log-probabilities, which only an OpenAI Chat backend carries; never called here.
      { ...backend("scored", "openai-chat", 9103), capabilities: ["chat", "streaming", "stream-usage", "logprobs"] },
    ],
    pools: [
      { name: "sim-small", members: [{ backend: "small", model: "claude-small-upstream" }] },
      { name: "sim-large", members: [{ backend: "large", model: "claude-large-upstream" }] },
      { name: "sim-embed", members: [{ backend: "large", model: "embed-upstream" }] },
      { name: "sim-moderate", members: [{ backend: "large", model: "moderate-upstream" }] },
      { name: "sim-small-scored", members: [{ backend: "scored", model: "small-upstream" }] },
      { name: "sim-large-scored", members: [{ backend: "scored", model: "large-upstream" }] },
    ],
  };
  const r = await normalizeSnapshot(src, { supportedProtocols: builtinCodecs.ids(), logprobsProtocols: builtinCodecs.logprobsIds(), requirements: publication.poolRequirements, egress: LOOPBACK_EGRESS });
  if (!r.ok) throw new Error(JSON.stringify(r.reasons));
  return pinSnapshot({ revision: 1, digest: r.digest, snapshot: r.snapshot });
}

export interface Seen {
  url: string;
  headers: Headers;
  body: any;
}

/**
 * Runs plans through an executor in a fresh request context per call, the way the engine does:
 * the plan's deadline set on the context, and the client's signal aborting it.
 */
export function runner(inner: GatewayExecutor, attempts: AttemptRecord[], requests: RequestRecord[] = []) {
  return {
    inner,
    async execute(p: DispatchPlan, request: NeutralRequest, opts: RunOptions): Promise<RunResult> {
      const { clientSignal, settle, waitUntil, ...rest } = opts;
      const context = requestContext({ attemptFinished: (a) => attempts.push({ ...a }), requestFinished: (r) => requests.push({ ...r }) }, p.requestId, { ...(settle ? { settle } : {}), ...(waitUntil ? { waitUntil } : {}) });
      context.setDeadline(p.deadlineAt);
      if (clientSignal?.aborted) context.abort("client_disconnected");
      else clientSignal?.addEventListener("abort", () => context.abort("client_disconnected"), { once: true });
      const execution = await inner.execute(p, request, { ...rest, request: context });
      return { ...execution, attempts: [...context.attempts], context };
    },
  };
}

export function harness(
  respond: (seen: Seen) => Response | Promise<Response>,
  secrets: Record<string, string> = { SIM_KEY: "provider-secret" },
  extra: Partial<ConstructorParameters<typeof GatewayExecutor>[0]> = {},
) {
  const seen: Seen[] = [];
  const attempts: AttemptRecord[] = [];
  const inner = new GatewayExecutor({
    codecs: builtinCodecs,
    credentials: { get: (n) => secrets[n] },
    load: new LoadTracker(clock),
    clock,
    rng: { next: () => 0.5 },
    fetch: async (input, init) => {
      const s = { url: String(input), headers: new Headers(init?.headers), body: JSON.parse(String(init?.body)) };
      seen.push(s);
      if ((init?.signal as AbortSignal | undefined)?.aborted) throw new DOMException("aborted", "AbortError");
      return respond(s);
    },
    ...extra,
  });
  return { executor: runner(inner, attempts), seen, attempts };
}

export const okBody = (model = "x") =>
  Response.json({
    id: "chatcmpl-provider",
    model,
    choices: [{ index: 0, message: { role: "assistant", content: "Hi!" }, finish_reason: "stop" }],
    usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 },
  });

/** A plan from the bundled publication for an OpenAI chat body, as the decide phase makes it. */
export function plan(body: Record<string, unknown> = {}, headers = new Map<string, string>()): { plan: DispatchPlan; request: NeutralRequest } {
  const request = builtinCodecs.get("openai-chat")!.decodeRequest({ model: "sluice-chat", messages: [{ role: "user", content: "hello" }], ...body });
  const ep = publication.entrypoints.get(request.model)!;
  const p = planRequest(publication, ep, request, { requestId: "req_1", receivedAt: clock.now(), now: clock.now(), clock: () => clock.now(), clientProtocol: "openai-chat", trustedHeaders: headers, requestDeadlineMs: config.gateway.traffic.requestDeadlineMs });
  // One attempt unless a test asks for more: these tests are about a single attempt's handling.
  return { plan: { ...p, retry: { maxAttempts: 1 } }, request };
}
export const live = () => new AbortController().signal;
