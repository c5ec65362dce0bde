import type { Subject } from "./subject.ts";

/** A signal's value: what decisions compare (JSON scalars and lists of strings). */
export type SignalDatum = boolean | number | string | readonly string[];

/**
 * A signal as a decision reads it. A signal that failed is `unknown`, never a guess; each decision
 * says whether unknown fails open or closed. `not_applicable`: the signal has nothing to say about
 * this kind of request (it returned undefined).
 */
export type SignalValue =
  | { readonly state: "known"; readonly value: SignalDatum }
  | { readonly state: "unknown"; readonly reason: "failed" | "not_applicable" };

/** What a signal is computed from: the request's subject and the request's cancellation. */
export interface SignalInput {
  readonly subject: Subject | undefined;
  /** Aborted when the request ends: a signal with I/O (a model call) stops with it. */
  readonly signal: AbortSignal;
}

/** A named fact about a request, declared once and computed at most once per request, only when asked. */
export interface SignalDefinition {
  readonly name: string;
  /** The value, or undefined when the signal does not apply to this request. A throw makes it `unknown`. */
  compute(input: SignalInput): SignalDatum | undefined | Promise<SignalDatum | undefined>;
}

/**
 * One request's signals: each is computed lazily, the first time the decide phase (or a
 * `request_safe` plugin) asks for it, and at most once — later asks share the first computation.
 * A signal that throws is `unknown` (`onFailure` is told, for logs); an abort of the request is
 * not a signal's failure and propagates as the abort's error.
 */
export class SignalSet {
  readonly #defs: ReadonlyMap<string, SignalDefinition>;
  readonly #input: () => SignalInput;
  readonly #onFailure: (name: string, err: unknown) => void;
  readonly #values = new Map<string, Promise<SignalValue>>();
  readonly #settled = new Map<string, SignalValue>();

  constructor(defs: readonly SignalDefinition[], input: () => SignalInput, onFailure: (name: string, err: unknown) => void) {
    this.#defs = new Map(defs.map((d) => [d.name, d]));
    this.#input = input;
    this.#onFailure = onFailure;
  }

  /** The names this request may ask for. */
  get names(): readonly string[] {
    return [...this.#defs.keys()];
  }

  /**
   * The signal's value, computed now if nobody asked before.
   * @throws Error for a name that was never declared (a reference the config check lets through is a bug);
   *   the request's abort error when the request ended while the signal was computed.
   */
  get(name: string): Promise<SignalValue> {
    const known = this.#values.get(name);
    if (known) return known;
    const def = this.#defs.get(name);
    if (!def) throw new Error(`signal ${JSON.stringify(name)} is not declared`);
    const computing = this.#compute(def);
    this.#values.set(name, computing);
    return computing;
  }

  /** The values computed so far, in the order they were first asked for (the decision's evidence). */
  evaluated(): ReadonlyMap<string, SignalValue> {
    return this.#settled;
  }

  async #compute(def: SignalDefinition): Promise<SignalValue> {
    const input = this.#input();
    let value: SignalValue;
    try {
      const datum = await def.compute(input);
      value = datum === undefined ? { state: "unknown", reason: "not_applicable" } : { state: "known", value: datum };
    } catch (err) {
      if (input.signal.aborted) throw input.signal.reason;
      this.#onFailure(def.name, err);
      value = { state: "unknown", reason: "failed" };
    }
    if (input.signal.aborted) throw input.signal.reason;
    this.#settled.set(def.name, value);
    return value;
  }
}
