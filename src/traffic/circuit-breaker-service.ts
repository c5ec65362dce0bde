import type { Clock } from "../deps/clock.ts";
import { BreakerMachine, resolveBreakerConfig, type BreakerConfigInput, type BreakerData, type BreakerReport, type BreakerSnapshot } from "./breaker.ts";
import type { BreakerCounts, BreakerDecision } from "./breaker-client.ts";

/** Where one backend's breaker state lives (the CircuitBreaker object's SQLite storage, or memory in tests). */
export interface BreakerStore {
  /** Runs `fn` atomically, with no other call interleaved (a Durable Object's `transactionSync`). */
  transaction<T>(fn: () => T): T;
  /** The stored state; a fresh closed breaker when none (or an unreadable one) is stored. */
  load(): BreakerData;
  save(data: BreakerData): void;
}

/**
 * What the CircuitBreaker object serves over RPC ({@link BreakerRpc}, answered synchronously here),
 * runnable without it. Every change loads the state, applies itself and saves inside one
 * transaction, so concurrent calls are serialized (probe permits are handed out atomically) and the
 * state survives eviction. An invalid config is rejected with a RangeError, an unknown outcome with
 * a TypeError, before anything is read or written.
 */
export class CircuitBreakerService {
  readonly #store: BreakerStore;
  readonly #clock: Clock;

  constructor(store: BreakerStore, clock: Clock) {
    this.#store = store;
    this.#clock = clock;
  }

  acquire(config?: BreakerConfigInput): BreakerDecision {
    return this.#mutate(config, (m, now) => ({ ...m.acquire(now), snapshot: m.snapshot(now) }));
  }

  report(outcome: BreakerReport, permitId?: string, config?: BreakerConfigInput): BreakerSnapshot {
    if (outcome !== "success" && outcome !== "failure" && outcome !== "neutral") throw new TypeError(`unknown breaker outcome: ${String(outcome)}`);
    return this.#mutate(config, (m, now) => (m.record(outcome, now, permitId ?? undefined), m.snapshot(now)));
  }

  reportMany(counts: BreakerCounts, config?: BreakerConfigInput): BreakerSnapshot {
    return this.#mutate(config, (m, now) => (m.recordMany(counts.successes, counts.failures, now), m.snapshot(now)));
  }

  /** Read-only: time-driven transitions are recomputed on every load, so nothing needs saving. */
  state(config?: BreakerConfigInput): BreakerSnapshot {
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
