import type { PoolRequirement } from "../publication/compile-publication.ts";
import type { PinnedSnapshot } from "./pinned-snapshot.ts";

/**
 * What the running publication needs that a snapshot does not give: a missing pool, or a member
 * lacking a required capability. Empty when every active model revision can be served. A
 * snapshot activated under an older publication can fall short of a newer one; readiness says so.
 */
export function unmetRequirements(snapshot: PinnedSnapshot, requirements: readonly PoolRequirement[]): string[] {
  const out: string[] = [];
  for (const req of requirements) {
    const pool = snapshot.pools.get(req.pool);
    if (!pool || pool.members.length === 0) {
      out.push(`pool "${req.pool}" (needed by ${req.neededBy}) is missing`);
      continue;
    }
    for (const m of pool.members) {
      const missing = req.requires.filter((c) => !m.backend.capabilities.includes(c));
      if (missing.length > 0) out.push(`backend "${m.backend.name}" in pool "${req.pool}" lacks ${missing.join(", ")} (needed by ${req.neededBy})`);
    }
  }
  return out;
}

/** Per pinned snapshot (kept while its revision is current), the verdict per publication revision's requirements. */
const verdicts = new WeakMap<PinnedSnapshot, WeakMap<readonly PoolRequirement[], readonly string[]>>();

/**
 * {@link unmetRequirements}, worked out once per pinned snapshot and publication revision: `/ready`
 * asks on every probe, and a snapshot and a revision are both immutable, so the answer only
 * changes when one of them does (a large publication's check is then not repeated per probe).
 */
export function unmetRequirementsOf(snapshot: PinnedSnapshot, requirements: readonly PoolRequirement[]): readonly string[] {
  let bySnapshot = verdicts.get(snapshot);
  if (!bySnapshot) verdicts.set(snapshot, (bySnapshot = new WeakMap()));
  let unmet = bySnapshot.get(requirements);
  if (!unmet) bySnapshot.set(requirements, (unmet = Object.freeze(unmetRequirements(snapshot, requirements))));
  return unmet;
}
