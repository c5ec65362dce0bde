/**
 * Approvals of risky MCP tool calls and A2A agent messages (one machinery for both): the pure state machine the ApprovalDesk Durable Object (one
 * per tenant) runs over a synchronous store, each call inside one storage transaction, so a claim
 * is atomic under any concurrency. Decisions use the object's clock (`now`), never the caller's.
 *
 * States: `pending` → `approved` | `denied` | `expired` | `revoked`; `approved` → `executed`
 * (claimed exactly once) | `revoked` | `expired`. Terminal states never change again, so a denial,
 * an expiry or a revocation is never downgraded to something else.
 */

import { fromBase64url, toBase64url } from "../digest/base64url.ts";

/** The states of an approval. */
export const APPROVAL_STATES = ["pending", "approved", "denied", "expired", "revoked", "executed"] as const;

/** The state of an approval. */
export type ApprovalState = (typeof APPROVAL_STATES)[number];

/** What an approval is bound to: a later call is re-admitted only when all of these are equal. */
export interface ApprovalFacts {
  /**
   * Who asked: tenant, key (or token subject) and what its calls are charged to — a subject
   * calling for another project (another token) is another principal, whose call this approval
   * does not cover.
   */
  readonly principal: { readonly tenant: string; readonly key: string; readonly chargeTo?: string | undefined };
  readonly taskId?: string | undefined;
  /**
   * What is approved: absent, an MCP tool call (`server` the MCP server, `tool` the tool's name);
   * `agent`, a message to an A2A agent (`server` the agent, `tool` the skill it is decided by, or
   * `*` when it names none). Absent rather than `tool` so approvals stored before agents existed
   * keep their facts and their lookup key.
   */
  readonly kind?: "agent" | undefined;
  readonly server: string;
  readonly tool: string;
  /** SHA-256 of the tool's listed definition (canonical JSON), or of what is known of it (an agent's: the skill as its card declares it). */
  readonly toolDigest: string;
  /** SHA-256 of the arguments' canonical JSON (an agent's: the message's). */
  readonly argumentsDigest: string;
  readonly policyRevision: string;
  /** The policy rule that required the approval. */
  readonly rule: string;
}

/**
 * How a claimed call's request ended: with its result known, failed, unknown (it may or may not
 * have run), `input_required` — the server asked the client for input first, so the call goes on
 * in the client's next request and has not been executed yet — or `not_sent`: the request ended
 * after the claim and before the call was handed to its server, so it provably did not run.
 */
export type ExecutionEnd = "succeeded" | "failed" | "unknown" | "input_required" | "not_sent";

/** One entry of an approval's own history (its audit trail, whatever store the gateway has). */
export interface ApprovalHistoryEntry {
  readonly at: number;
  readonly event: "requested" | "granted" | "denied" | "expired" | "revoked" | "executed" | "execution";
  readonly actor?: string | undefined;
  readonly reason?: string | undefined;
  /** For `execution`: how the claimed call ended (`input_required`, `not_sent`: not yet, the approval stands). */
  readonly execution?: ExecutionEnd | undefined;
}

/** An approval, as the admin API and the console read it (docs/governance.md). */
export interface Approval extends ApprovalFacts {
  readonly id: string;
  readonly tenant: string;
  readonly state: ApprovalState;
  readonly createdAt: number;
  readonly expiresAt: number;
  readonly decidedAt?: number | undefined;
  readonly decidedBy?: string | undefined;
  readonly reason?: string | undefined;
  readonly statusUrl: string;
  /** After the claim: how the execution ended; `unknown` goes to reconciliation under `idempotencyKey`, never retried. */
  readonly execution?: "claimed" | Exclude<ExecutionEnd, "input_required" | "not_sent"> | undefined;
  /** The key the execution was sent under (the claiming request's id), for reconciliation. */
  readonly idempotencyKey?: string | undefined;
  /** Set once a caller retrying the same call was told it was denied, revoked or expired. */
  readonly reported?: boolean | undefined;
  /** requestState nonces already presented (single use). */
  readonly usedNonces: readonly string[];
  readonly history: readonly ApprovalHistoryEntry[];
}

