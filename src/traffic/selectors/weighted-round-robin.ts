import type { SelectableBackend, Selector } from "../selector.ts";
import { effectiveWeight } from "./weights.ts";

/**
 * Extra state entries tolerated for backends absent from the current candidate list before
 * they are pruned. Absent entries are kept on purpose (see below), but a long-lived isolate that
 * sees snapshots come and go must not accumulate ids forever.
 */
const ABSENT_STATE_SLACK = 64;

/**
 * Smooth weighted round robin, nginx's algorithm.
 *
 * On each pick every candidate's `current` grows by its weight, the candidate with the largest
 * `current` is chosen, and the chosen one's `current` drops by the total weight. Over any window of
 * `sum(weights)` picks on a stable list, each backend is chosen exactly `weight` times, and picks
 * are interleaved rather than bursty (weights 5,1,1 give `a a b a c a a`, not `a a a a a b c`).
 * It is fully deterministic: no rng is involved.
 *
 * `current` is keyed by backend id, not by position, so a candidate list that changes between
 * calls (health filtering, a new snapshot with reordered or re-weighted backends) keeps every
 * surviving backend's position in the interleaving. A backend that is filtered out keeps its
 * frozen `current` so a short health flap neither resets it to the front of the queue nor loses its
 * place; the value is bounded by the total weight, so on return it gets at most about one extra or
 * one fewer pick. Ties go to the smaller id (not the array position) so the result does not depend
 * on how the snapshot happened to order the candidates.
 *
 * Candidates without a usable weight are never chosen while a weighted one exists; if none has a
 * usable weight, all count as weight 1 so the pool stays serviceable.
 */
export function createWeightedRoundRobinSelector(): Selector {
  const current = new Map<string, number>();
  return {
    kind: "weighted-round-robin",
    select(candidates) {
      const n = candidates.length;
      if (n === 0) return undefined;
      if (n === 1) return candidates[0];

      let total = 0;
      for (const c of candidates) total += effectiveWeight(c);
      const uniform = !(total > 0) || !Number.isFinite(total);
      if (uniform) total = n;

      let best: SelectableBackend | undefined;
      let bestCurrent = -Infinity;
      for (const c of candidates) {
        const w = uniform ? 1 : effectiveWeight(c);
        const cur = (current.get(c.id) ?? 0) + w;
        current.set(c.id, cur);
        // Zero-weight candidates only accumulate 0 and could still win a tie at the start; they
        // are excluded so an unweighted backend never takes traffic from weighted ones.
        if (w === 0) continue;
        if (best === undefined || cur > bestCurrent || (cur === bestCurrent && c.id < best.id)) {
          best = c;
          bestCurrent = cur;
        }
      }
      // best is always set: n >= 2 and either some weight is positive or all count as 1.
      if (best === undefined) return candidates[0];
      current.set(best.id, bestCurrent - total);

      if (current.size > n + ABSENT_STATE_SLACK) {
        const present = new Set<string>();
        for (const c of candidates) present.add(c.id);
        for (const id of current.keys()) if (!present.has(id)) current.delete(id);
      }
      return best;
    },
  };
}
