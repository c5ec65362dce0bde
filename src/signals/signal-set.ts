import type { Scheduler } from "../deps/scheduler.ts";
import type { SignalModels } from "./signal-models.ts";
import type { Subject } from "./subject.ts";

/** A scalar a decision compares. */
export type SignalScalar = boolean | number | string;

/** One field of a signal's value: a scalar, or a list of names (the modalities present, the rules that fired). */
export type SignalField = SignalScalar | readonly string[];

/**
 * A signal's value: what decisions compare. A record (a PII signal's count per detector, a
 * similarity signal's category and scores) is read by key; each kind names its primary key.
 */
export type SignalDatum = SignalField | Readonly<Record<string, SignalField>>;

/**
 * Why a signal has no value:
 * - `failed`: its computation threw (a detector bug, an embedding backend that answered an error);
 * - `timeout`: a model-backed signal did not finish within `signalDeadlineMs` or the request's deadline;
 * - `not_applicable`: it has nothing to say about this request (no header, a language too short
 *   to tell, a tool call for a prompt signal). Not a failure: a condition on it is simply false.
 * - `offline`: a model-backed signal an offline explain (`sluice explain --config`) does not
 *   compute, having no gateway to call; a decision on it follows its `onUnknown`, as it would
 *   with the backend unreachable.
 */
export type UnknownReason = "failed" | "timeout" | "not_applicable" | "offline";

/** A signal as a decision reads it: a value, or unknown and why (never a guess). */
export type SignalValue = { readonly state: "known"; readonly value: SignalDatum } | { readonly state: "unknown"; readonly reason: UnknownReason };

/** What a signal is computed from. */
export interface SignalInput {
  readonly subject: Subject | undefined;
  /** Who is calling (the engine's principal: tenant, key, and the team or `team/project` charged). */
  readonly principal: { readonly tenantId: string; readonly keyId: string; readonly chargeTo?: string | undefined } | undefined;
  /** Only the headers the bootstrap config marks trusted, lower-case names. */
  readonly trustedHeaders: ReadonlyMap<string, string>;
  /** Model calls on the request's behalf (embeddings, moderation); undefined where the kind has none. */
  readonly models: SignalModels | undefined;
  /** Aborted when the request ends or the signal's deadline passes: a model call stops with it. */
  readonly signal: AbortSignal;
}

/** In-process and cheap (microseconds): computed synchronously, on first ask. */
export interface LocalSignal {
  readonly name: string;
  readonly cost: "local";
  /** The value, or undefined when the signal does not apply to this request. A throw makes it `unknown` (`failed`). */
  compute(input: SignalInput): SignalDatum | undefined;
}

/** One backend round trip (an embedding, a moderation call): started together with the others a decision needs, under a deadline. */
export interface ModelSignal {
  readonly name: string;
  readonly cost: "model";
  compute(input: SignalInput): Promise<SignalDatum | undefined>;
}

/** A named fact about a request, declared once and computed at most once per request, only when asked. */
export type SignalDefinition = LocalSignal | ModelSignal;

/** What the set needs besides the definitions, per request. */
export interface SignalSetOptions {
  readonly input: () => Omit<SignalInput, "signal">;
  /** The request's own cancellation. */
  readonly signal: AbortSignal;
  readonly scheduler: Scheduler;
  readonly onFailure: (name: string, err: unknown) => void;
  /** Model-backed signals are not computed: each settles as unknown (`offline`) when started. */
  readonly offline?: boolean | undefined;
}

/** Declared signals by name: what a {@link SignalSet} looks a name up in. */
export type SignalIndex = ReadonlyMap<string, SignalDefinition>;

/** The index of `defs` (later duplicates win), to share between the requests of a publication. */
export function signalIndex(defs: readonly SignalDefinition[]): SignalIndex {
  return new Map(defs.map((d) => [d.name, d]));
}

/**
 * One request's signals: each computed lazily, the first time the decide phase (or a plugin) asks
 * for it, and at most once — later asks share the first computation. A signal that throws is
 * `unknown` (`onFailure` is told, for logs); an abort of the request is not a signal's failure and
 * propagates as the abort's error.
 *
 * Local signals are read synchronously ({@link local}); model-backed ones are started in a batch
 * ({@link startModels}) so the round trips a decision needs overlap, each bounded by a deadline
 * after which it is `unknown` (`timeout`) and its call is aborted.
 */
export class SignalSet {
  readonly #defs: ReadonlyMap<string, SignalDefinition>;
  readonly #options: SignalSetOptions;
  #input: Omit<SignalInput, "signal"> | undefined;
  readonly #pending = new Map<string, Promise<SignalValue>>();
  readonly #settled = new Map<string, SignalValue>();

  /**
   * @param defs the declared signals, or an index of them built once with {@link signalIndex} (a
   *   request of a publication then builds no map of its own).
   */
  constructor(defs: readonly SignalDefinition[] | SignalIndex, options: SignalSetOptions) {
    this.#defs = Array.isArray(defs) ? signalIndex(defs) : (defs as SignalIndex);
    this.#options = options;
  }