/** The storage the desk runs over; each desk call runs inside one transaction of it. */
export interface ApprovalStore {
  get(id: string): Approval | undefined;
  put(a: Approval): void;
  all(): Approval[];
  /** The approvals of one call: those whose {@link callKey} is `key` (an indexed read, not a scan). */
  ofCall(key: string): Approval[];
  delete(id: string): void;
}

/** How long an approval is kept after it ended (its history is the audit of an approver's decision). */
export const APPROVAL_RETENTION_MS = 30 * 86_400_000;

/** Answer of {@link ApprovalDeskCore.request}. */
export interface RequestOutcome {
  readonly approval: Approval;
  /** True when a new pending approval was stored (an `approval.requested` event is due). */
  readonly created: boolean;
  /** Set when an approval found for these facts expired on this read (an `approval.expired` event is due). */
  readonly expired?: Approval | undefined;
}

/** Answer of {@link ApprovalDeskCore.claim}. */
export type ClaimOutcome =
  | { readonly ok: true; readonly approval: Approval }
  | { readonly ok: false; readonly approval: Approval | undefined; readonly why: Exclude<ApprovalState, "approved"> | "unknown" | "facts_differ" | "replayed"; readonly justExpired?: boolean };

/** The actor of a revocation the caller made itself (`tasks/cancel`), beside `admin` and `approver`. */
export const CALLER_ACTOR = "caller";

/** What an approver does. */
export type ApproverAction = "approve" | "deny" | "revoke";

/** Answer of {@link ApprovalDeskCore.decide}. */
export type DecideOutcome = { readonly ok: true; readonly approval: Approval } | { readonly ok: false; readonly approval: Approval | undefined; readonly why: string };

/**
 * A new approval id: `ap_<tenant in base64url>_<random>`. The tenant rides in the id so the
 * public status page finds the tenant's desk from the id alone; the random part (122 bits) is
 * what makes the page unguessable.
 */
export function approvalId(tenant: string): string {
  return `ap_${toBase64url(new TextEncoder().encode(tenant))}_${crypto.randomUUID().replace(/-/g, "")}`;
}

/** The tenant an approval id belongs to; undefined for anything that is not an approval id. */
export function tenantOfApprovalId(id: string): string | undefined {
  const m = /^ap_([A-Za-z0-9_-]{1,128})_([0-9a-f]{32})$/.exec(id);
  if (!m) return undefined;
  const bytes = fromBase64url(m[1]!);
  if (!bytes) return undefined;
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    return undefined;
  }
}

const LIVE: readonly ApprovalState[] = ["pending", "approved"];
const ENDED: readonly ApprovalState[] = ["denied", "revoked", "expired"];

/** The facts two approvals are compared by (everything the approval is bound to). */
export function sameFacts(a: ApprovalFacts, b: ApprovalFacts): boolean {
  return (
    a.principal.tenant === b.principal.tenant &&
    a.principal.key === b.principal.key &&
    (a.principal.chargeTo ?? null) === (b.principal.chargeTo ?? null) &&
    (a.taskId ?? null) === (b.taskId ?? null) &&
    (a.kind ?? null) === (b.kind ?? null) &&
    a.server === b.server &&
    a.tool === b.tool &&
    a.toolDigest === b.toolDigest &&
    a.argumentsDigest === b.argumentsDigest &&
    a.policyRevision === b.policyRevision &&
    a.rule === b.rule
  );
}

/**
 * What makes two approvals the same call (principal tenant and key, task, kind, server, tool and
 * arguments): the key the store finds a call's approvals by. A tool call's key has no kind, as
 * before agents had approvals, so the index of stored approvals stays valid.
 */
export function callKey(f: ApprovalFacts): string {
  const key: unknown[] = [f.principal.tenant, f.principal.key, f.taskId ?? null, f.server, f.tool, f.argumentsDigest];
  if (f.kind !== undefined) key.push(f.kind);
  return JSON.stringify(key);
}

/** What an approver's action makes of an approval: its new state and the history event (and audit event `approval.<event>`) that says so. */
export const DECISIONS = {
  approve: { state: "approved", event: "granted" },
  deny: { state: "denied", event: "denied" },
  revoke: { state: "revoked", event: "revoked" },
} as const satisfies Readonly<Record<ApproverAction, { readonly state: ApprovalState; readonly event: ApprovalHistoryEntry["event"] }>>;

