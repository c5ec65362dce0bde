import type { SelectableBackend, Selector, SelectorDeps } from "../selector.ts";
import { randomIndex } from "./weights.ts";

/**
 * Round robin that stays fair when the candidate list changes between calls.
 *
 * A counter taken modulo `candidates.length` is unfair as soon as the list changes: when a
 * backend is filtered out (e.g. by health), every later backend shifts down one slot, so one of
 * them is served twice in a row and another is skipped for a whole rotation, and that repeats on
 * every flap. Instead the selector remembers the *id* it served last and picks the candidate with
 * the next id in a fixed total order (JavaScript string order of ids), wrapping around. So:
 *
 * - with a stable list, each candidate is served exactly once per rotation;
 * - a removed backend simply drops out of the rotation without disturbing the others' turns;
 * - a returning or newly added backend rejoins at its place in the order, with no catch-up burst;
 * - the candidates' array order does not matter, only their ids.
 *
 * State is one string, so memory stays constant however many backends come and go. The very first
 * pick starts at a random candidate: isolates are created constantly and each has its own
 * selector, so a deterministic start would send every fresh isolate's first request to the same
 * backend. Weights are ignored; use weighted-round-robin for unequal shares.
 */
export function createRoundRobinSelector(deps: Pick<SelectorDeps, "rng">): Selector {
  const { rng } = deps;
  let lastId: string | undefined;
  return {
    kind: "round-robin",
    select(candidates) {
      if (candidates.length === 0) return undefined;
      let chosen: SelectableBackend | undefined;
      if (lastId === undefined) {
        chosen = candidates[randomIndex(rng, candidates.length)];
      } else {
        const cursor = lastId;
        // Single pass: the smallest id greater than the cursor, else the smallest id (wrap).
        let next: SelectableBackend | undefined;
        let smallest: SelectableBackend | undefined;
        for (const c of candidates) {
          if (smallest === undefined || c.id < smallest.id) smallest = c;
          if (c.id > cursor && (next === undefined || c.id < next.id)) next = c;
        }
        chosen = next ?? smallest;
      }
      if (chosen !== undefined) lastId = chosen.id;
      return chosen;
    },
  };
}
