import { DurableObject } from "cloudflare:workers";
import type { BreakerConfigInput, BreakerReport, BreakerSnapshot } from "../src/traffic/breaker.ts";
import type { BreakerCounts, BreakerDecision, BreakerRpc } from "../src/traffic/breaker-client.ts";
import { CircuitBreakerService } from "../src/traffic/circuit-breaker-service.ts";
import { systemClock } from "../src/deps/clock.ts";
import { SqliteBreakerStore } from "./sqlite-breaker-store.ts";

/**
 * CircuitBreaker: one instance per backend id (`CIRCUIT_BREAKER.getByName(backendId)`). A thin RPC
 * shell: what it serves is CircuitBreakerService over the state machine BreakerMachine, both tested
 * without this class.
 *
 * Every call loads the state from SQLite, applies itself and saves, inside one `transactionSync`
 * with no `await`, so concurrent calls are serialized (probe permits are handed out atomically) and
 * the state survives eviction. Config comes with each call (see BreakerRpc); an invalid one is
 * rejected with a RangeError before anything is read or written.
 */
export class CircuitBreaker extends DurableObject<Env> implements BreakerRpc {
  readonly #breaker: CircuitBreakerService;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#breaker = new CircuitBreakerService(new SqliteBreakerStore(ctx.storage), systemClock);
  }

  async acquire(config?: BreakerConfigInput): Promise<BreakerDecision> {
    return this.#breaker.acquire(config);
  }

  async report(outcome: BreakerReport, permitId?: string, config?: BreakerConfigInput): Promise<BreakerSnapshot> {
    return this.#breaker.report(outcome, permitId, config);
  }

  async reportMany(counts: BreakerCounts, config?: BreakerConfigInput): Promise<BreakerSnapshot> {
    return this.#breaker.reportMany(counts, config);
  }

  async state(config?: BreakerConfigInput): Promise<BreakerSnapshot> {
    return this.#breaker.state(config);
  }
}
