import { describe, expect, it } from "vitest";
import type { ApprovalFacts } from "../../../src/approvals/approval-desk.ts";
import { factsDigest, RequestStateSealer } from "../../../src/approvals/request-state.ts";

const facts: ApprovalFacts = { principal: { tenant: "acme", key: "k1" }, server: "files", tool: "delete", toolDigest: "sha256:t", argumentsDigest: "sha256:a", policyRevision: "p1", rule: "risky" };

describe("sealed approval requestState", () => {
  it("opens what it sealed, for the same facts, until it expires", async () => {
    const sealer = await RequestStateSealer.fromSecret("a-secret-of-enough-length");
    const state = await sealer.seal({ approvalId: "ap_1", facts: await factsDigest(facts), nonce: "n1", expiresAt: 1000 });
    expect(await sealer.open(state, facts, 999)).toEqual({ ok: true, payload: { approvalId: "ap_1", facts: await factsDigest(facts), nonce: "n1", expiresAt: 1000 } });
    expect(await sealer.open(state, facts, 1000)).toEqual({ ok: false, why: "expired" });
  });

  it("refuses a tampered state, another secret's, and garbage", async () => {
    const sealer = await RequestStateSealer.fromSecret("a-secret-of-enough-length");
    const state = await sealer.seal({ approvalId: "ap_1", facts: await factsDigest(facts), nonce: "n1", expiresAt: 1000 });
    const [v, body, mac] = state.split(".");
    const forged = JSON.parse(atob(body!.replace(/-/g, "+").replace(/_/g, "/")));
    const forgedBody = btoa(JSON.stringify({ ...forged, approvalId: "ap_2" })).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
    expect(await sealer.open(`${v}.${forgedBody}.${mac}`, facts, 0)).toEqual({ ok: false, why: "tampered" });
    expect(await sealer.open(`${v}.${body}.${mac!.slice(0, -2)}AA`, facts, 0)).toEqual({ ok: false, why: "tampered" });
    const other = await RequestStateSealer.fromSecret("another-secret-of-enough-length");
    expect(await other.open(state, facts, 0)).toEqual({ ok: false, why: "tampered" });
    for (const junk of ["", "a1", "a1.x", "a1.!!.??", "b1.abc.def", `${state}.extra`]) expect((await sealer.open(junk, facts, 0)).ok).toBe(false);
  });

  it("is bound to every fact: other arguments, tool definition, principal or policy do not open it", async () => {
    const sealer = await RequestStateSealer.fromSecret("a-secret-of-enough-length");
    const state = await sealer.seal({ approvalId: "ap_1", facts: await factsDigest(facts), nonce: "n1", expiresAt: 1000 });
    for (const changed of [{ argumentsDigest: "sha256:b" }, { toolDigest: "sha256:u" }, { principal: { tenant: "acme", key: "k2" } }, { policyRevision: "p2" }, { taskId: "t" }]) {
      expect(await sealer.open(state, { ...facts, ...changed }, 0)).toEqual({ ok: false, why: "wrong_facts" });
    }
  });

  it("refuses a secret too short to derive a key from", async () => {
    await expect(RequestStateSealer.fromSecret("short")).rejects.toThrow(RangeError);
  });
});
