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
  /** A reservation in the budget ledger, settled or released by the runner's settle step. */
  | "ledger_reservation"
  /** The selector's in-flight count and latency sample for the chosen backend. */
  | "load_lease"
  /** The provider's response body, cancelled if the request ends before it is read. */
  | "upstream_body"
  /** A stream's first-token and idle timer. */
  | "stream_timer"
  /** A sub-call running on the request's behalf. */
  | "subcall"
  /**
   * An approved tool call's claim at the approval desk: the desk is told how the execution ended,
   * and `unknown` when the request ended before the server answered (reconciliation, never a retry).
   */
  | "approval_claim"
  /** A stateful-era MCP request's registration for its client's cancellation (`notifications/cancelled`). */
  | "inflight_registration";

/** A resource taken: `release` gives it back before the request ends (once; later calls do nothing). */
export interface Held {
  release(): void;
}

/** Where an undo (a record sink, a terminal observer) that threw is reported; the terminal goes on with the rest. */
export type UndoErrorHandler = (err: unknown, what: ResourceKind | "record" | "terminal_observer") => void;

interface Holding<T> {
  readonly kind: ResourceKind;
  readonly undo: (arg: T) => void;
  done: boolean;
}

/**
 * Holdings undone once each, newest first. Something taken after the close (a reply that arrives
 * after the request was aborted) is undone at once: nobody would undo it later.
 */
export class Holdings<T> {
  readonly #items: Holding<T>[] = [];
  readonly #onError: UndoErrorHandler;
  #closedWith: { readonly arg: T } | undefined;

  constructor(onError: UndoErrorHandler) {
    this.#onError = onError;
  }

  get closed(): boolean {
    return this.#closedWith !== undefined;
  }

  /** Registers `undo`; `early` gives the argument of an undo run by `release` before the close. */
  own(kind: ResourceKind, undo: (arg: T) => void, early: () => T): Held {
    const h: Holding<T> = { kind, undo, done: false };
    if (this.#closedWith) {
      this.#run(h, this.#closedWith.arg);
      return { release() {} };
    }
    this.#items.push(h);
    return { release: () => this.#run(h, early()) };
  }

  /** Undoes everything still held, newest first (idempotent). */
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
