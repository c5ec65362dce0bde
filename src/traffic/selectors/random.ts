import type { SelectorDeps } from "../selector.ts";
import type { Selector } from "../selector.ts";
import { randomIndex } from "./weights.ts";

/**
 * Uniform random selection: every candidate has probability `1 / candidates.length`.
 *
 * Stateless, so it is immune to candidate-list changes and to the many-isolates problem
 * (fresh isolates all starting a rotation at the same backend). Weights are ignored.
 */
export function createRandomSelector(deps: Pick<SelectorDeps, "rng">): Selector {
  const { rng } = deps;
  return {
    kind: "random",
    select(candidates) {
      if (candidates.length === 0) return undefined;
      return candidates[randomIndex(rng, candidates.length)];
    },
  };
}
