import type { AlarmStorage } from "../deps/alarm-storage.ts";
import type { Clock } from "../deps/clock.ts";
import {
  APPROVAL_RETENTION_MS,
  ApprovalDeskCore,
  type Approval,
  type ApprovalFacts,
  type ApprovalState,
  type ApprovalStore,
  type ApproverAction,
  type ClaimOutcome,
  type DecideOutcome,
  type ExecutionEnd,
  type RequestOutcome,
} from "./approval-desk.ts";

/** An {@link ApprovalStore} with atomic transactions (a Durable Object's `transactionSync`). */
export interface ApprovalDeskObjectStore extends ApprovalStore {
  transaction<T>(fn: () => T): T;
}

/**
 * What the ApprovalDesk object serves over RPC and runs on its alarm, runnable without it. Every
 * call runs the rules (ApprovalDeskCore) inside one transaction with no `await`, so a claim is
 * atomic: of any number of concurrent retries of an approved call, exactly one is granted.
 * Decisions use this service's clock, never the caller's. The alarm expires approvals whose time
 * is up and drops those that ended longer ago than {@link APPROVAL_RETENTION_MS}; the first
 * approval opened on a desk with no alarm arms it for its expiry.
 */
export class ApprovalDeskService {
  readonly #store: ApprovalDeskObjectStore;
  readonly #core: ApprovalDeskCore;
  readonly #alarm: AlarmStorage;
  readonly #clock: Clock;

  constructor(store: ApprovalDeskObjectStore, alarm: AlarmStorage, clock: Clock) {
    this.#store = store;
    this.#core = new ApprovalDeskCore(store);
    this.#alarm = alarm;
    this.#clock = clock;
  }

  #tx<T>(fn: (now: number) => T): T {
    return this.#store.transaction(() => fn(this.#clock.now()));
  }

  async request(facts: ApprovalFacts, init: { readonly id: string; readonly statusUrl: string; readonly ttlMs: number }): Promise<RequestOutcome> {
    const out = this.#tx((now) => this.#core.request(facts, init, now));
    // The decision is committed; arming the alarm after it cannot change it.
    if (out.created && (await this.#alarm.getAlarm()) === null) await this.#alarm.setAlarm(out.approval.expiresAt);
    return out;
  }

  /** Expires what is due and drops what ended longer ago than the retention; re-arms for the rest. */
  async alarm(): Promise<void> {
    const next = this.#tx((now) => this.#core.collect(now, APPROVAL_RETENTION_MS));
    if (next !== undefined) await this.#alarm.setAlarm(next);
  }

  claim(id: string, facts: ApprovalFacts, idempotencyKey: string, nonce?: string): ClaimOutcome {
    return this.#tx((now) => this.#core.claim(id, facts, now, idempotencyKey, nonce));
  }

  spend(id: string, nonce: string): boolean {
    return this.#tx(() => this.#core.spend(id, nonce));
  }

  finish(id: string, execution: ExecutionEnd): Approval | undefined {
    return this.#tx((now) => this.#core.finish(id, execution, now));
  }

  get(id: string): Approval | undefined {
    return this.#tx((now) => this.#core.get(id, now));
  }

  list(state?: ApprovalState): Approval[] {
    return this.#tx((now) => this.#core.list(now, state));
  }

  decide(id: string, action: ApproverAction, actor: string, reason: string): DecideOutcome {
    return this.#tx((now) => this.#core.decide(id, action, actor, reason, now));
  }

  cancel(id: string, principal: ApprovalFacts["principal"], reason: string): DecideOutcome {
    return this.#tx((now) => this.#core.cancel(id, principal, reason, now));
  }

  revokeKey(key: string, actor: string, reason: string): Approval[] {
    return this.#tx((now) => this.#core.revokeKey(key, actor, reason, now));
  }
}
