import { env } from "cloudflare:test";
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
});
