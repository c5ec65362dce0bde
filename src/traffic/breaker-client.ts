import type { BreakerAdmission, BreakerConfigInput, BreakerReport, BreakerSnapshot } from "./breaker.ts";

/** Answer of a breaker's `acquire`: the admission plus the breaker's state after it. */
export interface BreakerDecision extends BreakerAdmission {
  readonly snapshot: BreakerSnapshot;
}

/** Non-probe outcomes batched by an isolate. */
export interface BreakerCounts {
  readonly successes: number;
  readonly failures: number;
}

/**
 * One backend's breaker, as the CircuitBreaker Durable Object serves it over RPC (one object per
 * backend id, addressed by name).
 *
 * Config is passed by the caller on every call rather than stored in the object: the gateway's
 * config is the single source of truth, a change takes effect with the next call instead of needing
 * a separate "configure" step (which could race the first report), and an object never runs on a
 * config nobody sent it. Fields left out take `DEFAULT_BREAKER_CONFIG`; an invalid config is
 * rejected with a RangeError.
 */
export interface BreakerRpc {
  acquire(config?: BreakerConfigInput): Promise<BreakerDecision>;
  report(outcome: BreakerReport, permitId?: string, config?: BreakerConfigInput): Promise<BreakerSnapshot>;
  reportMany(counts: BreakerCounts, config?: BreakerConfigInput): Promise<BreakerSnapshot>;
  state(config?: BreakerConfigInput): Promise<BreakerSnapshot>;
}

/** All backends' breakers, keyed by backend id: what {@link BreakerCache} talks to. */
export interface BreakerClient {
  state(backendId: string): Promise<BreakerSnapshot>;
  acquire(backendId: string): Promise<BreakerDecision>;
  report(backendId: string, outcome: BreakerReport, permitId?: string): Promise<BreakerSnapshot>;
  reportMany(backendId: string, counts: BreakerCounts): Promise<BreakerSnapshot>;
}

/**
 * A {@link BreakerClient} over per-backend RPC objects. `objectFor` is called on every call, because
 * a Durable Object stub is an I/O object bound to the request that made it (in the Worker:
 * `(id) => env.CIRCUIT_BREAKER.getByName(id)`, which is cheap).
 */
export function breakerClient(objectFor: (backendId: string) => BreakerRpc, config: BreakerConfigInput = {}): BreakerClient {
  return {
    state: async (id) => await objectFor(id).state(config),
    acquire: async (id) => await objectFor(id).acquire(config),
    report: async (id, outcome, permitId) => await objectFor(id).report(outcome, permitId, config),
    reportMany: async (id, counts) => await objectFor(id).reportMany(counts, config),
  };
}
