import type { Attribution } from "../attribution/attribution.ts";
import type { Workload } from "../attribution/workload.ts";
import type { AuditEvent } from "../audit/audit-event.ts";
import type { Clock } from "../deps/clock.ts";
import type { Scheduler } from "../deps/scheduler.ts";
import { GatewayError, type ErrorCode } from "../errors/gateway-error.ts";
import type { ProtocolId } from "../protocol/codec.ts";
import type { AttemptOutcome, AttemptRecord, EvidenceReason } from "./attempt-record.ts";
import { requestTrace, type RequestTrace } from "./trace-context.ts";

/**
 * Everything a request can hold that someone else is waiting for. Each is registered with its
 * undo at the moment it is taken, on the request or on one attempt of it.
 */
export type ResourceKind =
  /** The drain's count of requests in flight. */
  | "drain_ticket"
  /** Admission slots (isolate, tenant, model and the current backend). */
  | "admission_lease"
  /** A half-open probe permit and the outcome owed to the backend's circuit breaker. */
  | "breaker_report"
  /** A unit of the caller's cross-layer attempt budget (spent once the attempt is committed). */
  | "call_budget_unit"
  /** A reservation in the budget ledger, settled or released by the attempt's end. */
  | "ledger_reservation"
  /** The selector's in-flight count and latency sample for the chosen backend. */
  | "load_lease"
  /** The provider's response body, cancelled if the request ends before it is read. */
  | "upstream_body"
  /** A stream's first-token and idle timer. */
  | "stream_timer"
  /** A sub-call running on the request's behalf. */
  | "subcall";

/** The request runtime's phases, in order (docs/architecture.md has the table). */
export type Phase = "authenticate" | "decode" | "authorize" | "decide" | "reserve" | "admit" | "invoke" | "respond";

/** Why a request was stopped from outside its phases. */
export type AbortReason = "client_disconnected" | "deadline" | "drain" | "parent_ended";

/** How a request ended. */
export type RequestEnd =
  | { readonly kind: "completed" }
  | { readonly kind: "failed"; readonly error: GatewayError }
  | { readonly kind: "aborted"; readonly reason: AbortReason };

/** What the terminal hands the logging phase, once per request. */
export interface RequestRecord {
  readonly requestId: string;
  readonly parentRequestId: string | undefined;
  readonly receivedAt: number;
  endedAt: number | undefined;
  tenant: string | undefined;
  key: string | undefined;
  /** The team or `team/project` the caller is charged to (a key's configured one, a token's claim). */
  chargeTo: string | undefined;
  entrypoint: string | undefined;
  route: string | undefined;
  stream: boolean | undefined;
  /** The last phase the request entered: where it ended, whichever way. */
  phase: Phase | undefined;
  /** When the request entered each phase, in order (the trace's phase spans are cut from these). */
  readonly phases: { readonly phase: Phase; readonly at: number }[];
  outcome: "success" | "error" | "cancelled" | undefined;
  errorCode: ErrorCode | undefined;
  /** Ids of the attempts the request made, in order. */
  attempts: readonly string[];
  /** The wire protocol the client spoke (a sub-call has none). */
  protocol: ProtocolId | undefined;
  /** The publication revision the request was decided under. */
  publicationRevision: string | undefined;
  /** The caller's cross-layer call id, when it sent one. */
  callId: string | undefined;
  /** The trace the request's spans belong to. */
  readonly trace: RequestTrace;
  /** For an MCP request: what was asked, what the policy decided and how the call ended. */
  mcp: McpRecord | undefined;
  /** The caller's task, session, turn and parent task, as sent (src/attribution/); undefined: unattributed. */
  attribution: Attribution | undefined;
  /** The agent instance and end user behind the call, from trusted headers (metadata, never identity). */
  workload: Workload | undefined;
  /** Audit events the request caused beyond what its record says (approvals), in order (src/audit/). */
  events: AuditEvent[];
  /**
   * Content kept for the content log, only when the entrypoint's policy sampled this request:
   * the prompt's text, and the completion's text as it is produced, each up to `maxChars`.
   */
  content: RequestContent | undefined;
}

