import { env, runInDurableObject } from "cloudflare:test";
import { ApprovalDesk } from "../../../durable-objects/approval-desk.ts";
import { describe, expect, it } from "vitest";
import { approvalId, type ApprovalFacts } from "../../../src/approvals/approval-desk.ts";

const facts: ApprovalFacts = { principal: { tenant: "acme", key: "k1" }, server: "files", tool: "delete", toolDigest: "sha256:t", argumentsDigest: "sha256:a", policyRevision: "p1", rule: "risky" };

describe("ApprovalDesk Durable Object", () => {
  it("grants exactly one of 20 concurrent claims of an approved call", async () => {
    const stub = env.APPROVAL_DESK.getByName("acme-concurrent");
    const id = approvalId("acme");
    const { approval } = await stub.request(facts, { id, statusUrl: `http://127.0.0.1/approvals/${id}`, ttlMs: 60_000 });
    expect(approval.state).toBe("pending");
    expect((await stub.decide(id, "approve", "alice", "ok")).ok).toBe(true);
    const claims = await Promise.all(Array.from({ length: 20 }, (_, i) => stub.claim(id, facts, `req-${i}`)));
    expect(claims.filter((c) => c.ok)).toHaveLength(1);
    expect(claims.filter((c) => !c.ok && c.why === "executed")).toHaveLength(19);
    expect(await stub.list("executed")).toHaveLength(1);
  });

  it("a caller's cancellation races an approval and a claim: whichever lands first decides, and nothing runs after a cancellation", async () => {
    const stub = env.APPROVAL_DESK.getByName("acme-cancel");
    const id = approvalId("acme");
    await stub.request(facts, { id, statusUrl: `http://127.0.0.1/approvals/${id}`, ttlMs: 60_000 });
    expect((await stub.decide(id, "approve", "alice", "ok")).ok).toBe(true);
    const [cancel, ...claims] = await Promise.all([stub.cancel(id, facts.principal, "cancelled by the caller"), ...Array.from({ length: 5 }, (_, i) => stub.claim(id, facts, `req-${i}`))]);
    const ran = claims.filter((c) => c.ok).length;
    // Exactly one of: the cancellation revoked it (no claim ran), or one claim ran (the cancellation came too late).
    expect(cancel.ok ? ran : 1 - ran).toBe(0);
    expect((await stub.get(id))!.state).toBe(cancel.ok ? "revoked" : "executed");
  });

  it("finds a call's approval by its call key, also in a desk written before call keys (filled in when it starts)", async () => {
    const stub = env.APPROVAL_DESK.getByName("acme-call-key");
    const id = approvalId("acme");
    const first = await stub.request(facts, { id, statusUrl: `http://127.0.0.1/approvals/${id}`, ttlMs: 60_000 });
    // The same call again finds it; another call (other arguments) gets its own.
    expect((await stub.request(facts, { id: approvalId("acme"), statusUrl: "http://127.0.0.1/x", ttlMs: 60_000 })).approval.id).toBe(first.approval.id);
    expect((await stub.request({ ...facts, argumentsDigest: "sha256:b" }, { id: approvalId("acme"), statusUrl: "http://127.0.0.1/y", ttlMs: 60_000 })).approval.id).not.toBe(first.approval.id);
    // As a desk from before: no call_key column. A new instance adds it and fills it in.
    const again = await runInDurableObject(stub, (_i: ApprovalDesk, state) => {
      state.storage.sql.exec("DROP INDEX approvals_call");
      state.storage.sql.exec("ALTER TABLE approvals DROP COLUMN call_key");
      new ApprovalDesk(state, env);
      const keys = state.storage.sql.exec<{ k: string | null }>("SELECT call_key AS k FROM approvals").toArray();
      return { filled: keys.every((r) => r.k !== null) && keys.length === 2 };
    });
    expect(again.filled).toBe(true);
    expect((await stub.request(facts, { id: approvalId("acme"), statusUrl: "http://127.0.0.1/z", ttlMs: 60_000 })).approval.id).toBe(first.approval.id);
  });
});
