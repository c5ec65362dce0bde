import { AdmissionController, type AdmissionOptions } from "../../../src/admit/admission.ts";
import { DrainController } from "../../../src/admit/drain.ts";
import { attemptBudgetClient, type AttemptBudgetRpc } from "../../../src/call-budget/attempt-budget-client.ts";
import { AttemptBudgetLedger, MemoryAttemptBudgetStore } from "../../../src/call-budget/attempt-budget.ts";
import { loadConfig, type ConfigTexts } from "../../../src/config/load-config.ts";
import type { AttemptRecord } from "../../../src/context/attempt-record.ts";
import type { RequestRecord } from "../../../src/context/request-record.ts";
import type { UndoErrorHandler } from "../../../src/context/holdings.ts";
import type { Scheduler } from "../../../src/deps/scheduler.ts";
import { createEngine } from "../../../src/engine/engine.ts";
import type { Extensions } from "../../../src/engine/runner.ts";
import type { McpDeps } from "../../../src/kinds/mcp/mcp-deps.ts";
import { settleStep } from "../../../src/settle/settle-step.ts";
import type { EngineDeps } from "../../../src/engine/engine-deps.ts";
import type { Ingress } from "../../../src/kinds/model/model-api.ts";
import { GatewayExecutor, type ExecutorDeps } from "../../../src/invoker/executor.ts";
import { budgetLedgerClient } from "../../../src/ledger/ledger-client.ts";
import type { CodecRegistry } from "../../../src/protocol/codec.ts";
import { builtinCodecs } from "../../../src/protocol/registry.ts";
import { compilePublication } from "../../../src/publication/compile-publication.ts";
import type { PinnedSnapshot } from "../../../src/snapshot/pinned-snapshot.ts";
import type { BreakerCache } from "../../../src/traffic/breaker-cache.ts";
import { LoadTracker } from "../../../src/traffic/load-tracker.ts";
import { memoryLedgers } from "../ledger/ledger-fakes.ts";
import { bundledTexts, FakeClock } from "./fixtures.ts";
import type { Seen } from "./executor-harness.ts";

export const DEMO_KEY = "sk-sluice-demo";
export const LIMITED_KEY = "sk-sluice-limited";

/** Timers that fire when the test advances the clock (the request deadline among them). */
export class ManualTimers implements Scheduler {
  readonly #timers: { at: number; fn: () => void; live: boolean }[] = [];
  constructor(private readonly clock: FakeClock) {}
  schedule(delayMs: number, fn: () => void): () => void {
    const t = { at: this.clock.now() + Math.max(0, delayMs), fn, live: true };
    this.#timers.push(t);
    return () => void (t.live = false);
  }
  /** Moves the clock and fires what is due, in time order. */
  advance(ms: number): void {
    const end = this.clock.now() + ms;
    for (;;) {
      const due = this.#timers.filter((t) => t.live && t.at <= end).sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      due.live = false;
      this.clock.t = Math.max(this.clock.t, due.at);
      due.fn();
    }
    this.clock.t = end;
  }
}

export interface EngineHarnessOptions {
  readonly texts?: ConfigTexts;
  readonly snapshot?: () => Promise<PinnedSnapshot>;
  readonly respond?: (seen: Seen, n: number) => Response | Promise<Response>;
  readonly admission?: AdmissionOptions;
  readonly executor?: Partial<ExecutorDeps>;
  readonly breakers?: BreakerCache;
  readonly ledgerUnreachable?: boolean;
  /** Runs before every ledger reservation (a fault can be injected there). */
  readonly beforeReserve?: () => Promise<void> | void;
  /** Runs before every call-budget unit is taken. */
  readonly beforeCallBudget?: () => Promise<void> | void;
  readonly codecs?: CodecRegistry;
  /** The drain's budget wait (default: never ends on its own). */
  readonly drainWait?: (ms: number) => Promise<void>;
  /** Signals and plugins at the runner's extension points (default: none). */
  readonly extensions?: Extensions;
  /** The MCP servers and policy (default: none, so `beginMcp` answers nothing). */
  readonly mcp?: McpDeps;
}

/**
 * The real engine over fakes at every boundary: a fake fetch, in-memory ledgers and attempt
 * budgets, a real admission controller and drain, manual timers. Everything a request took is
 * observable afterwards: the admission and drain counts, the ledger's attempts, the records.
 */
