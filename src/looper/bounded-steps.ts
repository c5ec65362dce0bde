import type { LooperBounds } from "../config/algorithm-schema.ts";
import type { Scheduler } from "../deps/scheduler.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { NeutralRequest, NeutralResponse } from "../protocol/neutral.ts";
import { actualCost, worstCase, type Price } from "../publication/prices.ts";
import { inputTokenBound } from "../reserve/token-bounds.ts";

/** One step of an algorithm: a buffered sub-call to one tier of logical models, never a listener. */
export interface StepRequest {
  /** The tier's logical models (the executor may fall back within it, as for any request). */
  readonly tier: readonly string[];
  readonly request: Omit<NeutralRequest, "model" | "stream" | "streamUsage">;
  /** The algorithm's `perModelCall` plugins, run on this sub-call alone (the engine sets them, not the algorithm). */
  readonly plugins?: readonly string[] | undefined;
}

/** A step's outcome, as the sub-call ended. */
export type StepResult =
  | { readonly ok: true; readonly requestId: string; readonly response: NeutralResponse }
  | { readonly ok: false; readonly requestId: string; readonly error: GatewayError };

/**
 * How the engine makes one sub-call: the session's ModelExecutor, bound to the parent request.
 * `signal` stops the sub-call (the run's time bound): it then ends as cancelled. `started` hears
 * the sub-call's request id as soon as it exists, so a run that ends while the step still runs
 * (its parent's deadline, a disconnect) lists it.
 */
export type StepPort = (step: StepRequest, signal: AbortSignal, started: (requestId: string) => void) => Promise<StepResult>;

/** The bound a refusal names (the config's own key). */
export type BoundName = keyof LooperBounds;

/** A typed refusal naming the bound that ran out. */
export function boundExceeded(bound: BoundName, detail: string): GatewayError {
  return new GatewayError("looper_bound_exceeded", `The request's algorithm reached its ${bound} bound: ${detail}.`, { details: [{ bound }] });
}

/** What the engine needs to hold a run to its bounds. */
export interface BoundDeps {
  readonly now: () => number;
  readonly scheduler: Scheduler;
  /** The dearest price among a tier's active revisions (undefined: unpriced, costs 0). */
  readonly price: (tier: readonly string[]) => Price | undefined;
  /** How deep the request running the algorithm is (a client's request: 1). */
  readonly depth: number;
}

/**
 * The engine's side of a Looper run: every sub-call an algorithm makes goes through {@link call},
 * which holds the run to its bounds before the call is sent — calls, parallelism, depth, the time
 * since the run began, and the tokens and money of its worst case on top of what earlier steps
 * spent — caps the step's output to what the token bound leaves, and stops a step the time bound
 * overtakes. The algorithm cannot skip it: it is handed nothing else to call with. Spend is
 * counted at the step's worst case while it runs and at its reported usage once it ended (the
 * worst case stays when usage is unknown), each at the dearest price of the step's tier.
 */
export class BoundedSteps {
  readonly #bounds: LooperBounds;
  readonly #deps: BoundDeps;
  readonly #port: StepPort;
  readonly #startedAt: number;
  #calls = 0;
  #inFlight = 0;
  #tokens = 0;
  #micros = 0;
  /** The bound that ended the run, once one did. */
  exceeded: BoundName | undefined;

  constructor(bounds: LooperBounds, deps: BoundDeps, port: StepPort) {
    this.#bounds = bounds;
    this.#deps = deps;
    this.#port = port;
    this.#startedAt = deps.now();
  }

  /** Sub-calls started so far. */
  get calls(): number {
    return this.#calls;
  }

  /**
   * One step, within the bounds.
   *
   * `cancel` lets the algorithm stop a step it no longer needs (a panel's straggler): the step
   * then ends as cancelled, and its result says so. `started` hears the step's request id when
   * its sub-call begins.
   *
   * @throws GatewayError looper_bound_exceeded naming the bound the step would break (nothing sent),
   *   or `maxTimeMs` when the time bound stopped it while it ran.
   */
  async call(step: StepRequest, cancel?: AbortSignal, started: (requestId: string) => void = () => {}): Promise<StepResult> {
    const b = this.#bounds;
    if (this.#deps.depth > b.maxDepth) this.#refuse("maxDepth", `the request is ${this.#deps.depth} deep, above ${b.maxDepth}`);
    if (this.#calls >= b.maxCalls) this.#refuse("maxCalls", `${this.#calls} sub-calls made, at most ${b.maxCalls}`);
    if (this.#inFlight >= b.maxParallel) this.#refuse("maxParallel", `${this.#inFlight} sub-calls in flight, at most ${b.maxParallel}`);
    const left = b.maxTimeMs - (this.#deps.now() - this.#startedAt);
    if (left <= 0) this.#refuse("maxTimeMs", `${b.maxTimeMs} ms passed`);
    const input = inputTokenBound({ ...step.request, model: "", stream: false, streamUsage: false });
    const room = b.maxTokens - this.#tokens - input;
    if (room < 1) this.#refuse("maxTokens", `${this.#tokens} tokens spent and ${input} more of input, at most ${b.maxTokens}`);
    const cap = Math.min(step.request.maxOutputTokens ?? room, room);
    const price = this.#deps.price(step.tier);
    const worst = worstCase(price, input, cap);
    if (this.#micros + worst.micros > b.maxCostMicros) this.#refuse("maxCostMicros", `${this.#micros} spent and ${worst.micros} more at worst, at most ${b.maxCostMicros}`);
    this.#calls++;
    this.#inFlight++;
    this.#tokens += worst.tokens;
    this.#micros += worst.micros;
    const stop = new AbortController();
    let timedOut = false;
    const unschedule = this.#deps.scheduler.schedule(left, () => {
      timedOut = true;
      stop.abort();
    });
    const cancelled = () => stop.abort();
    if (cancel?.aborted) cancelled();
    cancel?.addEventListener("abort", cancelled, { once: true });
    let result: StepResult;
    try {
      result = await this.#port({ tier: step.tier, request: { ...step.request, maxOutputTokens: cap } }, stop.signal, started);
    } finally {
      unschedule();
      cancel?.removeEventListener("abort", cancelled);
      this.#inFlight--;
    }
    const usage = result.ok ? result.response.usage : undefined;
    if (usage !== undefined) {
      const actual = actualCost(price, usage);
      this.#tokens += actual.tokens - worst.tokens;
      this.#micros += actual.micros - worst.micros;
    }
    if (timedOut) this.#refuse("maxTimeMs", `${b.maxTimeMs} ms passed while a sub-call ran`);
    return result;
  }

  #refuse(bound: BoundName, detail: string): never {
    this.exceeded ??= bound;
    throw boundExceeded(bound, detail);
  }
}
