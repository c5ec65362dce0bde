import type { LoadSignals, SelectableBackend, Selector, SelectorDeps } from "../selector.ts";
import { randomIndex } from "./weights.ts";

/**
 * Latency used when no candidate in the pool has a fresh sample. Its value is irrelevant to the
 * outcome (every candidate then gets the same latency, so only in-flight counts decide); it just
 * has to be a positive finite number.
 */
const NO_SAMPLE_LATENCY_MS = 1;

/**
 * Floor applied to latencies before scoring. A backend reporting ~0 ms (a cache hit, a fake
 * clock) would otherwise score 0 however many requests it has in flight, making the in-flight
 * term meaningless and flooding it.
 */
const MIN_LATENCY_MS = 1;

/** Options for {@link createP2cSelector}. */
export interface P2cOptions {
  /**
   * Latency (ms) assumed for a backend without a fresh sample. Defaults to the median of the
   * fresh latencies among the current candidates (or a constant when none has one).
   */
  readonly neutralLatencyMs?: number;
}

/**
 * Load score of one backend: lower is better.
 *
 * `(inFlight + 1) * latency` estimates how long a new request would wait behind the work already
 * queued on that backend. The `+ 1` counts the request being placed, so an idle fast backend still
 * beats an idle slow one.
 */
export function p2cScore(inFlight: number, latencyMs: number): number {
  const queued = Number.isFinite(inFlight) && inFlight > 0 ? inFlight : 0;
  const latency = Number.isFinite(latencyMs) && latencyMs > MIN_LATENCY_MS ? latencyMs : MIN_LATENCY_MS;
  return (queued + 1) * latency;
}

/** Median of the fresh latencies of `candidates`, or undefined when none has one. */
export function medianFreshLatency(
  candidates: readonly SelectableBackend[],
  load: LoadSignals,
): number | undefined {
  const known: number[] = [];
  for (const c of candidates) {
    const l = load.latencyMs(c.id);
    if (l !== undefined && Number.isFinite(l)) known.push(l);
  }
  if (known.length === 0) return undefined;
  known.sort((a, b) => a - b);
  const mid = known.length >> 1;
  return known.length % 2 === 1 ? known[mid]! : (known[mid - 1]! + known[mid]!) / 2;
}

/**
 * Power of two choices: sample two distinct candidates uniformly, send to the less loaded one.
 *
 * Comparing just two random candidates avoids the herd behaviour of "always pick the global
 * least-loaded": load signals are isolate-local and lag, so many isolates chasing the same minimum
 * would all pile onto it at once, while two random choices already give an exponentially better
 * max load than pure random.
 *
 * A backend without a fresh latency sample (new, idle, or whose sample went stale) is scored with
 * a neutral latency, the pool median by default: an optimistic default (0) would flood it and a
 * pessimistic one (infinity) would starve it so it never gets a sample again. Equal scores are
 * broken by rng so neither sampled position is systematically favoured. Weights are ignored: the
 * load signal already reflects capacity.
 */
export function createP2cSelector(
  deps: Pick<SelectorDeps, "rng" | "load">,
  options: P2cOptions = {},
): Selector {
  const { rng, load } = deps;
  const fixedNeutral = options.neutralLatencyMs;
  if (fixedNeutral !== undefined && !(Number.isFinite(fixedNeutral) && fixedNeutral >= 0)) {
    throw new RangeError(`p2c neutralLatencyMs must be a finite number >= 0, got ${fixedNeutral}`);
  }
  return {
    kind: "p2c",
    select(candidates) {
      const n = candidates.length;
      if (n === 0) return undefined;
      if (n === 1) return candidates[0];

      const i = randomIndex(rng, n);
      // Draw from the n - 1 other slots and skip over i: two distinct candidates in two draws,
      // uniform over all pairs, without a retry loop.
      let j = randomIndex(rng, n - 1);
      if (j >= i) j++;
      const a = candidates[i]!;
      const b = candidates[j]!;

      const la = load.latencyMs(a.id);
      const lb = load.latencyMs(b.id);
      let neutral = fixedNeutral;
      // The median costs a pass over the pool, so it is only computed when a sample is missing.
      if (neutral === undefined && (la === undefined || lb === undefined)) {
        neutral = medianFreshLatency(candidates, load) ?? NO_SAMPLE_LATENCY_MS;
      }
      const sa = p2cScore(load.inFlight(a.id), la ?? neutral ?? NO_SAMPLE_LATENCY_MS);
      const sb = p2cScore(load.inFlight(b.id), lb ?? neutral ?? NO_SAMPLE_LATENCY_MS);
      if (sa < sb) return a;
      if (sb < sa) return b;
      return rng.next() < 0.5 ? a : b;
    },
  };
}
