import type { AdmissionController } from "../admit/admission.ts";
import { admitRequest } from "../admit/admit-phase.ts";
import type { DrainController } from "../admit/drain.ts";
import type { SettleStep } from "../context/debt.ts";
import type { UndoErrorHandler } from "../context/holdings.ts";
import { RequestContext, type AbortReason, type RecordSink } from "../context/request-context.ts";
import type { RequestTrace } from "../context/trace-context.ts";
import type { Clock } from "../deps/clock.ts";
import type { RequestTiming } from "../context/request-timing.ts";
import type { Scheduler } from "../deps/scheduler.ts";
import { GatewayError, toGatewayError } from "../errors/gateway-error.ts";
import type { Explained, KindTurn } from "../kinds/traffic-kind.ts";
import type { PluginReport } from "../context/request-record.ts";
import { compilePlugins } from "../plugins/compile-plugins.ts";
import { byClass, type ImmediateAnswer, type PluginDeps, type PluginFactory, type PluginsByClass, type RequestSafePlugin, type StreamEventPlugin, type TerminalObserverPlugin } from "../plugins/plugin.ts";
import { applyRequestSafe } from "../plugins/request-safe.ts";
import { StreamEventChain } from "../plugins/stream-event-chain.ts";
import type { CompiledPublication } from "../publication/compile-publication.ts";
import type { Principal } from "../publication/principal.ts";
import { memoizedModels, type SignalModels } from "../signals/signal-models.ts";
import { SignalSet, signalIndex, type SignalDefinition, type SignalIndex } from "../signals/signal-set.ts";

/**
 * The runner's extension points, filled by the publication's signals and plugins (each list in
 * the order it runs). Empty lists cost nothing: no signal is computed unless asked for, and a
 * stream without `stream_event_safe` plugins goes straight from decoder to encoder.
 */
export interface Extensions {
  readonly signals: readonly SignalDefinition[];
  readonly requestSafe: readonly RequestSafePlugin[];
  readonly streamEvent: readonly StreamEventPlugin[];
  readonly terminalObservers: readonly TerminalObserverPlugin[];
}

/** No signals, no plugins. */
export const NO_EXTENSIONS: Extensions = { signals: [], requestSafe: [], streamEvent: [], terminalObservers: [] };

const NO_PLUGINS: PluginsByClass = { requestSafe: [], streamEvent: [], observers: [] };
/** No trusted headers: what a kind without a `trusted` hook offers header signals. */
const NO_TRUSTED_HEADERS: ReadonlyMap<string, string> = new Map();

/**
 * The signals of a runtime that declares none: asking for any is a bug, and there is no state to
 * keep. Made on first use: workerd allows no abort signal in the global scope.
 */
let noSignals: SignalSet | undefined;
const NO_SIGNALS = (): SignalSet =>
  (noSignals ??= new SignalSet([], {
    input: () => ({ subject: undefined, principal: undefined, trustedHeaders: new Map(), models: undefined }),
    signal: new AbortController().signal,
    scheduler: { schedule: () => () => {} },
    onFailure: () => {},
  }));

/** What a publication's requests share: its signals' definitions (listed and indexed by name), and its plugins compiled by name. */
interface CompiledExtensions {
  readonly signals: readonly SignalDefinition[];
  readonly signalIndex: SignalIndex;
  readonly plugins: ReadonlyMap<string, PluginFactory>;
}

/** Per publication, built on first use. */
const compiled = new WeakMap<CompiledPublication, CompiledExtensions>();

function compiledOf(publication: CompiledPublication, deps: PluginDeps): CompiledExtensions {
  let c = compiled.get(publication);
  if (c === undefined) {
    const signals = [...publication.signals.values()].map((s) => s.definition);
    compiled.set(publication, (c = { signals, signalIndex: signalIndex(signals), plugins: compilePlugins(publication.source.plugins, deps) }));
  }
  return c;
}
/** What the runner itself uses, for every kind of traffic (built once per isolate). */
export interface RunnerDeps {
  readonly clock: Clock;
  readonly scheduler: Scheduler;
  readonly sink: RecordSink;
  readonly onUndoError: UndoErrorHandler;
  /** The settle phase: pays each ledger debt when its owner ends (src/settle/settle-step.ts). */
  readonly settle: SettleStep;
  readonly drain: DrainController;
  readonly admission: AdmissionController;
  /** The publication every request is decided under (its revision is on each record). */
  readonly publication: CompiledPublication;
  /** Signals and plugins; absent: none. */
  readonly extensions?: Extensions | undefined;
  /** The tenant's response cache partition, for cache plugins (see `PluginDeps`); absent: they neither serve nor store. */
  readonly cacheOf?: PluginDeps["cacheOf"];
  /** Internal failures (a hook that threw something not a GatewayError), cancellations, failed signals: for logs. */
  readonly log: (event: Readonly<Record<string, unknown>>) => void;
}