  /** The names this request may ask for. */
  get names(): readonly string[] {
    return [...this.#defs.keys()];
  }

  /** Whether a declared signal is model-backed. @throws Error for an undeclared name. */
  costOf(name: string): "local" | "model" {
    return this.#def(name).cost;
  }

  /** The value if it is known or settled as unknown already; undefined while it was never asked or is still computing. */
  peek(name: string): SignalValue | undefined {
    return this.#settled.get(name);
  }

  /**
   * A local signal's value, computed now on first ask.
   * @throws Error for an undeclared or model-backed name (the config check keeps both from happening).
   */
  local(name: string): SignalValue {
    const done = this.#settled.get(name);
    if (done) return done;
    const def = this.#def(name);
    if (def.cost !== "local") throw new Error(`signal ${JSON.stringify(name)} is model-backed: start it with startModels()`);
    let value: SignalValue;
    try {
      const datum = def.compute({ ...this.#inputs(), signal: this.#options.signal });
      value = datum === undefined ? NOT_APPLICABLE : { state: "known", value: datum };
    } catch (err) {
      this.#options.onFailure(def.name, err);
      value = FAILED;
    }
    this.#settled.set(name, value);
    return value;
  }

  /**
   * Starts the model-backed signals not started yet, all at once, and resolves when every one of
   * them has settled: with its value, `failed`, or `timeout` once `deadlineAt` (epoch ms, by
   * `now`) passes — whichever comes first. A signal still running at the deadline has its call
   * aborted. @throws the request's abort reason when the request ended meanwhile.
   */
  async startModels(names: Iterable<string>, deadlineAt: number, now: number): Promise<void> {
    if (this.#options.signal.aborted) throw this.#options.signal.reason;
    const waits: Promise<SignalValue>[] = [];
    for (const name of names) {
      const def = this.#def(name);
      if (def.cost !== "model") continue;
      if (this.#options.offline === true) {
        if (!this.#settled.has(name)) this.#settled.set(name, OFFLINE);
        continue;
      }
      let p = this.#pending.get(name);
      if (p === undefined && !this.#settled.has(name)) {
        p = this.#startModel(def, Math.max(0, deadlineAt - now));
        this.#pending.set(name, p);
      }
      if (p) waits.push(p);
    }
    await Promise.all(waits);
    if (this.#options.signal.aborted) throw this.#options.signal.reason;
  }

  /**
   * Any signal's value: a local one now, a model-backed one started if need be (without a
   * deadline of its own beyond the request's).
   */
  async get(name: string): Promise<SignalValue> {
    const def = this.#def(name);
    if (def.cost === "local") return this.local(name);
    const done = this.#settled.get(name);
    if (done) return done;
    await this.startModels([name], Number.POSITIVE_INFINITY, 0);
    return this.#settled.get(name)!;
  }

  /** The values settled so far, in the order they settled (the decision's evidence). */
  evaluated(): ReadonlyMap<string, SignalValue> {
    return this.#settled;
  }

  #def(name: string): SignalDefinition {
    const def = this.#defs.get(name);
    if (!def) throw new Error(`signal ${JSON.stringify(name)} is not declared`);
    return def;
  }

  /**
   * Forgets the request the signals were computed on (their values stay): a streaming request
   * lets go of its prompt once it is sent, and this copy would keep it for the stream's life.
   */
  releaseInput(): void {
    this.#input = undefined;
  }

  #inputs(): Omit<SignalInput, "signal"> {
    this.#input ??= this.#options.input();
    return this.#input;
  }

  async #startModel(def: ModelSignal, budgetMs: number): Promise<SignalValue> {
    const request = this.#options.signal;
    const own = new AbortController();
    let cancelTimer: (() => void) | undefined;
    let giveUp!: (v: SignalValue) => void;
    // Settles at the deadline, or when the request ends: a computation that ignores its abort
    // signal is not waited for.
    const late = new Promise<SignalValue>((resolve) => (giveUp = resolve));
    const onAbort = () => {
      own.abort(request.reason);
      giveUp(TIMEOUT);
    };
    request.addEventListener("abort", onAbort, { once: true });
    if (Number.isFinite(budgetMs)) cancelTimer = this.#options.scheduler.schedule(budgetMs, () => giveUp(TIMEOUT));
    const computed = (async (): Promise<SignalValue> => {
      try {
        const datum = await def.compute({ ...this.#inputs(), signal: own.signal });
        return datum === undefined ? NOT_APPLICABLE : { state: "known", value: datum };
      } catch (err) {
        if (own.signal.aborted) return TIMEOUT;
        this.#options.onFailure(def.name, err);
        return FAILED;
      }
    })();
    const value = await Promise.race([computed, late]);
    cancelTimer?.();
    request.removeEventListener("abort", onAbort);
    // A signal that lost the race stops its call; one that won leaves nothing running.
    if (value === TIMEOUT && !own.signal.aborted) own.abort(new Error("signal deadline passed"));
    // A request that ended meanwhile: the timeout it may have caused is not the signal's value.
    if (!request.aborted) this.#settled.set(def.name, value);
    this.#pending.delete(def.name);
    return value;
  }
}

const NOT_APPLICABLE: SignalValue = Object.freeze({ state: "unknown", reason: "not_applicable" });
const FAILED: SignalValue = Object.freeze({ state: "unknown", reason: "failed" });
const TIMEOUT: SignalValue = Object.freeze({ state: "unknown", reason: "timeout" });
const OFFLINE: SignalValue = Object.freeze({ state: "unknown", reason: "offline" });
