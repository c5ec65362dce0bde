import { describe, expect, it } from "vitest";
import { ApprovalDeskCore, approvalId, callKey, CALLER_ACTOR, tenantOfApprovalId, type Approval, type ApprovalFacts, type ApprovalStore } from "../../../src/approvals/approval-desk.ts";

class MemoryStore implements ApprovalStore {
  readonly rows = new Map<string, Approval>();
  get(id: string) {
    return this.rows.get(id);
  }
  put(a: Approval) {
    this.rows.set(a.id, a);
  }
  all() {
    return [...this.rows.values()];
  }
  ofCall(key: string) {
    return this.all().filter((a) => callKey(a) === key);
  }
  delete(id: string) {
    this.rows.delete(id);
  }
}

const facts: ApprovalFacts = {
  principal: { tenant: "acme", key: "k1" },
  taskId: "task-1",
  server: "files",
  tool: "delete",
  toolDigest: "sha256:tool",
  argumentsDigest: "sha256:args",
  policyRevision: "p1",
  rule: "risky",
};
const TTL = 60_000;
const init = (id = approvalId("acme")) => ({ id, statusUrl: `http://127.0.0.1/approvals/${id}`, ttlMs: TTL });

function desk() {
  return new ApprovalDeskCore(new MemoryStore());
}

describe("approval ids", () => {
  it("carry the tenant, and nothing else reads as one", () => {
    const id = approvalId("tenant/with ünïcode_and-dashes");
    expect(tenantOfApprovalId(id)).toBe("tenant/with ünïcode_and-dashes");
    expect(tenantOfApprovalId("ap_YWNtZQ_notHex")).toBeUndefined();
    expect(tenantOfApprovalId("../etc/passwd")).toBeUndefined();
    expect(approvalId("acme")).not.toBe(approvalId("acme"));
  });
});

