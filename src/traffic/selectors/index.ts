/**
 * Backend selectors: how a pool spreads requests over its eligible backends.
 *
 * Choosing a selector (the `selector` a pool names in backends.yaml):
 *
 * - `random`: stateless and uniform. A safe default for interchangeable backends; no state to
 *   warm up, nothing to skew when thousands of short-lived isolates each see a few requests.
 * - `round-robin`: strict even rotation within one isolate. Useful when backends are equal and
 *   you want the smallest per-isolate variance (e.g. splitting rate-limited keys evenly).
 * - `weighted-round-robin`: deterministic, interleaved shares by weight (nginx smooth WRR). For
 *   unequal capacity or quotas, or canary splits, where exact proportions matter more than
 *   reacting to load.
 * - `affinity`: the same `affinityKey` (e.g. session id) keeps landing on the same backend, and
 *   pool changes remap only the keys of the changed backend. For provider-side prompt caching and
 *   stateful sessions. Without a key it behaves like weighted random.
 * - `p2c`: power of two choices on in-flight count and recent latency. For backends whose speed
 *   varies or that can degrade (self-hosted inference, mixed regions); it routes around a slow or
 *   saturated backend without starving it. Needs a load source (LoadTracker) fed by the executor.
 *
 * Every selector is pure (time and randomness come only from the injected deps) and keeps its
 * state per instance, so create one per pool per isolate and reuse it across requests.
 *
 * @module
 */
import type { Selector, SelectorDeps, SelectorKind } from "../selector.ts";
import { createAffinitySelector } from "./affinity.ts";
import { createP2cSelector } from "./p2c.ts";
import { createRandomSelector } from "./random.ts";
import { createRoundRobinSelector } from "./round-robin.ts";
import { createWeightedRoundRobinSelector } from "./weighted-round-robin.ts";

export { createAffinitySelector, rendezvousScore } from "./affinity.ts";
export { fmix32, fnv1a32, FNV1A32_OFFSET_BASIS, toUnitInterval } from "./hash.ts";
export { createP2cSelector, medianFreshLatency, p2cScore, type P2cOptions } from "./p2c.ts";
export { createRandomSelector } from "./random.ts";
export { createRoundRobinSelector } from "./round-robin.ts";
export { createWeightedRoundRobinSelector } from "./weighted-round-robin.ts";
export { effectiveWeight, randomIndex, weightedRandomPick } from "./weights.ts";

/** Every selector kind, in the order of {@link SelectorKind}; handy for config validation. */
export const SELECTOR_KINDS: readonly SelectorKind[] = [
  "random",
  "round-robin",
  "weighted-round-robin",
  "affinity",
  "p2c",
];

/**
 * Creates a fresh selector of the given kind with its own state.
 *
 * @throws TypeError when `kind` is not a known selector kind. Config is validated before it gets
 *   here, but the kind ultimately comes from a YAML string, so an unknown value fails loudly
 *   instead of silently picking some default policy.
 */
export function createSelector(kind: SelectorKind, deps: SelectorDeps): Selector {
  switch (kind) {
    case "random":
      return createRandomSelector(deps);
    case "round-robin":
      return createRoundRobinSelector(deps);
    case "weighted-round-robin":
      return createWeightedRoundRobinSelector();
    case "affinity":
      return createAffinitySelector(deps);
    case "p2c":
      return createP2cSelector(deps);
    default: {
      const unknown: never = kind;
      throw new TypeError(`unknown selector kind: ${String(unknown)}`);
    }
  }
}
