import type { AlarmStorage } from "../deps/alarm-storage.ts";
import type { Clock } from "../deps/clock.ts";
import { AttemptBudgetLedger, type AttemptBudgetStore, type AttemptBudgetView, type ConsumeResult } from "./attempt-budget.ts";
import type { CallAnnouncement } from "./attempt-budget-client.ts";

/** An {@link AttemptBudgetStore} with what the object adds: atomic transactions and deleting it all. */
export interface AttemptBudgetObjectStore extends AttemptBudgetStore {
  /** Runs `fn` atomically, with no other call interleaved (a Durable Object's `transactionSync`). */
  transaction<T>(fn: () => T): T;
  /** Deletes everything stored, so an idle object keeps nothing; the store stays usable. */
  drop(): Promise<void>;
}

/**
 * What the AttemptBudget object serves over RPC and runs on its alarm, runnable without it.
 *
 * Each `consume` reads, checks and decrements inside one transaction, so concurrent attempts are
 * serialized; decisions use this service's clock, never the caller's. Garbage collection: the
 * alarm is kept at (or before) the earliest expiry of the stored entries; it deletes what has
 * expired and re-arms for the rest, and when nothing is left the whole store is dropped.
 */
export class AttemptBudgetService {
  readonly #store: AttemptBudgetObjectStore;
  readonly #ledger: AttemptBudgetLedger;
  readonly #alarm: AlarmStorage;
  readonly #clock: Clock;

  constructor(store: AttemptBudgetObjectStore, alarm: AlarmStorage, clock: Clock) {
    this.#store = store;
    this.#ledger = new AttemptBudgetLedger(store);
    this.#alarm = alarm;
    this.#clock = clock;
  }

  async consume(callId: string, announced: CallAnnouncement): Promise<ConsumeResult> {
    const result = this.#store.transaction(() =>
      this.#ledger.consume(callId, { initialBudget: announced?.initialBudget, deadlineAt: announced?.deadlineAt, now: this.#clock.now() }),
    );
    // The decision is committed; arming the alarm after it cannot change it.
    await this.#arm();
    return result;
  }

  /** @throws RangeError when `callId` is not a string. */
  peek(callId: string): AttemptBudgetView | undefined {
    if (typeof callId !== "string") throw new RangeError("callId must be a string");
    return this.#store.transaction(() => this.#ledger.peek(callId, this.#clock.now()));
  }

  async alarm(): Promise<void> {
    const next = this.#store.transaction(() => (this.#ledger.collect(this.#clock.now()), this.#ledger.nextExpiry()));
    if (next === undefined) await this.#store.drop();
    else await this.#alarm.setAlarm(next);
  }

  /** Keeps the alarm at (or before) the earliest expiry. */
  async #arm(): Promise<void> {
    const next = this.#store.transaction(() => this.#ledger.nextExpiry());
    if (next === undefined) return;
    const current = await this.#alarm.getAlarm();
    if (current === null || current > next) await this.#alarm.setAlarm(next);
  }
}
