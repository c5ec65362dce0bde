import { DurableObject } from "cloudflare:workers";
import { APPROVAL_RETENTION_MS, ApprovalDeskCore, callKey, type Approval, type ApprovalFacts, type ApprovalState, type ApprovalStore, type ApproverAction, type ClaimOutcome, type DecideOutcome, type ExecutionEnd, type RequestOutcome } from "../src/approvals/approval-desk.ts";
import type { ApprovalDeskRpc } from "../src/approvals/approval-desk-rpc.ts";
import { systemClock, type Clock } from "../src/deps/clock.ts";

/** The desk's approvals in the object's SQLite storage, one JSON row each. */
class SqliteApprovalStore implements ApprovalStore {
  readonly #sql: SqlStorage;

  constructor(sql: SqlStorage) {
    this.#sql = sql;
    sql.exec("CREATE TABLE IF NOT EXISTS approvals (id TEXT PRIMARY KEY, body TEXT NOT NULL, call_key TEXT)");
    // A desk from before call keys: add the column and fill it from each row's facts.
    if (!sql.exec<{ name: string }>("PRAGMA table_info(approvals)").toArray().some((c) => c.name === "call_key")) {
      sql.exec("ALTER TABLE approvals ADD COLUMN call_key TEXT");
      for (const a of this.all()) sql.exec("UPDATE approvals SET call_key = ? WHERE id = ?", callKey(a), a.id);
    }
    sql.exec("CREATE INDEX IF NOT EXISTS approvals_call ON approvals (call_key)");
  }

  get(id: string): Approval | undefined {
    const row = this.#sql.exec<{ body: string }>("SELECT body FROM approvals WHERE id = ?", id).toArray()[0];
    return row ? (JSON.parse(row.body) as Approval) : undefined;
  }

  put(a: Approval): void {
    this.#sql.exec("INSERT INTO approvals (id, body, call_key) VALUES (?, ?, ?) ON CONFLICT(id) DO UPDATE SET body = excluded.body", a.id, JSON.stringify(a), callKey(a));
  }

  delete(id: string): void {
    this.#sql.exec("DELETE FROM approvals WHERE id = ?", id);
  }

  all(): Approval[] {
    return this.#sql.exec<{ body: string }>("SELECT body FROM approvals").toArray().map((r) => JSON.parse(r.body) as Approval);
  }

  ofCall(key: string): Approval[] {
    return this.#sql.exec<{ body: string }>("SELECT body FROM approvals WHERE call_key = ?", key).toArray().map((r) => JSON.parse(r.body) as Approval);
  }
}

/**
 * ApprovalDesk: one instance per tenant (`APPROVAL_DESK.getByName(tenant)`). A thin RPC shell:
 * the rules are ApprovalDeskCore, tested without this class. Every call runs inside one
 * `transactionSync` with no `await`, so a claim is atomic: of any number of concurrent retries of
 * an approved call, exactly one is granted. Decisions use this object's clock, never the caller's.
 * An alarm expires approvals whose time is up and drops those that ended longer ago than
 * {@link APPROVAL_RETENTION_MS}.
 */
export class ApprovalDesk extends DurableObject<Env> implements ApprovalDeskRpc {
  readonly #core: ApprovalDeskCore;
  readonly #clock: Clock = systemClock;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#core = new ApprovalDeskCore(new SqliteApprovalStore(ctx.storage.sql));
  }

  #tx<T>(fn: (now: number) => T): T {
    return this.ctx.storage.transactionSync(() => fn(this.#clock.now()));
  }

  async request(facts: ApprovalFacts, init: { readonly id: string; readonly statusUrl: string; readonly ttlMs: number }): Promise<RequestOutcome> {
    const out = this.#tx((now) => this.#core.request(facts, init, now));
    // The decision is committed; arming the alarm after it cannot change it.
    if (out.created && (await this.ctx.storage.getAlarm()) === null) await this.ctx.storage.setAlarm(out.approval.expiresAt);
    return out;
  }

  /** Expires what is due and drops what ended longer ago than the retention; re-arms for the rest. */
  override async alarm(): Promise<void> {
    const next = this.#tx((now) => this.#core.collect(now, APPROVAL_RETENTION_MS));
    if (next !== undefined) await this.ctx.storage.setAlarm(next);
  }

  async claim(id: string, facts: ApprovalFacts, idempotencyKey: string, nonce?: string): Promise<ClaimOutcome> {
    return this.#tx((now) => this.#core.claim(id, facts, now, idempotencyKey, nonce));
  }

  async spend(id: string, nonce: string): Promise<boolean> {
    return this.#tx(() => this.#core.spend(id, nonce));
  }

  async finish(id: string, execution: ExecutionEnd): Promise<Approval | undefined> {
    return this.#tx((now) => this.#core.finish(id, execution, now));
  }

  async get(id: string): Promise<Approval | undefined> {
    return this.#tx((now) => this.#core.get(id, now));
  }

  async list(state?: ApprovalState): Promise<Approval[]> {
    return this.#tx((now) => this.#core.list(now, state));
  }

  async decide(id: string, action: ApproverAction, actor: string, reason: string): Promise<DecideOutcome> {
    return this.#tx((now) => this.#core.decide(id, action, actor, reason, now));
  }

  async cancel(id: string, principal: ApprovalFacts["principal"], reason: string): Promise<DecideOutcome> {
    return this.#tx((now) => this.#core.cancel(id, principal, reason, now));
  }
}