describe("ApprovalDeskCore", () => {
  it("stores one pending approval per call, found again by the same call's facts", () => {
    const d = desk();
    const first = d.request(facts, init(), 0);
    expect(first).toMatchObject({ created: true, approval: { state: "pending", expiresAt: TTL, tenant: "acme", taskId: "task-1" } });
    const again = d.request(facts, init(), 10);
    expect(again.created).toBe(false);
    expect(again.approval.id).toBe(first.approval.id);
    // Other arguments: another call, another approval.
    const other = d.request({ ...facts, argumentsDigest: "sha256:other" }, init(), 10);
    expect(other.created).toBe(true);
    expect(other.approval.id).not.toBe(first.approval.id);
  });

  it("pending → approved → executed, claimed exactly once", () => {
    const d = desk();
    const { approval } = d.request(facts, init(), 0);
    expect(d.claim(approval.id, facts, 1, "req-0")).toMatchObject({ ok: false, why: "pending" });
    expect(d.decide(approval.id, "approve", "alice", "looks fine", 5)).toMatchObject({ ok: true, approval: { state: "approved", decidedBy: "alice", reason: "looks fine", decidedAt: 5 } });
    const claims = [d.claim(approval.id, facts, 6, "req-1"), d.claim(approval.id, facts, 6, "req-2")];
    expect(claims.filter((c) => c.ok)).toHaveLength(1);
    expect(claims[1]).toMatchObject({ ok: false, why: "executed" });
    expect(d.get(approval.id, 7)).toMatchObject({ state: "executed", execution: "claimed", idempotencyKey: "req-1" });
    // The same call after execution is told it ran (once), and then asks for a new approval.
    expect(d.request(facts, init(), 8)).toMatchObject({ created: false, approval: { id: approval.id, state: "executed" } });
    expect(d.request(facts, init(), 9).created).toBe(true);
  });

  it("an execution whose result is unknown is final: held for reconciliation under its idempotency key", () => {
    const d = desk();
    const { approval } = d.request(facts, init(), 0);
    d.decide(approval.id, "approve", "alice", "ok", 1);
    d.claim(approval.id, facts, 2, "req-9");
    expect(d.finish(approval.id, "unknown", 3)).toMatchObject({ state: "executed", execution: "unknown", idempotencyKey: "req-9" });
    // Nothing moves it on: not a second finish, not a claim.
    expect(d.finish(approval.id, "succeeded", 4)).toMatchObject({ execution: "unknown" });
    expect(d.claim(approval.id, facts, 5, "req-10")).toMatchObject({ ok: false, why: "executed" });
    expect(d.get(approval.id, 6)!.history.map((h) => h.event)).toEqual(["requested", "granted", "executed", "execution"]);
  });

  it("denial, revocation and expiry end it and are never downgraded", () => {
    const d = desk();
    const denied = d.request(facts, init(), 0).approval;
    d.decide(denied.id, "deny", "bob", "too risky", 1);
    expect(d.decide(denied.id, "approve", "alice", "changed my mind", 2)).toMatchObject({ ok: false, why: "the approval is denied" });
    expect(d.claim(denied.id, facts, 3, "r")).toMatchObject({ ok: false, why: "denied" });

    const revoked = d.request({ ...facts, argumentsDigest: "sha256:b" }, init(), 0).approval;
    d.decide(revoked.id, "approve", "alice", "ok", 1);
    expect(d.decide(revoked.id, "revoke", "carol", "incident", 2)).toMatchObject({ ok: true, approval: { state: "revoked" } });
    expect(d.claim(revoked.id, { ...facts, argumentsDigest: "sha256:b" }, 3, "r")).toMatchObject({ ok: false, why: "revoked" });
    expect(d.decide(revoked.id, "approve", "alice", "again", 4).ok).toBe(false);

    const late = d.request({ ...facts, argumentsDigest: "sha256:c" }, init(), 0).approval;
    d.decide(late.id, "approve", "alice", "ok", 1);
    expect(d.claim(late.id, { ...facts, argumentsDigest: "sha256:c" }, TTL, "r")).toMatchObject({ ok: false, why: "expired", justExpired: true });
    expect(d.decide(late.id, "revoke", "carol", "x", TTL + 1).ok).toBe(false);
    expect(d.list(TTL + 2, "expired").map((a) => a.id)).toEqual([late.id]);
  });

  it("a revoked key takes its live approvals with it, and no other key's", () => {
    const d = desk();
    const pending = d.request(facts, init(), 0).approval;
    const approved = d.request({ ...facts, argumentsDigest: "sha256:b" }, init(), 0).approval;
    d.decide(approved.id, "approve", "alice", "ok", 1);
    const denied = d.request({ ...facts, argumentsDigest: "sha256:c" }, init(), 0).approval;
    d.decide(denied.id, "deny", "alice", "no", 1);
    const other = d.request({ ...facts, principal: { tenant: "acme", key: "k2" } }, init(), 0).approval;
    const revoked = d.revokeKey("k1", "admin", "API key acme/k1 was revoked", 2);
    expect(revoked.map((a) => a.id).sort()).toEqual([pending.id, approved.id].sort());
    expect(revoked.every((a) => a.state === "revoked" && a.decidedBy === "admin" && a.history.at(-1)?.reason === "API key acme/k1 was revoked")).toBe(true);
    expect(d.claim(approved.id, { ...facts, argumentsDigest: "sha256:b" }, 3, "r")).toMatchObject({ ok: false, why: "revoked" });
    expect(d.get(denied.id, 3)?.state).toBe("denied");
    expect(d.get(other.id, 3)?.state).toBe("pending");
    expect(d.revokeKey("k1", "admin", "again", 4)).toEqual([]);
  });

  it("the caller cancels its own pending or approved call (revoked by the caller); another principal cannot, nor can anyone end an ended one", () => {
    const d = desk();
    const pending = d.request(facts, init(), 0).approval;
    expect(d.cancel(pending.id, { tenant: "acme", key: "k2" }, "mine now", 1)).toEqual({ ok: false, approval: undefined, why: "no such approval" });
    expect(d.cancel(pending.id, { tenant: "other", key: "k1" }, "mine now", 1)).toMatchObject({ ok: false, approval: undefined });
    const cancelled = d.cancel(pending.id, facts.principal, "cancelled by the caller", 2);
    expect(cancelled).toMatchObject({ ok: true, approval: { state: "revoked", decidedBy: CALLER_ACTOR, decidedAt: 2, reason: "cancelled by the caller" } });
    expect(cancelled.approval!.history.at(-1)).toEqual({ at: 2, event: "revoked", actor: CALLER_ACTOR, reason: "cancelled by the caller" });
    // No approver can approve what the caller withdrew, and a second cancellation changes nothing.
    expect(d.decide(pending.id, "approve", "alice", "ok", 3)).toMatchObject({ ok: false, why: "the approval is revoked" });
    expect(d.cancel(pending.id, facts.principal, "again", 4)).toMatchObject({ ok: false, why: "the approval is revoked" });

    const approved = d.request({ ...facts, argumentsDigest: "sha256:b" }, init(), 0).approval;
    d.decide(approved.id, "approve", "alice", "ok", 1);
    expect(d.cancel(approved.id, facts.principal, "not needed", 2)).toMatchObject({ ok: true, approval: { state: "revoked" } });
    expect(d.claim(approved.id, { ...facts, argumentsDigest: "sha256:b" }, 3, "r")).toMatchObject({ ok: false, why: "revoked" });

    const used = d.request({ ...facts, argumentsDigest: "sha256:c" }, init(), 0).approval;
    d.decide(used.id, "approve", "alice", "ok", 1);
    d.claim(used.id, { ...facts, argumentsDigest: "sha256:c" }, 2, "r");
    expect(d.cancel(used.id, facts.principal, "too late", 3)).toMatchObject({ ok: false, why: "the approval is executed" });
  });

  it("a pending approval expires unanswered: the same call is told so once, and then asks anew", () => {
    const d = desk();
    const first = d.request(facts, init(), 0).approval;
    const told = d.request(facts, init(), TTL + 5);
    expect(told).toMatchObject({ created: false, approval: { id: first.id, state: "expired" } });
    expect(told.expired?.id).toBe(first.id);
    const next = d.request(facts, init(), TTL + 6);
    expect(next.created).toBe(true);
    expect(next.approval.state).toBe("pending");
  });

  it("a denied call retried is refused once with the denial, never turned into a new pending approval silently", () => {
    const d = desk();
    const first = d.request(facts, init(), 0).approval;
    d.decide(first.id, "deny", "bob", "no", 1);
    expect(d.request(facts, init(), 2)).toMatchObject({ created: false, approval: { id: first.id, state: "denied" } });
    expect(d.request(facts, init(), 3).created).toBe(true);
  });

  it("a claim with other facts is refused (arguments, tool definition, policy revision, principal, charge target, task)", () => {
    const d = desk();
    const { approval } = d.request(facts, init(), 0);
    d.decide(approval.id, "approve", "alice", "ok", 1);
    for (const changed of [{ argumentsDigest: "sha256:x" }, { toolDigest: "sha256:y" }, { policyRevision: "p2" }, { principal: { tenant: "acme", key: "k2" } }, { principal: { ...facts.principal, chargeTo: "platform/other" } }, { taskId: "task-2" }]) {
      expect(d.claim(approval.id, { ...facts, ...changed }, 2, "r")).toMatchObject({ ok: false, why: "facts_differ" });
    }
    expect(d.claim(approval.id, facts, 3, "r").ok).toBe(true);
  });

  it("a requestState nonce is spent once, whatever the answer", () => {
    const d = desk();
    const { approval } = d.request(facts, init(), 0);
    expect(d.spend(approval.id, "n1")).toBe(true);
    expect(d.spend(approval.id, "n1")).toBe(false);
    d.decide(approval.id, "approve", "alice", "ok", 1);
    expect(d.claim(approval.id, facts, 2, "r", "n1")).toMatchObject({ ok: false, why: "replayed" });
    expect(d.claim(approval.id, facts, 2, "r", "n2").ok).toBe(true);
    expect(d.claim(approval.id, facts, 2, "r", "n2")).toMatchObject({ ok: false, why: "replayed" });
  });

  it("collects: expires what is due, keeps ended approvals for the retention, then drops them", () => {
    const d = desk();
    const live = d.request(facts, init(), 0).approval;
    const ended = d.request({ ...facts, argumentsDigest: "sha256:e" }, init(), 0).approval;
    d.decide(ended.id, "deny", "bob", "no", 10);
    expect(d.collect(20, 1_000)).toBe(10 + 1_000);
    expect(d.collect(1_010, 1_000)).toBe(TTL);
    expect(d.get(ended.id, 1_011)).toBeUndefined();
    expect(d.collect(TTL, 1_000)).toBe(TTL + 1_000);
    expect(d.get(live.id, TTL)?.state).toBe("expired");
    expect(d.collect(TTL + 1_000, 1_000)).toBeUndefined();
    expect(d.list(TTL + 1_001)).toEqual([]);
  });
});
