import type { Rng } from "../../deps/rng.ts";
import type { SelectableBackend } from "../selector.ts";

/**
 * The weight a weighted selector actually uses for a backend.
 *
 * Snapshots are validated to carry weights > 0, but a selector sits on the hot path of every
 * request and must never throw or return NaN-driven garbage if a malformed weight slips through,
 * so anything that is not a finite positive number counts as 0 (never preferred while a
 * properly weighted candidate exists).
 */
export function effectiveWeight(backend: SelectableBackend): number {
  const w = backend.weight;
  return Number.isFinite(w) && w > 0 ? w : 0;
}

/**
 * Maps an `rng.next()` draw onto an index in `[0, length)`.
 *
 * The clamp matters: an injected Rng is only promised to return `[0, 1)`, but a custom or
 * buggy one returning exactly 1 must not produce an out-of-range index.
 */
export function randomIndex(rng: Rng, length: number): number {
  const i = Math.floor(rng.next() * length);
  return i < 0 ? 0 : i >= length ? length - 1 : i;
}

/**
 * Picks a candidate with probability proportional to its effective weight.
 *
 * When no candidate has a usable weight the pool is still serviceable, so the choice degrades
 * to uniform instead of failing: the Selector contract only allows `undefined` for an empty list.
 */
export function weightedRandomPick(
  candidates: readonly SelectableBackend[],
  rng: Rng,
): SelectableBackend | undefined {
  const n = candidates.length;
  if (n === 0) return undefined;
  if (n === 1) return candidates[0];
  let total = 0;
  for (const c of candidates) total += effectiveWeight(c);
  if (!(total > 0) || !Number.isFinite(total)) return candidates[randomIndex(rng, n)];
  let r = rng.next() * total;
  let lastPositive: SelectableBackend | undefined;
  for (const c of candidates) {
    const w = effectiveWeight(c);
    if (w === 0) continue;
    lastPositive = c;
    if (r < w) return c;
    r -= w;
  }
  // Floating-point subtraction can leave r a hair above the final weight; that draw belongs to
  // the last weighted candidate, not to a zero-weight one.
  return lastPositive;
}