/** Where a request's context starts: its ids, its trace, and the request it runs inside, if any. */
export interface RunStart {
  readonly requestId: string;
  readonly receivedAt: number;
  readonly trace: RequestTrace;
  readonly waitUntil: (p: Promise<unknown>) => void;
  /** A sub-call's parent: its end ends this request, and its drain ticket covers it. */
  readonly parent?: RequestContext | undefined;
  /** Model calls the request's model-backed signals may make on its behalf (a model request's sub-calls). */
  readonly signalModels?: SignalModels | undefined;
  /**
   * Explain mode ({@link Runner.explain}): the request is decided and never dispatched.
   * `offline`: its model-backed signals are not computed (unknown, `offline`).
   */
  readonly explain?: { readonly offline: boolean } | undefined;
}

/** The first half's outcome: go on with {@link Runner.dispatch}, or the request already has its answer (and has ended). */
export type Prepared<R> = { readonly kind: "dispatch" } | { readonly kind: "answered"; readonly reply: R };

/**
 * The one runner: every request — a model call, an MCP call, a sub-call made inside another
 * request — goes through here. It owns the request's context (and so its holdings, its debts and
 * its terminal), enters each phase in order (a checkpoint for deadline, drain and cancellation
 * between phases), calls the kind's hooks and the extension points at their defined places, runs
 * the admit phase itself, and ends the request through one failure path whatever throws:
 *
 * ```
 * authenticate → decode → authorize → decide (signals, on first ask)      prepare()
 *   → request_safe plugins → reserve → admit → invoke → respond           dispatch()
 *   (stream_event_safe plugins on each event of a stream)
 * terminal, once: attempts ended, holdings undone, debts paid (settle), record logged, terminal observers
 * ```
 *
 * A hook may answer early (see {@link Early}); the runner then skips to respond, or completes.
 */
export class Runner<R> {
  readonly ctx: RequestContext;
  readonly #deps: RunnerDeps;
  readonly #extensions: Extensions;
  readonly #turn: KindTurn<R>;
  readonly #subcall: boolean;
  readonly #signalModels: SignalModels | undefined;
  readonly #compiled: CompiledExtensions;
  #principal: Principal | undefined;
  #signals: SignalSet | undefined;
  /** The request's own plugin instances (its entrypoint's and decision's), once decide has run. */
  #plugins: PluginsByClass = NO_PLUGINS;
  #prepared = false;
  readonly #explain: { readonly offline: boolean } | undefined;
  /** The error the request ended with, once it failed. */
  #failure: GatewayError | undefined;

