import { DurableObject } from "cloudflare:workers";
import { BreakerMachine, resolveBreakerConfig, type BreakerConfigInput, type BreakerReport, type BreakerSnapshot } from "../src/traffic/breaker.ts";
import type { BreakerCounts, BreakerDecision, BreakerRpc } from "../src/traffic/breaker-client.ts";
import { systemClock, type Clock } from "../src/deps/clock.ts";
import { SqliteBreakerStore } from "./sqlite-breaker-store.ts";

/**
 * CircuitBreaker: one instance per backend id (`CIRCUIT_BREAKER.getByName(backendId)`). A thin RPC
 * shell: the state machine is BreakerMachine, tested without this class.
 *
 * Every call loads the state from SQLite, applies itself and saves, inside one `transactionSync`
 * with no `await`, so concurrent calls are serialized (probe permits are handed out atomically) and
 * the state survives eviction. Config comes with each call (see BreakerRpc); an invalid one is
 * rejected with a RangeError before anything is read or written.
 */
export class CircuitBreaker extends DurableObject<Env> implements BreakerRpc {
  readonly #store: SqliteBreakerStore;
  readonly #clock: Clock = systemClock;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#store = new SqliteBreakerStore(ctx.storage);
  }

  async acquire(config?: BreakerConfigInput): Promise<BreakerDecision> {
    return this.#mutate(config, (m, now) => ({ ...m.acquire(now), snapshot: m.snapshot(now) }));
  }

  async report(outcome: BreakerReport, permitId?: string, config?: BreakerConfigInput): Promise<BreakerSnapshot> {
    if (outcome !== "success" && outcome !== "failure" && outcome !== "neutral") throw new TypeError(`unknown breaker outcome: ${String(outcome)}`);
    return this.#mutate(config, (m, now) => (m.record(outcome, now, permitId ?? undefined), m.snapshot(now)));
  }

  async reportMany(counts: BreakerCounts, config?: BreakerConfigInput): Promise<BreakerSnapshot> {
    return this.#mutate(config, (m, now) => (m.recordMany(counts.successes, counts.failures, now), m.snapshot(now)));
  }

  /** Read-only: time-driven transitions are recomputed on every load, so nothing needs saving. */
  async state(config?: BreakerConfigInput): Promise<BreakerSnapshot> {
    const resolved = resolveBreakerConfig(config);
    const now = this.#clock.now();
    return new BreakerMachine(resolved, this.#store.load()).snapshot(now);
  }

  #mutate<T>(config: BreakerConfigInput | undefined, fn: (m: BreakerMachine, now: number) => T): T {
    const resolved = resolveBreakerConfig(config);
    return this.#store.transaction(() => {
      const now = this.#clock.now();
      const machine = new BreakerMachine(resolved, this.#store.load());
      const result = fn(machine, now);
      this.#store.save(machine.data());
      return result;
    });
  }
}
