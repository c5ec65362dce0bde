import type { Clock } from "../deps/clock.ts";
import type { Scheduler } from "../deps/scheduler.ts";
import { GatewayError, type ErrorCode } from "../errors/gateway-error.ts";
import type { AttemptOutcome, AttemptRecord, EvidenceReason } from "./attempt-record.ts";
import type { Debt, Owed, SettleStep } from "./debt.ts";
import { Holdings, type Held, type ResourceKind, type UndoErrorHandler } from "./holdings.ts";
import type { Phase, RequestRecord } from "./request-record.ts";
import { requestTrace, type RequestTrace } from "./trace-context.ts";
import { requestTiming, type RequestTiming } from "./request-timing.ts";
import { UpstreamMeter } from "./upstream-meter.ts";

/** Why a request was stopped from outside its phases. */
export type AbortReason = "client_disconnected" | "deadline" | "drain" | "parent_ended";

/** How a request ended. */
export type RequestEnd =
  | { readonly kind: "completed" }
  | { readonly kind: "failed"; readonly error: GatewayError }
  | { readonly kind: "aborted"; readonly reason: AbortReason };

/**
 * Receives each finished attempt and each finished request exactly once; a request after all its
 * attempts. `waitUntil` keeps I/O the sink starts (an export) alive past the request's answer.
 */
export interface RecordSink {
  attemptFinished(attempt: Readonly<AttemptRecord>): void;
  requestFinished(request: Readonly<RequestRecord>, waitUntil: (p: Promise<unknown>) => void): void;
}

/** What a terminal observer is shown, once, after the request's record went to the logging phase. */
export interface TerminalView {
  readonly record: Readonly<RequestRecord>;
  /** The attempts the request made, in order (those that went out or were refused by config). */
  readonly attempts: readonly Readonly<AttemptRecord>[];
  readonly waitUntil: (p: Promise<unknown>) => void;
}

/** Runs after the terminal, once (a `terminal_observer` plugin, src/plugins/): it cannot change what the client got. */
export type TerminalObserver = (view: TerminalView) => void;

export interface RequestContextInit {
  readonly requestId: string;
  readonly receivedAt: number;
  readonly clock: Clock;
  readonly scheduler: Scheduler;
  readonly sink: RecordSink;
  /** Keeps the runtime alive for work the terminal starts (settlements, breaker reports). */
  readonly waitUntil: (p: Promise<unknown>) => void;
  readonly onUndoError: UndoErrorHandler;
  /** The runner's settle step: pays each debt (a ledger reservation) when its owner ends. */
  readonly settle: SettleStep;
  /** The request's trace (see `requestTrace`); a new unsampled one when not given. */
  readonly trace?: RequestTrace | undefined;
  /** The request a sub-call runs for: its abort aborts this one, and its end ends this one. */
  readonly parent?: RequestContext | undefined;
}

/** A drain's mark on a request (see admit/drain.ts). */
export interface DrainMark {
  readonly cancelled: boolean;
}

/**
 * Debts paid once each, in the order they were registered, by the settle step: when their owner
 * closes, or earlier by `payNow`. A debt registered after the close is paid at once.
 */
class Debts<T> {
  readonly #holdings: Holdings<T>;
  readonly #pay: (debt: Debt, owner: T) => Promise<void>;

  constructor(onError: UndoErrorHandler, pay: (debt: Debt, owner: T) => Promise<void>) {
    this.#holdings = new Holdings<T>(onError);
    this.#pay = pay;
  }

  owe(debt: Debt, owner: () => T): Owed {
    let resolve!: () => void;
    const paid = new Promise<void>((r) => (resolve = r));
    const held = this.#holdings.own(
      "ledger_reservation",
      (o) => {
        // Whoever waits for the payment (a retry, before it reserves again) is never left waiting.
        try {
          void this.#pay(debt, o).then(resolve, resolve);
        } catch (err) {
          resolve();
          throw err;
        }
      },
      owner,
    );
    return { paid, payNow: () => held.release() };
  }

  close(owner: T): void {
    this.#holdings.close(owner);
  }
}

/** The stable code of each abort reason. */
export const ABORT_CODES = {
  client_disconnected: "client_closed",
  deadline: "deadline_exceeded",
  drain: "gateway_draining",
  parent_ended: "client_closed",
} as const satisfies Readonly<Record<AbortReason, ErrorCode>>;

