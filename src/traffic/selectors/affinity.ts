import type { SelectableBackend, Selector, SelectorDeps } from "../selector.ts";
import { fmix32, fnv1a32, toUnitInterval } from "./hash.ts";
import { effectiveWeight, weightedRandomPick } from "./weights.ts";

/**
 * Weighted rendezvous (highest-random-weight) score of one backend for one key.
 *
 * With `h` uniform in (0, 1), `-ln(h)` is an Exp(1) draw, so `-weight / ln(h)` ranks backends
 * like the minimum of independent Exp(weight) races: each backend wins with probability
 * `weight / sum(weights)` exactly, with no virtual nodes or ring to rebuild.
 */
export function rendezvousScore(weight: number, h: number): number {
  return -weight / Math.log(h);
}

/**
 * Sticky selection on `ctx.affinityKey` via weighted rendezvous hashing.
 *
 * Every backend gets an independent pseudo-random score per key and the highest score wins. The
 * score of a backend depends only on (key, backend id, weight), never on the other candidates,
 * which gives the property affinity exists for: removing a backend (or filtering it by health)
 * remaps only the keys that were on it, and adding one takes over only the keys it now wins.
 * That keeps provider-side prompt caches and conversation state warm across pool changes.
 * The result is also independent of isolate and candidate order, so every isolate agrees.
 *
 * Hashing is FNV-1a over `key NUL id` with a murmur3 finalizer: synchronous and cheap (the key
 * prefix is hashed once per request, then extended per candidate). Equal scores, which need a
 * 32-bit collision, go to the smaller id so the choice stays deterministic.
 *
 * Without a key (absent or empty) there is nothing to stick to, so the choice is weighted random:
 * same long-run shares as the keyed path, no hot spot on one backend.
 */
export function createAffinitySelector(deps: Pick<SelectorDeps, "rng">): Selector {
  const { rng } = deps;
  return {
    kind: "affinity",
    select(candidates, ctx) {
      const n = candidates.length;
      if (n === 0) return undefined;
      if (n === 1) return candidates[0];
      const key = ctx.affinityKey;
      if (key === undefined || key === "") return weightedRandomPick(candidates, rng);

      // NUL separates key from id so ("ab", "c") and ("a", "bc") hash differently for one key.
      const prefix = fnv1a32("\u0000", fnv1a32(key));
      let anyWeighted = false;
      for (const c of candidates) {
        if (effectiveWeight(c) > 0) {
          anyWeighted = true;
          break;
        }
      }

      let best: SelectableBackend | undefined;
      let bestScore = -Infinity;
      for (const c of candidates) {
        // With no usable weight anywhere, equal weights keep the key sticky instead of failing.
        const w = anyWeighted ? effectiveWeight(c) : 1;
        if (w === 0) continue;
        const score = rendezvousScore(w, toUnitInterval(fmix32(fnv1a32(c.id, prefix))));
        if (best === undefined || score > bestScore || (score === bestScore && c.id < best.id)) {
          best = c;
          bestScore = score;
        }
      }
      return best;
    },
  };
}
