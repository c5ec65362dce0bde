import type { SelectorKind } from "../traffic/selector.ts";
import type { NormalizedBackend, NormalizedSnapshot } from "./normalize.ts";

/** A pool member ready for selection: `key` identifies (backend, provider model) for load tracking. */
export interface PinnedMember {
  readonly key: string;
  readonly backend: NormalizedBackend;
  readonly model: string;
  readonly weight: number;
}

export interface PinnedPool {
  readonly name: string;
  readonly selector: SelectorKind;
  readonly members: readonly PinnedMember[];
}

/**
 * An active BackendSnapshot revision, indexed for the hot path. Immutable: a request holds the same
 * object from start to end, whatever activates meanwhile.
 */
export interface PinnedSnapshot {
  readonly revision: number;
  readonly digest: string;
  readonly pools: ReadonlyMap<string, PinnedPool>;
  readonly backends: ReadonlyMap<string, NormalizedBackend>;
}

/** What the controller hands an isolate. */
export interface ActiveSnapshot {
  readonly revision: number;
  readonly digest: string;
  readonly snapshot: NormalizedSnapshot;
}

/** Indexes a snapshot; deep-freezes it so nothing on the hot path can mutate a pinned revision. */
export function pinSnapshot(active: ActiveSnapshot): PinnedSnapshot {
  const backends = new Map(active.snapshot.backends.map((b) => [b.id, b]));
  const pools = new Map<string, PinnedPool>();
  for (const p of active.snapshot.pools) {
    const members: PinnedMember[] = [];
    for (const m of p.members) {
      const backend = backends.get(m.backendId);
      if (backend) members.push({ key: `${m.backendId}/${m.model}`, backend, model: m.model, weight: m.weight });
    }
    pools.set(p.name, { name: p.name, selector: p.selector, members });
  }
  return deepFreeze({ revision: active.revision, digest: active.digest, pools, backends });
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    if (value instanceof Map) for (const v of value.values()) deepFreeze(v);
    else for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