/** The MCP part of a request's record: the audit of one MCP call. */
export interface McpRecord {
  readonly method: string;
  /** The JSON-RPC id the client sent. */
  readonly jsonrpcId: string | number | undefined;
  readonly protocolVersion: string | undefined;
  /** The upstream server the request reached, and the tool (or prompt) name as that server knows it. */
  server?: string | undefined;
  target?: string | undefined;
  /** The policy's decision on the call: rule, revision and reason (no argument values). */
  decision?: { readonly allowed: boolean; readonly rule: string | undefined; readonly policyRevision: string; readonly reason: string } | undefined;
  /** The tool reported failure (`isError`) in a result the gateway passed on. */
  toolError?: boolean | undefined;
  /** The tool call was sent to its server (a call refused or held before that was not executed). */
  toolSent?: boolean | undefined;
  /** The server answered `input_required`: the call goes on in the client's next request. */
  inputRequired?: boolean | undefined;
  /** The approval the call ran under, when its rule required one. */
  approvalId?: string | undefined;
  /** A priced or rate-limited `tools/call`: its reservation in the ledger and how it was settled. */
  charge?: McpCharge | undefined;
}

/** The ledger's part of one MCP tool call (amounts in integer micro-units). */
export interface McpCharge {
  /** The `mcp.prices` rule that priced or limited the call. */
  readonly rule: string;
  /** The reservation's id in the ledger (its attempt id). */
  readonly attemptId: string;
  readonly micros: number;
  readonly currency: string;
  readonly priceVersion: string | undefined;
  /** `charged` (the call ran), `released` (proven not run) or `pending_reconciliation` (outcome unknown). */
  settlement?: "charged" | "released" | "pending_reconciliation" | undefined;
}

/**
 * Characters kept beyond a content policy's `maxChars`: redaction runs before the cut, and a
 * secret that starts just before the cut must still be whole to be recognised.
 */
export const CONTENT_MARGIN = 1024;

/** A sampled request's content (see `RequestRecord.content`). */
export interface RequestContent {
  readonly prompt: string;
  completion: string;
  readonly maxChars: number;
  readonly redact: readonly RegExp[];
}

/**
 * Receives each finished attempt and each finished request exactly once; a request after all its
 * attempts. `waitUntil` keeps I/O the sink starts (an export) alive past the request's answer.
 */
export interface RecordSink {
  attemptFinished(attempt: Readonly<AttemptRecord>): void;
  requestFinished(request: Readonly<RequestRecord>, waitUntil: (p: Promise<unknown>) => void): void;
}

/** A resource taken: `release` gives it back before the request ends (once; later calls do nothing). */
export interface Held {
  release(): void;
}

/** Where an undo (or a record sink) that threw is reported; the terminal goes on with the rest. */
export type UndoErrorHandler = (err: unknown, what: ResourceKind | "record") => void;

export interface RequestContextInit {
  readonly requestId: string;
  readonly receivedAt: number;
  readonly clock: Clock;
  readonly scheduler: Scheduler;
  readonly sink: RecordSink;
  /** Keeps the runtime alive for work the terminal starts (settlements, breaker reports). */
  readonly waitUntil: (p: Promise<unknown>) => void;
  readonly onUndoError: UndoErrorHandler;
  /** The request's trace (see `requestTrace`); a new unsampled one when not given. */
  readonly trace?: RequestTrace | undefined;
  /** The request a sub-call runs for: its abort aborts this one, and its end ends this one. */
  readonly parent?: RequestContext | undefined;
}

/** A drain's mark on a request (see admit/drain.ts). */
export interface DrainMark {
  readonly cancelled: boolean;
}

interface Holding<T> {
  readonly kind: ResourceKind;
  readonly undo: (arg: T) => void;
  done: boolean;
}

/**
 * Holdings undone once each, newest first. Something taken after the close (a reply that arrives
 * after the request was aborted) is undone at once: nobody would undo it later.
 */
class Holdings<T> {
  readonly #items: Holding<T>[] = [];
  readonly #onError: UndoErrorHandler;
  #closedWith: { readonly arg: T } | undefined;

  constructor(onError: UndoErrorHandler) {
    this.#onError = onError;
  }

  get closed(): boolean {
    return this.#closedWith !== undefined;
  }