/** The client-facing error for an abort reason; `cause` (for logs) is what failed because of it. */
export function abortError(reason: AbortReason, cause?: unknown): GatewayError {
  const opts = { cause };
  switch (reason) {
    case "client_disconnected":
      return new GatewayError(ABORT_CODES[reason], "The client closed the request.", opts);
    case "deadline":
      return new GatewayError(ABORT_CODES[reason], "The request deadline passed.", opts);
    case "drain":
      // A drain may be an operator's pause (`sluice drain`, then `resume`), not a shutdown: say
      // only what is true in both cases.
      return new GatewayError(ABORT_CODES[reason], "The gateway is draining and admits no new requests for now. Retry shortly or on another instance.", { ...opts, retryAfterSeconds: 1 });
    case "parent_ended":
      return new GatewayError(ABORT_CODES[reason], "The request this call was made for has ended.", opts);
  }
}

/** The outcome and error code an attempt is ended with when its request ends under it. */
function interruption(end: RequestEnd): { outcome: AttemptOutcome; code: ErrorCode; reason: EvidenceReason } {
  if (end.kind === "aborted") {
    const code = ABORT_CODES[end.reason];
    return end.reason === "deadline" ? { outcome: "timeout", code, reason: "timeout" } : { outcome: "client_cancelled", code, reason: "client_cancelled" };
  }
  // The request ended while the attempt was still open: the gateway failed under it.
  return { outcome: "gateway_error", code: end.kind === "failed" ? end.error.code : "internal_error", reason: "protocol_error" };
}

/**
 * One request's life: the resources it holds, its attempts, its deadline and cancellation, and
 * the one terminal that ends it.
 *
 * Ownership rule: whatever a phase acquires is registered here (or on the attempt it belongs to)
 * with its undo at the moment it is taken. {@link end} — reached on success, on an error, on an
 * exception in any phase, and through {@link abort} on a client disconnect, the deadline or a drain
 * — runs every undo exactly once, newest first, ends every open attempt, and hands the request's
 * record to the sink. It is idempotent, and it is synchronous: a client disconnect can leave no
 * time for the request's own code to run again, so everything that must happen then happens inside
 * the abort, and I/O it starts is kept alive with `waitUntil`.
 */
export class RequestContext {
  readonly requestId: string;
  readonly receivedAt: number;
  readonly clock: Clock;
  readonly waitUntil: (p: Promise<unknown>) => void;
  readonly parent: RequestContext | undefined;
  readonly record: RequestRecord;
  /** The time the request spent waiting for upstreams; what is left of its duration is the gateway's own. */
  readonly upstream: UpstreamMeter;
  readonly #scheduler: Scheduler;
  readonly #sink: RecordSink;
  readonly #onUndoError: UndoErrorHandler;
  readonly #controller = new AbortController();
  readonly #holdings: Holdings<void>;
  readonly #debts: Debts<undefined>;
  readonly #settle: SettleStep;
  readonly #observers: TerminalObserver[] = [];
  readonly #open = new Set<AttemptScope>();
  readonly #attempts: AttemptRecord[] = [];
  #deadlineAt = Number.POSITIVE_INFINITY;
  /** The request's one timer: when it is due, and how to cancel it. */
  #timerAt = Number.POSITIVE_INFINITY;
  #cancelTimer: (() => void) | undefined;
  readonly #alarms = new Set<{ readonly at: number; readonly fire: () => void }>();
  #drain: DrainMark | undefined;
  #aborted: AbortReason | undefined;
  #end: RequestEnd | undefined;
  #parentHold: Held | undefined;

