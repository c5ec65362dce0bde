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
