import type { Clock } from "../deps/clock.ts";
import type { Rng } from "../deps/rng.ts";

/** One physical backend as a selector sees it: nothing but identity and weight. */
export interface SelectableBackend {
  /** Deterministic backend id from the pinned BackendSnapshot. */
  readonly id: string;
  /** Relative share of traffic (> 0). Only weighted selectors read it. */
  readonly weight: number;
}

/** Per-request inputs a selector may use. */
export interface SelectionContext {
  /** Trusted affinity key (e.g. a session id taken from a configured header); never a raw user input. */
  readonly affinityKey?: string | undefined;
}

/** The traffic policies a pool can name in backends.yaml. */
export type SelectorKind = "random" | "round-robin" | "weighted-round-robin" | "affinity" | "p2c";

/** Picks one backend among eligible candidates. Stateful selectors keep their state per instance. */
export interface Selector {
  readonly kind: SelectorKind;
  /** Returns undefined only when `candidates` is empty. */
  select(candidates: readonly SelectableBackend[], ctx: SelectionContext): SelectableBackend | undefined;
}

/** Isolate-local load signals fed by attempts and read by the p2c selector. */
export interface LoadSignals {
  inFlight(backendId: string): number;
  /** EWMA latency in ms, or undefined when there is no fresh sample. */
  latencyMs(backendId: string): number | undefined;
}

export interface SelectorDeps {
  readonly clock: Clock;
  readonly rng: Rng;
  readonly load: LoadSignals;
}
