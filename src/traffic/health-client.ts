import type { HealthSnapshot, ProbeTarget } from "./health.ts";

/** What a HealthMonitor answers: the backend's health plus whether (and what) it is watching. */
export interface HealthView extends HealthSnapshot {
  /** True while a target is stored and probed. */
  readonly watching: boolean;
  /** {@link probeTargetKey} of the stored target; undefined when not watching. */
  readonly targetKey: string | undefined;
  /** When the next probe is due (ms); undefined when none is scheduled. */
  readonly nextProbeAt: number | undefined;
}

/**
 * One backend's monitor, as the HealthMonitor Durable Object serves it over RPC (one object per
 * backend id, addressed by name).
 *
 * - `watch(target)` stores (or replaces) the target and schedules the first probe unless one is
 *   already scheduled; an invalid target is rejected with a RangeError.
 * - `state()` reads the health (`unknown` when never probed or not watching).
 * - `unwatch()` stops probing and deletes everything the object stored.
 */
export interface HealthRpc {
  watch(target: ProbeTarget): Promise<HealthView>;
  state(): Promise<HealthView>;
  unwatch(): Promise<void>;
}

/** All backends' monitors, keyed by backend id: what {@link HealthCache} talks to. */
export interface HealthClient {
  watch(backendId: string, target: ProbeTarget): Promise<HealthView>;
  state(backendId: string): Promise<HealthView>;
  unwatch(backendId: string): Promise<void>;
}

/**
 * A {@link HealthClient} over per-backend RPC objects. `objectFor` is called on every call, because
 * a Durable Object stub is an I/O object bound to the request that made it (in the Worker:
 * `(id) => env.HEALTH_MONITOR.getByName(id)`, which is cheap).
 */
export function healthClient(objectFor: (backendId: string) => HealthRpc): HealthClient {
  return {
    watch: async (id, target) => await objectFor(id).watch(target),
    state: async (id) => await objectFor(id).state(),
    unwatch: async (id) => await objectFor(id).unwatch(),
  };
}
