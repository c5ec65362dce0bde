import { DurableObject } from "cloudflare:workers";
import type { AttemptBudgetView, ConsumeResult } from "../src/call-budget/attempt-budget.ts";
import type { AttemptBudgetRpc, CallAnnouncement } from "../src/call-budget/attempt-budget-client.ts";
import { AttemptBudgetService } from "../src/call-budget/attempt-budget-service.ts";
import { systemClock } from "../src/deps/clock.ts";
import { SqliteAttemptBudgetStore } from "./sqlite-attempt-budget-store.ts";

/**
 * AttemptBudget: one instance per call id (`ATTEMPT_BUDGET.getByName(callId)`). A thin RPC shell:
 * what it serves is AttemptBudgetService over the rules of AttemptBudgetLedger, both tested
 * without this class.
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
  readonly #budget: AttemptBudgetService;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#budget = new AttemptBudgetService(new SqliteAttemptBudgetStore(ctx.storage), ctx.storage, systemClock);
  }

  async consume(callId: string, announced: CallAnnouncement): Promise<ConsumeResult> {
    return this.#budget.consume(callId, announced);
  }

  async peek(callId: string): Promise<AttemptBudgetView | undefined> {
    return this.#budget.peek(callId);
  }

  override async alarm(): Promise<void> {
    await this.#budget.alarm();
  }
}