  own(kind: ResourceKind, undo: (arg: T) => void, early: () => T): Held {
    const h: Holding<T> = { kind, undo, done: false };
    if (this.#closedWith) {
      this.#run(h, this.#closedWith.arg);
      return { release() {} };
    }
    this.#items.push(h);
    return { release: () => this.#run(h, early()) };
  }

  close(arg: T): void {
    if (this.#closedWith) return;
    this.#closedWith = { arg };
    for (let i = this.#items.length - 1; i >= 0; i--) this.#run(this.#items[i]!, arg);
    this.#items.length = 0;
  }

  #run(h: Holding<T>, arg: T): void {
    if (h.done) return;
    h.done = true;
    try {
      h.undo(arg);
    } catch (err) {
      this.#onError(err, h.kind);
    }
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
      return new GatewayError(ABORT_CODES[reason], "The gateway is shutting down. Retry on another instance.", { ...opts, retryAfterSeconds: 1 });
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
  readonly #scheduler: Scheduler;
  readonly #sink: RecordSink;
  readonly #onUndoError: UndoErrorHandler;
  readonly #controller = new AbortController();
  readonly #holdings: Holdings<void>;
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
    this.#scheduler = init.scheduler;
    this.#sink = init.sink;
    this.#onUndoError = init.onUndoError;
    this.#holdings = new Holdings<void>(init.onUndoError);
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
      attribution: undefined,
      workload: undefined,
      events: [],
    };
    if (init.parent) {
      const parent = init.parent;
      // The parent's end is this sub-call's end; until then the sub-call is one of its holdings.
      this.#parentHold = parent.own("subcall", () => this.abort(parent.abortReason ?? "parent_ended"));
      this.#deadlineAt = parent.deadlineAt;
    }
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

  /** The terminal (idempotent): ends open attempts, undoes every holding, emits the record. */
  finish(end: RequestEnd): void {
    if (this.#end) return;
    this.#end = end;
    this.#cancelTimer?.();
    this.#cancelTimer = undefined;
    this.#alarms.clear();
    for (const scope of [...this.#open]) scope.interrupt(end);
    this.#holdings.close();
    // A request that failed may still have work in flight (a sub-call's fetch): stop it. A request
    // that completed has none, and aborting would cost an error object on every request.
    if (end.kind === "failed" && !this.#controller.signal.aborted) this.#controller.abort(end.error);
    const r = this.record;
    r.endedAt = this.clock.now();
    r.attempts = this.#attempts.map((a) => a.id);
    r.outcome = end.kind === "completed" ? "success" : end.kind === "aborted" ? "cancelled" : "error";
    r.errorCode = end.kind === "failed" ? end.error.code : end.kind === "aborted" ? ABORT_CODES[end.reason] : undefined;
    try {
      this.#sink.requestFinished(r, this.waitUntil);
    } catch (err) {
      this.#onUndoError(err, "record");
    }
    this.#parentHold?.release();
  }
}

/**
 * One attempt's life inside its request. Pre-send holdings (probe permit, ledger reservation,
 * call-budget unit) and in-flight ones (load lease, upstream body) are registered here; whichever
 * of {@link finish}, {@link abandon} or the request's end comes first undoes them, once, with the
 * attempt's final record.
 */
export class AttemptScope {
  readonly request: RequestContext;
  readonly record: AttemptRecord;
  readonly #sink: RecordSink;
  readonly #onUndoError: UndoErrorHandler;
  readonly #holdings: Holdings<Readonly<AttemptRecord>>;
  readonly #hooks: { started(a: AttemptRecord): void; closed(s: AttemptScope): void };
  #state: "preparing" | "started" | "ended" = "preparing";

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
    this.#hooks = hooks;
  }

  get ended(): boolean {
    return this.#state === "ended";
  }

  /** Registers a holding of this attempt; its undo gets the attempt's final record. */
  own(kind: ResourceKind, undo: (attempt: Readonly<AttemptRecord>) => void): Held {
    return this.#holdings.own(kind, undo, () => this.record);
  }

  /** The attempt goes out (or is refused by the gateway's own config): from now on it is listed and logged. */
  start(): void {
    if (this.#state !== "preparing") return;
    this.#state = "started";
    this.#hooks.started(this.record);
  }

  /** Ends the attempt with its outcome (idempotent): undoes its holdings, then logs it. */
  finish(outcome: AttemptOutcome, errorCode?: ErrorCode): void {
    if (this.#state === "ended") return;
    if (this.#state === "preparing") this.start();
    this.#state = "ended";
    const a = this.record;
    a.endedAt = this.request.clock.now();
    a.outcome = outcome;
    if (errorCode !== undefined) a.errorCode = errorCode;
    this.#holdings.close(a);
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