export function engineHarness(opts: EngineHarnessOptions = {}) {
  const clock = new FakeClock();
  const timers = new ManualTimers(clock);
  const config = loadConfig(opts.texts ?? bundledTexts);
  const publication = compilePublication(config.publication);
  const seen: Seen[] = [];
  const attempts: AttemptRecord[] = [];
  const requests: RequestRecord[] = [];
  const background: Promise<unknown>[] = [];
  const logs: Record<string, unknown>[] = [];
  const undoErrors: { err: unknown; what: Parameters<UndoErrorHandler>[1] }[] = [];
  const ledgerClock = { get now() { return clock.now(); } };
  const ledgers = memoryLedgers(ledgerClock);
  const stripes = new Map(publication.budgets.tenants().map((t) => [t.root, t.stripes]));
  /** Every settle and release, by attempt id: each reserved attempt must end exactly once. */
  const endings = new Map<string, string[]>();
  const ledger = budgetLedgerClient(
    (name) => {
      if (opts.ledgerUnreachable) throw new Error("ledger unreachable");
      const o = ledgers.objectFor(name);
      const ended = (id: string, how: string) => endings.set(id, [...(endings.get(id) ?? []), how]);
      return {
        ...o,
        reserve: async (id, args) => {
          await opts.beforeReserve?.();
          return o.reserve(id, args);
        },
        settle: async (id, actual, detail) => (ended(id, "settle"), o.settle(id, actual, detail)),
        release: async (id) => (ended(id, "release"), o.release(id)),
      };
    },
    { stripes: (root) => stripes.get(root) ?? 1 },
  );
  const callBudgetLedger = new AttemptBudgetLedger(new MemoryAttemptBudgetStore());
  const callBudgets = attemptBudgetClient((): AttemptBudgetRpc => ({
    consume: async (id, announced) => {
      await opts.beforeCallBudget?.();
      return callBudgetLedger.consume(id, { ...announced, now: clock.now() });
    },
    peek: async (id) => callBudgetLedger.peek(id, clock.now()),
  }));
  const admission = new AdmissionController(clock, timers, opts.admission ?? { limits: { global: 8, perBackend: 8 } });
  const drain = new DrainController(clock, opts.drainWait ?? (() => new Promise(() => {})));
  let n = 0;
  const codecs = opts.codecs ?? builtinCodecs;
  const invoker = new GatewayExecutor({
    codecs,
    credentials: { get: () => "provider-secret" },
    load: new LoadTracker(clock),
    clock,
    rng: { next: () => 0.5 },
    sleep: async () => {},
    fetch: async (input, init) => {
      const s = { url: String(input), headers: new Headers(init?.headers), body: JSON.parse(String(init?.body)) };
      seen.push(s);
      const signal = init?.signal as AbortSignal | undefined;
      if (signal?.aborted) throw new DOMException("aborted", "AbortError");
      return opts.respond ? opts.respond(s, ++n) : Response.json({ id: "x", choices: [{ index: 0, message: { role: "assistant", content: "Hi!" }, finish_reason: "stop" }], usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 } });
    },
    ...opts.executor,
  });
  let ids = 0;
  const deps: EngineDeps = {
    publication,
    codecs,
    clock,
    scheduler: timers,
    newRequestId: () => `req_sub${String(++ids).padStart(28, "0")}`,
    requestDeadlineMs: config.gateway.traffic.requestDeadlineMs,
    streamTimeouts: { firstTokenMs: config.gateway.traffic.firstTokenTimeoutMs, idleMs: config.gateway.traffic.streamIdleTimeoutMs },
    drain,
    admission,
    snapshot: opts.snapshot ?? (() => Promise.reject(new Error("no snapshot in this harness"))),
    invoker,
    reserve: { ledger, callBudgets, log: (e) => logs.push({ ...e }) },
    settle: settleStep({ ledger, log: (e) => logs.push({ ...e }) }),
    extensions: opts.extensions,
    mcp: opts.mcp,
    breakers: opts.breakers,
    health: undefined,
    sink: { attemptFinished: (a) => attempts.push(structuredClone(a) as AttemptRecord), requestFinished: (r) => requests.push({ ...r }) },
    onUndoError: (err, what) => undoErrors.push({ err, what }),
    log: (e) => logs.push({ ...e }),
  };
  const engine = createEngine(deps);
  let requestNo = 0;
  /** An OpenAI chat request from the demo key unless told otherwise. */
  const ingress = (body: unknown, over: Partial<Ingress> = {}): Ingress => ({
    requestId: `req_${String(++requestNo).padStart(32, "0")}`,
    receivedAt: clock.now(),
    protocol: "openai-chat",
    apiKey: DEMO_KEY,
    readBody: async () => body,
    trustedHeaders: new Map(),
    waitUntil: (p) => void background.push(p),
    ...over,
  });
  /** Lets every settlement and background report run. */
  const settled = async () => {
    for (let i = 0; i < 5; i++) await Promise.all(background.splice(0));
  };
  return { engine, deps, config, publication, clock, timers, admission, drain, ledgers, endings, seen, attempts, requests, logs, undoErrors, ingress, settled, background };
}

/** An OpenAI chat body for the bundled `sluice-chat` entrypoint. */
export const chat = (content: string, extra: Record<string, unknown> = {}) => ({ model: "sluice-chat", messages: [{ role: "user", content }], ...extra });
