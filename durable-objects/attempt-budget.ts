import { DurableObject } from "cloudflare:workers";
import { AttemptBudgetLedger, type AttemptBudgetView, type ConsumeResult } from "../src/call-budget/attempt-budget.ts";
import type { AttemptBudgetRpc, CallAnnouncement } from "../src/call-budget/attempt-budget-client.ts";
import { systemClock, type Clock } from "../src/deps/clock.ts";
import { SqliteAttemptBudgetStore } from "./sqlite-attempt-budget-store.ts";

/**
 * AttemptBudget: one instance per call id (`ATTEMPT_BUDGET.getByName(callId)`). A thin RPC shell:
 * the rules are AttemptBudgetLedger, tested without this class.
 *
 * Each `consume` reads, checks and decrements inside one `transactionSync` with no `await`, so
 * concurrent attempts from any replica are serialized and exactly `initialBudget` of them are
 * granted. Decisions use this object's clock, never the caller's.
 *
 * Garbage collection: an alarm is kept at the earliest expiry (deadline + grace) of the stored
 * entries; it deletes what has expired and re-arms for the rest. When nothing is left, the
 * object's storage is deleted entirely, so a finished call leaves nothing behind.
 */
export class AttemptBudget extends DurableObject<Env> implements AttemptBudgetRpc {
  readonly #store: SqliteAttemptBudgetStore;
  readonly #ledger: AttemptBudgetLedger;
  readonly #clock: Clock = systemClock;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#store = new SqliteAttemptBudgetStore(ctx.storage);
    this.#ledger = new AttemptBudgetLedger(this.#store);
  }

  async consume(callId: string, announced: CallAnnouncement): Promise<ConsumeResult> {
    const result = this.#store.transaction(() =>
      this.#ledger.consume(callId, { initialBudget: announced?.initialBudget, deadlineAt: announced?.deadlineAt, now: this.#clock.now() }),
    );
    // The decision is committed; arming the alarm after it cannot change it.
    await this.#arm();
    return result;
  }

  async peek(callId: string): Promise<AttemptBudgetView | undefined> {
    if (typeof callId !== "string") throw new RangeError("callId must be a string");
    return this.#store.transaction(() => this.#ledger.peek(callId, this.#clock.now()));
  }

  override async alarm(): Promise<void> {
    const next = this.#store.transaction(() => (this.#ledger.collect(this.#clock.now()), this.#ledger.nextExpiry()));
    if (next === undefined) await this.#store.drop();
    else await this.ctx.storage.setAlarm(next);
  }

  /** Keeps the alarm at (or before) the earliest expiry. */
  async #arm(): Promise<void> {
    const next = this.#store.transaction(() => this.#ledger.nextExpiry());
    if (next === undefined) return;
    const current = await this.ctx.storage.getAlarm();
    if (current === null || current > next) await this.ctx.storage.setAlarm(next);
  }
}
