import { byPriority, type CompiledPublication } from "../publication/compile-publication.ts";
import type { PinnedSnapshot } from "../snapshot/pinned-snapshot.ts";

/**
 * Entrypoints → decision rules → logical model revisions → pools → backends, for operators. Shows
 * backend names and protocols, never credentials (only the name of the secret a backend uses).
 * An entrypoint's `decisions` are listed in the order the decide phase tries them (highest
 * priority first, equal priorities as written); `routes` is their earlier, first-match form.
 */
export function describeRoutes(pub: CompiledPublication, snapshot: PinnedSnapshot) {
  const model = (id: string) => {
    const rev = pub.models.get(id);
    const pool = rev ? snapshot.pools.get(rev.pool) : undefined;
    return {
      model: id,
      revision: rev?.revision ?? null,
      pool: rev?.pool ?? null,
      requires: rev?.requires ?? [],
      selector: pool?.selector ?? null,
      backends: (pool?.members ?? []).map((mem) => ({
        id: mem.backend.id,
        name: mem.backend.name,
        protocol: mem.backend.protocol,
        model: mem.model,
        weight: mem.weight,
        capabilities: mem.backend.capabilities,
        credentialSecret: mem.backend.credential?.secret ?? null,
      })),
      resolvable: (pool?.members.length ?? 0) > 0,
    };
  };
  const tiers = (t: readonly (readonly string[])[]) => t.map((tier) => tier.map(model));
  return {
    snapshotRevision: snapshot.revision,
    publicationRevision: pub.revision,
    entrypoints: pub.source.entrypoints.map((ep) => ({
      name: ep.name,
      description: ep.description ?? null,
      operation: ep.operation,
      plugins: ep.plugins,
      routes: ep.routes.map((r) => ({ name: r.name, when: r.when, tiers: tiers(r.models) })),
      decisions: byPriority(ep.decisions).map((d) => ({
          name: d.name,
          description: d.description ?? null,
          priority: d.priority,
          when: d.when,
          onUnknown: d.onUnknown,
          // Null: the decision serves with the entrypoint's default tiers.
          tiers: d.models === undefined ? null : tiers(d.models),
          plugins: d.plugins,
          algorithm: d.algorithm ?? null,
        })),
      default: tiers(ep.default),
      maxAttempts: ep.retry.maxAttempts,
      affinityHeader: ep.affinityHeader ?? null,
    })),
  };
}