  constructor(init: RequestContextInit) {
    this.requestId = init.requestId;
    this.receivedAt = init.receivedAt;
    this.clock = init.clock;
    this.waitUntil = init.waitUntil;
    this.parent = init.parent;
    this.upstream = new UpstreamMeter(init.clock, init.parent?.upstream);
    this.#scheduler = init.scheduler;
    this.#sink = init.sink;
    this.#onUndoError = init.onUndoError;
    this.#holdings = new Holdings<void>(init.onUndoError);
    this.#settle = init.settle;
    this.#debts = new Debts<undefined>(init.onUndoError, (debt) => this.pay(debt, undefined));
    this.record = {
      requestId: init.requestId,
      parentRequestId: init.parent?.requestId,
      receivedAt: init.receivedAt,
      endedAt: undefined,
      tenant: undefined,
      key: undefined,
      chargeTo: undefined,
      entrypoint: undefined,
      route: undefined,
      decision: undefined,
      plugins: [],
      stream: undefined,
      phase: undefined,
      phases: [],
      outcome: undefined,
      errorCode: undefined,
      attempts: [],
      protocol: undefined,
      publicationRevision: undefined,
      callId: undefined,
      trace: init.trace ?? requestTrace(undefined, false, init.parent?.record.trace, () => false),
      content: undefined,
      mcp: undefined,
      a2a: undefined,
      attribution: undefined,
      workload: undefined,
      events: [],
      upstreamMs: undefined,
    };
    if (init.parent) {
      const parent = init.parent;
      // The parent's end is this sub-call's end; until then the sub-call is one of its holdings.
      this.#parentHold = parent.own("subcall", () => this.abort(parent.abortReason ?? "parent_ended"));
      this.#deadlineAt = parent.deadlineAt;
    }
  }