/** One tenant's approvals. */
export class ApprovalDeskCore {
  readonly #store: ApprovalStore;

  constructor(store: ApprovalStore) {
    this.#store = store;
  }

  /** An approval, expired first if its time is up. */
  get(id: string, now: number): Approval | undefined {
    const a = this.#store.get(id);
    return a ? this.#expire(a, now).approval : undefined;
  }

  /** Every approval (newest first), optionally of one state. */
  list(now: number, state?: ApprovalState): Approval[] {
    return this.#store
      .all()
      .map((a) => this.#expire(a, now).approval)
      .filter((a) => state === undefined || a.state === state)
      .sort((x, y) => y.createdAt - x.createdAt);
  }

  /**
   * The approval for a call that needs one: the live one for the same call (same principal, task,
   * server, tool and arguments), else a new pending one. An approval whose other facts changed
   * (tool definition, policy) is not reused: a new one is asked for.
   */
  request(facts: ApprovalFacts, init: { readonly id: string; readonly statusUrl: string; readonly ttlMs: number }, now: number): RequestOutcome {
    let expired: Approval | undefined;
    let newest: Approval | undefined;
    const calls = this.#store.ofCall(callKey(facts)).sort((x, y) => y.createdAt - x.createdAt);
    for (const stored of calls) {
      const { approval, changed } = this.#expire(stored, now);
      newest ??= approval;
      if (changed) expired = approval;
      if (LIVE.includes(approval.state) && sameFacts(approval, facts)) return { approval, created: false, expired };
    }
    // The newest approval of this call was denied, revoked, expired or already used: the caller is
    // told so once (a 2025-era retry is the same call again, and a duplicate of an executed call
    // must not run it twice), and only a call after that asks anew.
    if (newest && (ENDED.includes(newest.state) || newest.state === "executed") && !newest.reported && sameFacts(newest, facts)) {
      const reported: Approval = { ...newest, reported: true };
      this.#store.put(reported);
      return { approval: reported, created: false, expired };
    }
    const approval: Approval = {
      id: init.id,
      tenant: facts.principal.tenant,
      state: "pending",
      principal: facts.principal,
      ...(facts.taskId !== undefined ? { taskId: facts.taskId } : {}),
      ...(facts.kind !== undefined ? { kind: facts.kind } : {}),
      server: facts.server,
      tool: facts.tool,
      toolDigest: facts.toolDigest,
      argumentsDigest: facts.argumentsDigest,
      policyRevision: facts.policyRevision,
      rule: facts.rule,
      createdAt: now,
      expiresAt: now + init.ttlMs,
      statusUrl: init.statusUrl,
      usedNonces: [],
      history: [{ at: now, event: "requested" }],
    };
    this.#store.put(approval);
    return { approval, created: true, expired };
  }

  /**
   * The call's one execution: an approved, unexpired approval whose facts equal the call's becomes
   * `executed`, once. `nonce` (a sealed requestState's) is spent whatever the answer, so a
   * presented state is never accepted twice.
   */
  claim(id: string, facts: ApprovalFacts, now: number, idempotencyKey: string, nonce?: string): ClaimOutcome {
    const stored = this.#store.get(id);
    if (!stored) return { ok: false, approval: undefined, why: "unknown" };
    let { approval: a, changed } = this.#expire(stored, now);
    if (nonce !== undefined) {
      if (a.usedNonces.includes(nonce)) return { ok: false, approval: a, why: "replayed" };
      a = { ...a, usedNonces: [...a.usedNonces, nonce] };
      this.#store.put(a);
    }
    if (!sameFacts(a, facts)) return { ok: false, approval: a, why: "facts_differ" };
    if (a.state !== "approved") return { ok: false, approval: a, why: a.state, justExpired: changed };
    const claimed: Approval = { ...a, state: "executed", execution: "claimed", idempotencyKey, history: [...a.history, { at: now, event: "executed" }] };
    this.#store.put(claimed);
    return { ok: true, approval: claimed };
  }

  /** Spends a presented requestState's nonce without claiming (the approval is still pending). */
  spend(id: string, nonce: string): boolean {
    const a = this.#store.get(id);
    if (!a || a.usedNonces.includes(nonce)) return false;
    this.#store.put({ ...a, usedNonces: [...a.usedNonces, nonce] });
    return true;
  }

  /**
   * How a claimed execution ended; `unknown` is final (reconciliation, never a retry). A server's
   * `input_required` hands the claim back (`approved` again, still until its expiry), so the same
   * call's next round, which carries the client's input, can claim it; so does `not_sent` (the
   * request ended before the call was sent), so the caller's retry can.
   */
  finish(id: string, execution: ExecutionEnd, now: number): Approval | undefined {
    const a = this.#store.get(id);
    if (!a || a.state !== "executed" || a.execution !== "claimed") return a;
    const entry = { at: now, event: "execution", execution } as const;
    if (execution === "input_required" || execution === "not_sent") {
      const { execution: _claimed, idempotencyKey: _key, ...rest } = a;
      const back: Approval = { ...rest, state: "approved", history: [...a.history, entry] };
      this.#store.put(back);
      return back;
    }
    const done: Approval = { ...a, execution, history: [...a.history, entry] };
    this.#store.put(done);
    return done;
  }

  /** An approver's decision: approve or deny a pending approval, revoke a pending or approved one. */
  decide(id: string, action: ApproverAction, actor: string, reason: string, now: number): DecideOutcome {
    const stored = this.#store.get(id);
    if (!stored) return { ok: false, approval: undefined, why: "no such approval" };
    const a = this.#expire(stored, now).approval;
    const allowed = action === "revoke" ? LIVE.includes(a.state) : a.state === "pending";
    if (!allowed) return { ok: false, approval: a, why: `the approval is ${a.state}` };
    const { state, event } = DECISIONS[action];
    const decided: Approval = { ...a, state, decidedAt: now, decidedBy: actor, reason, history: [...a.history, { at: now, event, actor, reason }] };
    this.#store.put(decided);
    return { ok: true, approval: decided };
  }

  /**
   * The caller withdraws its own call (MCP `tasks/cancel`): a pending or approved approval of this
   * principal is revoked with {@link CALLER_ACTOR} as the actor, so the approvers' trail tells a
   * caller's cancellation from an approver's revocation. Another principal's approval is, to it,
   * no approval at all.
   */
  cancel(id: string, principal: ApprovalFacts["principal"], reason: string, now: number): DecideOutcome {
    const stored = this.#store.get(id);
    if (!stored || stored.principal.tenant !== principal.tenant || stored.principal.key !== principal.key) return { ok: false, approval: undefined, why: "no such approval" };
    return this.decide(id, "revoke", CALLER_ACTOR, reason, now);
  }

  /**
   * A revoked API key takes its approvals with it: every pending or approved approval of that key
   * is revoked (by `actor`), so nothing it asked for can still be approved or executed, and the
   * approvers' queue no longer shows it. Answers the approvals it revoked.
   */
  revokeKey(key: string, actor: string, reason: string, now: number): Approval[] {
    const revoked: Approval[] = [];
    for (const stored of this.#store.all()) {
      if (stored.principal.key !== key) continue;
      const out = this.decide(stored.id, "revoke", actor, reason, now);
      if (out.ok) revoked.push(out.approval);
    }
    return revoked;
  }

  /**
   * Drops approvals that ended more than `retainMs` ago (expiring those whose time is up); answers
   * when something is next due (an expiry or a drop), undefined when nothing is left.
   */
  collect(now: number, retainMs: number): number | undefined {
    let next: number | undefined;
    for (const stored of this.#store.all()) {
      const a = this.#expire(stored, now).approval;
      const due = LIVE.includes(a.state) ? a.expiresAt : Math.max(...a.history.map((h) => h.at), a.createdAt) + retainMs;
      if (!LIVE.includes(a.state) && due <= now) {
        this.#store.delete(a.id);
        continue;
      }
      next = next === undefined ? due : Math.min(next, due);
    }
    return next;
  }

  #expire(a: Approval, now: number): { approval: Approval; changed: boolean } {
    if (!LIVE.includes(a.state) || now < a.expiresAt) return { approval: a, changed: false };
    const expired: Approval = { ...a, state: "expired", decidedAt: a.expiresAt, history: [...a.history, { at: a.expiresAt, event: "expired" }] };
    this.#store.put(expired);
    return { approval: expired, changed: true };
  }
}