  constructor(deps: RunnerDeps, start: RunStart, turn: (ctx: RequestContext) => KindTurn<R>) {
    this.#deps = deps;
    this.#extensions = deps.extensions ?? NO_EXTENSIONS;
    this.#subcall = start.parent !== undefined;
    this.#signalModels = start.signalModels === undefined ? undefined : memoizedModels(start.signalModels);
    this.#compiled = compiledOf(deps.publication, { cacheOf: deps.cacheOf, log: deps.log });
    const ctx = new RequestContext({
      requestId: start.requestId,
      receivedAt: start.receivedAt,
      clock: deps.clock,
      scheduler: deps.scheduler,
      sink: deps.sink,
      waitUntil: start.waitUntil,
      onUndoError: deps.onUndoError,
      settle: deps.settle,
      parent: start.parent,
      trace: start.trace,
    });
    ctx.record.publicationRevision = deps.publication.revision;
    this.#explain = start.explain;
    // An explain's sub-requests (its signals' embeddings) are part of the explain.
    if (start.explain !== undefined || start.parent?.record.explain === true) ctx.record.explain = true;
    // An explain is not traffic: nothing observes its end as a request's.
    if (start.explain === undefined) for (const p of this.#extensions.terminalObservers) ctx.observe((view) => p.observe(view));
    this.ctx = ctx;
    this.#turn = turn(ctx);
  }

  /** The authenticated caller, once phase 1 ran. */
  get principal(): Principal | undefined {
    return this.#principal;
  }

  /** Stops the request from outside (client disconnect): releases everything there and then. */
  abort(reason: AbortReason): void {
    this.ctx.abort(reason);
  }

  /** Where the request's time went so far: the gateway's own and the upstreams' (for `Server-Timing`). */
  timing(): RequestTiming {
    return this.ctx.timing();
  }

  /** Ends whatever is left of the request (idempotent). */
  close(): void {
    this.ctx.finish({ kind: "completed" });
  }

  /** authenticate → decode → authorize → decide. */
  async prepare(): Promise<Prepared<R>> {
    const { ctx } = this;
    const turn = this.#turn;
    try {
      ctx.enter("authenticate");
      const principal = await turn.authenticate();
      this.#principal = principal;
      ctx.record.tenant = principal.tenantId;
      ctx.record.key = principal.keyId;
      ctx.record.chargeTo = principal.chargeTo;
      // The body is read only now, after authentication.
      ctx.enter("decode");
      const decoded = await turn.decode();
      if (decoded) return { kind: "answered", reply: this.#early(decoded) };
      ctx.enter("authorize");
      const authorized = await turn.authorize();
      if (authorized) return { kind: "answered", reply: this.#early(authorized) };
      ctx.enter("decide");
      const decided = await turn.decide(this.#signalsOf());
      if (decided) return { kind: "answered", reply: this.#early(decided) };
      this.#plugins = this.#instantiate();
      this.#prepared = true;
      return { kind: "dispatch" };
    } catch (err) {
      return { kind: "answered", reply: this.#fail(err) };
    }
  }

  /** request_safe plugins → reserve → admit → invoke → respond (settle runs as each attempt and the request end). */
  async dispatch(): Promise<R> {
    if (this.#explain !== undefined) throw new Error("an explain is never dispatched");
    if (!this.#prepared) throw new Error("dispatch() before prepare() asked for it");
    this.#prepared = false;
    const { ctx } = this;
    const turn = this.#turn;
    let streaming = false;
    try {
      const answered = await this.#requestSafe();
      if (answered !== undefined) {
        // Answered by a plugin (a cache hit): no reserve, admit or invoke, so nothing is charged or sent.
        if (turn.answer === undefined) throw new Error(`a plugin answered a ${turn.kind} request, which cannot be answered that way`);
        ctx.enter("respond");
        const out = turn.answer(answered.response, this.#streamEvents());
        streaming = out.streaming;
        if (!streaming) ctx.finish({ kind: "completed" });
        return out.reply;
      }
      ctx.enter("reserve");
      await turn.reserve();
      ctx.enter("admit");
      // A sub-call takes no drain ticket: it runs inside its parent's.
      const lease = await admitRequest(ctx, this.#deps.admission, this.#subcall ? undefined : this.#deps.drain, turn.admission());
      ctx.enter("invoke");
      await turn.invoke(lease);
      ctx.checkpoint();
      ctx.enter("respond");
      const out = turn.respond(this.#streamEvents());
      streaming = out.streaming;
      if (!streaming) ctx.finish({ kind: "completed" });
      // Nothing asks a signal once the answer streams; their input holds the request.
      else this.#signals?.releaseInput();
      return out.reply;
    } catch (err) {
      return this.#fail(err);
    } finally {
      // Belt and braces: no path out of dispatch leaves the request open, except into its stream.
      if (!streaming) ctx.finish({ kind: "completed" });
    }
  }

  /**
   * Explain mode: authenticate → decode → authorize → decide, then the `request_safe` plugins on
   * the explain's own copy of the request, reporting what they would do (their changes are
   * dropped, a refusal is the answer), then the terminal. Nothing is reserved, admitted, sent or
   * charged; the record is marked an explain and its plugin reports stay out of it (an explain
   * redacted nothing anyone sent).
   */
  async explain(): Promise<Explained> {
    if (this.#explain === undefined) throw new Error("explain() on a request that is not an explain");
    const plugins: PluginReport[] = [];
    const prepared = await this.prepare();
    let decided = false;
    if (prepared.kind === "dispatch") {
      this.#prepared = false;
      decided = true;
      try {
        await this.#requestSafe((entry) => void plugins.push(entry), false);
        this.ctx.finish({ kind: "completed" });
      } catch (err) {
        this.#fail(err);
      }
    }
    return { decided, phase: this.ctx.record.phase, refusal: this.#failure, signals: this.#signals?.evaluated() ?? new Map(), plugins };
  }

  /** The answer's `stream_event_safe` plugins (the runtime's, then the request's own) as one chain; undefined when there are none. */
  #streamEvents(): StreamEventChain | undefined {
    const streamEvent = this.#plugins.streamEvent.length === 0 ? this.#extensions.streamEvent : byClass([...this.#extensions.streamEvent, ...this.#plugins.streamEvent]).streamEvent;
    return streamEvent.length > 0 ? new StreamEventChain(streamEvent) : undefined;
  }

  /** Both halves, for a kind whose adapter has nothing to do between them. */
  async run(): Promise<R> {
    const prepared = await this.prepare();
    return prepared.kind === "answered" ? prepared.reply : await this.dispatch();
  }

  /** The request's signals: one set per request, each signal computed on its first ask (by decide or a plugin). */
  #signalsOf(): SignalSet {
    const { ctx } = this;
    const declared = this.#compiled.signals;
    const extra = this.#extensions.signals;
    // Without signals there is nothing to compute or keep: every request shares one empty set.
    if (declared.length === 0 && extra.length === 0) return NO_SIGNALS();
    this.#signals ??= new SignalSet(extra.length === 0 ? this.#compiled.signalIndex : [...declared, ...extra], {
      input: () => ({ subject: this.#turn.subject?.(), principal: this.#principal, trustedHeaders: this.#turn.trusted?.() ?? NO_TRUSTED_HEADERS, models: this.#signalModels }),
      signal: ctx.signal,
      offline: this.#explain?.offline,
      scheduler: this.#deps.scheduler,
      onFailure: (name, err) => this.#deps.log({ kind: "signal_failed", requestId: ctx.requestId, signal: name, error: String(err) }),
    });
    return this.#signals;
  }

  /**
   * The request's own plugins, after decide: its entrypoint's and its decision's (by name), each
   * instantiated for this request alone; their terminal observers are registered now.
   */
  #instantiate(): PluginsByClass {
    const names = this.#turn.plugins?.().names ?? [];
    if (names.length === 0) return NO_PLUGINS;
    const report = (entry: PluginReport) => void this.ctx.record.plugins.push(entry);
    const factories = this.#compiled.plugins;
    const plugins = byClass(
      names.flatMap((name) => {
        const f = factories.get(name);
        // The load check refuses a reference to an undeclared plugin; one that slipped through is a bug.
        if (f === undefined) throw new Error(`plugin ${JSON.stringify(name)} is not declared`);
        return f.instantiate(report);
      }),
    );
    if (this.#explain === undefined) for (const p of plugins.observers) this.ctx.observe((view) => p.observe(view));
    return plugins;
  }

  /**
   * The `request_safe` plugins, after decide and before reserve, on what the kind lets them see;
   * their reports go to `report`, and their change becomes the request when `amend` (an explain's
   * is dropped). An answer a plugin gave is returned (an explain only reports it).
   */
  async #requestSafe(report: (entry: PluginReport) => void = (entry) => void this.ctx.record.plugins.push(entry), amend = true): Promise<ImmediateAnswer | undefined> {
    const own = this.#plugins.requestSafe;
    const plugins = own.length === 0 ? this.#extensions.requestSafe : [...this.#extensions.requestSafe, ...own];
    if (plugins.length === 0) return undefined;
    const subject = this.#turn.subject?.();
    if (subject === undefined) return undefined;
    const changed = await applyRequestSafe(plugins, {
      subject,
      principal: this.#principal!,
      signals: this.#signalsOf(),
      decision: this.#turn.plugins?.().decision,
      report,
      signal: this.ctx.signal,
      facts: this.#turn.facts?.(),
      models: this.#signalModels,
      explain: this.#explain !== undefined,
    });
    this.ctx.checkpoint();
    if (changed.kind === "answer") return amend ? changed : undefined;
    if (amend && changed !== subject) this.#turn.amend?.(changed);
    return undefined;
  }

  #early(e: { readonly kind: "respond" | "complete"; readonly reply: R }): R {
    if (e.kind === "respond") this.ctx.enter("respond");
    this.ctx.finish({ kind: "completed" });
    return e.reply;
  }

  /** The one failure path: what the client hears (the abort's error once aborted), logged, the request ended. */
  #fail(err: unknown): R {
    const error = this.#failureOf(err);
    this.#failure ??= error;
    this.ctx.finish({ kind: "failed", error });
    return this.#turn.failed(error, err);
  }

  #failureOf(err: unknown): GatewayError {
    // A client that left is a cancellation, logged apart so alerts on failures do not fire for
    // clients that hang up; a client's own mistake (4xx) is not logged at all.
    const log = this.#deps.log;
    if (!(err instanceof GatewayError)) log({ kind: "request_failed", ...this.#chain(), code: "internal_error", cause: String(err) });
    else if (err.code === "client_closed") log({ kind: "request_cancelled", ...this.#chain(), code: err.code });
    else if (err.source === "internal") log({ kind: "request_failed", ...this.#chain(), code: err.code, cause: String(err.cause) });
    return toGatewayError(err);
  }

  /** The ids an internal failure's log line carries, as the access log's lines do. */
  #chain(): Record<string, unknown> {
    const r = this.ctx.record;
    const last = this.ctx.attempts.at(-1);
    return {
      requestId: r.requestId,
      traceId: r.trace.traceId,
      spanId: r.trace.spanId,
      publicationRevision: r.publicationRevision,
      entrypoint: r.entrypoint,
      route: r.route,
      callId: r.callId,
      phase: r.phase,
      attemptId: last?.id,
      model: last?.logicalModel,
      modelRevision: last?.modelRevision,
      snapshotRevision: last?.snapshotRevision,
      evidence: last?.evidence ? { class: last.evidence.class, reason: last.evidence.reason } : undefined,
    };
  }
}