  /** Where the request's time went so far (to its end once it ended): the gateway's own and the upstreams'. */
  timing(): RequestTiming {
    return requestTiming(this.receivedAt, this.upstream, this.#attempts, this.record.endedAt ?? this.clock.now());
  }

  /** Aborted when the request is aborted or ends: everything it started upstream listens to it. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** The request's one absolute deadline (epoch ms); Infinity until a plan sets it. */
  get deadlineAt(): number {
    return this.#deadlineAt;
  }

  /** Why the request was aborted, if it was. */
  get abortReason(): AbortReason | undefined {
    return this.#aborted;
  }

  get ended(): boolean {
    return this.#end !== undefined;
  }

  /** Attempts made so far (those that went out or were refused by the gateway's own config), in order. */
  get attempts(): readonly AttemptRecord[] {
    return this.#attempts;
  }

  /**
   * Sets the deadline (only ever earlier): when it passes, the request is aborted with `deadline`,
   * wherever it is.
   */
  setDeadline(at: number): void {
    if (!(at < this.#deadlineAt)) return;
    this.#deadlineAt = at;
    this.#arm();
  }

  /**
   * Runs `fire` at `at` (epoch ms) unless the returned function is called first: an attempt's own
   * limit, such as the wait for a provider's response headers. It shares the request's one timer
   * with the deadline (a timer each was a visible part of every request's cost); a cleared alarm
   * leaves that timer as it is, and when it fires it re-arms for whatever is left.
   */
  alarm(at: number, fire: () => void): () => void {
    if (this.ended) return () => {};
    const a = { at, fire };
    this.#alarms.add(a);
    this.#arm();
    return () => void this.#alarms.delete(a);
  }

  /** Arms the one timer for the earliest of the deadline and the alarms, unless it is armed early enough. */
  #arm(): void {
    if (this.ended) return;
    let want = this.#deadlineAt;
    for (const a of this.#alarms) if (a.at < want) want = a.at;
    if (want >= this.#timerAt) return;
    this.#cancelTimer?.();
    this.#timerAt = want;
    this.#cancelTimer = this.#scheduler.schedule(want - this.clock.now(), () => this.#timerFired());
  }

  #timerFired(): void {
    this.#timerAt = Number.POSITIVE_INFINITY;
    this.#cancelTimer = undefined;
    // Timers may fire early (capped delays): only what is due runs, and the rest is re-armed.
    const now = this.clock.now();
    for (const a of this.#alarms) {
      if (now < a.at) continue;
      this.#alarms.delete(a);
      a.fire();
    }
    if (now >= this.#deadlineAt) return this.abort("deadline");
    this.#arm();
  }

  /** The request enters a phase: a checkpoint, and the record says where it was. */
  enter(phase: Phase): void {
    this.record.phase = phase;
    this.record.phases.push({ phase, at: this.clock.now() });
    this.checkpoint();
  }

  /** Lets {@link checkpoint} see a drain's mark on this request. */
  watchDrain(mark: DrainMark): void {
    this.#drain = mark;
  }

  /**
   * Called where the request wakes anyway (between phases, before an attempt, when provider
   * headers arrive, on every stream chunk and stream timer): a passed deadline or a drain's mark
   * aborts the request here. Throws the abort's error when the request is aborted.
   */
  checkpoint(): void {
    if (this.#aborted === undefined && !this.ended) {
      if (this.clock.now() >= this.#deadlineAt) this.abort("deadline");
      else if (this.#drainCancelled()) this.abort("drain");
    }
    if (this.#aborted !== undefined) throw abortError(this.#aborted);
  }

  #drainCancelled(): boolean {
    if (this.#drain?.cancelled === true) return true;
    return this.parent !== undefined && this.parent.#drainCancelled();
  }

  /** Registers a request-level resource with its undo, which runs once: at the end or on release. */
  own(kind: ResourceKind, undo: () => void): Held {
    return this.#holdings.own(kind, undo, () => undefined);
  }

  /**
   * Registers what the request owes for a reservation it was granted: the settle step pays it
   * once, when the request ends (after every holding is undone), or earlier through `payNow`.
   */
  owe(debt: Debt): Owed {
    return this.#debts.owe(debt, () => undefined);
  }

  /** Adds a terminal observer: it runs once, after the terminal handed the record to the logging phase. */
  observe(observer: TerminalObserver): void {
    if (this.ended) return;
    this.#observers.push(observer);
  }

  /**
   * Hands one debt to the runner's settle step, keeping its I/O alive past the answer. For the
   * request's own debts and its attempts' (each attempt pays through here when it ends).
   */
  pay(debt: Debt, owner: AttemptRecord | undefined): Promise<void> {
    const paying = this.#settle(debt, owner, this.waitUntil);
    this.waitUntil(paying);
    return paying;
  }

  /** Opens an attempt: its resources are registered on the scope and undone when it ends. */
  openAttempt(record: AttemptRecord): AttemptScope {
    const scope = new AttemptScope(this, record, this.#sink, this.#onUndoError, {
      started: (a) => this.#attempts.push(a),
      closed: (s) => this.#open.delete(s),
    });
    if (this.ended) {
      // Opened after the end (a late continuation): nothing may be sent for it.
      scope.abandon();
      return scope;
    }
    this.#open.add(scope);
    return scope;
  }

  /**
   * Stops the request now: upstream work is aborted and the terminal runs at once. The phases
   * still running (if the runtime lets them) find every later step refused with the abort's error.
   */
  abort(reason: AbortReason): void {
    if (this.ended) return;
    this.#aborted = reason;
    this.#controller.abort(abortError(reason));
    this.finish({ kind: "aborted", reason });
  }

  /**
   * The terminal (idempotent), in order: ends open attempts (each undoes its holdings and pays its
   * debts), undoes the request's holdings newest first, pays the request's debts (the settle
   * step), hands the record to the logging phase, then runs the terminal observers.
   */
  finish(end: RequestEnd): void {
    if (this.#end) return;
    this.#end = end;
    this.#cancelTimer?.();
    this.#cancelTimer = undefined;
    this.#alarms.clear();
    for (const scope of [...this.#open]) scope.interrupt(end);
    this.#holdings.close();
    this.#debts.close(undefined);
    // A request that failed may still have work in flight (a sub-call's fetch): stop it. A request
    // that completed has none, and aborting would cost an error object on every request.
    if (end.kind === "failed" && !this.#controller.signal.aborted) this.#controller.abort(end.error);
    const r = this.record;
    r.endedAt = this.clock.now();
    // Open waits (a stream still being read when a client left) count up to the end.
    if (this.upstream.used) r.upstreamMs = this.upstream.freeze(r.endedAt);
    r.attempts = this.#attempts.map((a) => a.id);
    r.outcome = end.kind === "completed" ? "success" : end.kind === "aborted" ? "cancelled" : "error";
    r.errorCode = end.kind === "failed" ? end.error.code : end.kind === "aborted" ? ABORT_CODES[end.reason] : undefined;
    try {
      this.#sink.requestFinished(r, this.waitUntil);
    } catch (err) {
      this.#onUndoError(err, "record");
    }
    if (this.#observers.length > 0) {
      const view: TerminalView = { record: r, attempts: this.#attempts, waitUntil: this.waitUntil };
      for (const observe of this.#observers) {
        try {
          observe(view);
        } catch (err) {
          this.#onUndoError(err, "terminal_observer");
        }
      }
      this.#observers.length = 0;
    }
    this.#parentHold?.release();
  }
}

/**
 * One attempt's life inside its request. Pre-send holdings (probe permit, call-budget unit) and
 * in-flight ones (load lease, upstream body) are registered here, and so is its debt (its ledger
 * reservation); whichever of {@link finish}, {@link abandon} or the request's end comes first
 * undoes the holdings and pays the debt, once, with the attempt's final record.
 */
export class AttemptScope {
  readonly request: RequestContext;
  readonly record: AttemptRecord;
  readonly #sink: RecordSink;
  readonly #onUndoError: UndoErrorHandler;
  readonly #holdings: Holdings<Readonly<AttemptRecord>>;
  readonly #debts: Debts<AttemptRecord>;
  readonly #hooks: { started(a: AttemptRecord): void; closed(s: AttemptScope): void };
  #state: "preparing" | "started" | "ended" = "preparing";
  /** Ends the attempt's upstream wait: from its start to its end, the whole of a stream included. */
  #endWait: (() => void) | undefined;

  constructor(
    request: RequestContext,
    record: AttemptRecord,
    sink: RecordSink,
    onUndoError: UndoErrorHandler,
    hooks: { started(a: AttemptRecord): void; closed(s: AttemptScope): void },
  ) {
    this.request = request;
    this.record = record;
    this.#sink = sink;
    this.#onUndoError = onUndoError;
    this.#holdings = new Holdings<Readonly<AttemptRecord>>(onUndoError);
    this.#debts = new Debts<AttemptRecord>(onUndoError, (debt, owner) => request.pay(debt, owner));
    this.#hooks = hooks;
  }

  get ended(): boolean {
    return this.#state === "ended";
  }

  /** Registers a holding of this attempt; its undo gets the attempt's final record. */
  own(kind: ResourceKind, undo: (attempt: Readonly<AttemptRecord>) => void): Held {
    return this.#holdings.own(kind, undo, () => this.record);
  }

  /**
   * Registers what the attempt owes for its ledger reservation: the settle step pays it once the
   * attempt ended, from its final record (evidence, usage), after its holdings are undone.
   */
  owe(debt: Debt): Owed {
    return this.#debts.owe(debt, () => this.record);
  }

  /** The attempt goes out (or is refused by the gateway's own config): from now on it is listed and logged. */
  start(): void {
    if (this.#state !== "preparing") return;
    this.#state = "started";
    this.#endWait = this.request.upstream.begin();
    this.record.sentAt = this.request.clock.now();
    this.#hooks.started(this.record);
  }

  /** Ends the attempt with its outcome (idempotent): undoes its holdings, pays its debt, then logs it. */
  finish(outcome: AttemptOutcome, errorCode?: ErrorCode): void {
    if (this.#state === "ended") return;
    if (this.#state === "preparing") this.start();
    this.#state = "ended";
    this.#endWait?.();
    const a = this.record;
    a.endedAt = this.request.clock.now();
    a.outcome = outcome;
    if (errorCode !== undefined) a.errorCode = errorCode;
    this.#holdings.close(a);
    this.#debts.close(a);
    this.#hooks.closed(this);
    try {
      this.#sink.attemptFinished(a);
    } catch (err) {
      this.#onUndoError(err, "record");
    }
  }

  /**
   * Gives the attempt up before anything was sent: its holdings are undone as for an attempt that
   * never happened (nothing to settle, nothing against the backend), and it is neither listed nor
   * logged. After {@link start} this is a {@link finish} with `not_sent` instead.
   */
  abandon(errorCode?: ErrorCode): void {
    if (this.#state === "ended") return;
    this.record.evidence ??= { class: "known_zero", reason: "not_attempted" };
    if (this.#state === "started") return this.finish("not_sent", errorCode);
    this.#state = "ended";
    const a = this.record;
    a.endedAt = this.request.clock.now();
    a.outcome = "not_sent";
    if (errorCode !== undefined) a.errorCode = errorCode;
    this.#holdings.close(a);
    this.#debts.close(a);
    this.#hooks.closed(this);
  }

  /** The request ended under this attempt. */
  interrupt(end: RequestEnd): void {
    if (this.#state === "ended") return;
    const { outcome, code, reason } = interruption(end);
    if (this.#state === "preparing") return this.abandon(code);
    // Sent: the provider may have accepted it. What it returned so far (headers, usage) stays.
    if (this.record.evidence === undefined || this.record.evidence.class === "known_zero") this.record.evidence = { class: "unknown", reason };
    this.finish(outcome, code);
  }
}
