import { DurableObject } from "cloudflare:workers";
import type { Approval, ApprovalFacts, ApprovalState, ApproverAction, ClaimOutcome, DecideOutcome, ExecutionEnd, RequestOutcome } from "../src/approvals/approval-desk.ts";
import { ApprovalDeskService } from "../src/approvals/approval-desk-service.ts";
import type { ApprovalDeskRpc } from "../src/approvals/approval-desk-rpc.ts";
import { systemClock } from "../src/deps/clock.ts";
import { SqliteApprovalStore } from "./sqlite-approval-store.ts";

/**
 * ApprovalDesk: one instance per tenant (`APPROVAL_DESK.getByName(tenant)`). A thin RPC shell:
 * what it serves is ApprovalDeskService over the rules of ApprovalDeskCore, both tested without
 * this class. Every call runs inside one `transactionSync` with no `await`, so a claim is atomic:
 * of any number of concurrent retries of an approved call, exactly one is granted. Decisions use
 * this object's clock, never the caller's. An alarm expires approvals whose time is up and drops
 * those that ended longer ago than the retention (`APPROVAL_RETENTION_MS`).
 */
export class ApprovalDesk extends DurableObject<Env> implements ApprovalDeskRpc {
  readonly #desk: ApprovalDeskService;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#desk = new ApprovalDeskService(new SqliteApprovalStore(ctx.storage), ctx.storage, systemClock);
  }

  async request(facts: ApprovalFacts, init: { readonly id: string; readonly statusUrl: string; readonly ttlMs: number }): Promise<RequestOutcome> {
    return this.#desk.request(facts, init);
  }

  override async alarm(): Promise<void> {
    await this.#desk.alarm();
  }

  async claim(id: string, facts: ApprovalFacts, idempotencyKey: string, nonce?: string): Promise<ClaimOutcome> {
    return this.#desk.claim(id, facts, idempotencyKey, nonce);
  }

  async spend(id: string, nonce: string): Promise<boolean> {
    return this.#desk.spend(id, nonce);
  }

  async finish(id: string, execution: ExecutionEnd): Promise<Approval | undefined> {
    return this.#desk.finish(id, execution);
  }

  async get(id: string): Promise<Approval | undefined> {
    return this.#desk.get(id);
  }

  async list(state?: ApprovalState): Promise<Approval[]> {
    return this.#desk.list(state);
  }

  async decide(id: string, action: ApproverAction, actor: string, reason: string): Promise<DecideOutcome> {
    return this.#desk.decide(id, action, actor, reason);
  }

  async cancel(id: string, principal: ApprovalFacts["principal"], reason: string): Promise<DecideOutcome> {
    return this.#desk.cancel(id, principal, reason);
  }

  async revokeKey(key: string, actor: string, reason: string): Promise<Approval[]> {
    return this.#desk.revokeKey(key, actor, reason);
  }
}
