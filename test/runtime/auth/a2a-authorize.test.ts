import { describe, expect, it } from "vitest";
import { A2aPolicy } from "../../../src/a2a/a2a-policy.ts";
import { authorizeAgentUse, authorizeMessage } from "../../../src/auth/a2a-authorize.ts";
import type { A2aRecord } from "../../../src/context/request-record.ts";
import { a2aPolicySchema } from "../../../src/mcp/tool-policy.ts";
import { refusal } from "../support/refusal.ts";

const policy = new A2aPolicy(a2aPolicySchema.parse({
  revision: "a2a-t",
  rules: [
    { id: "faq", effect: "allow", principals: { tenants: ["acme"] }, agents: ["helpdesk"], skills: ["faq"] },
    { id: "refund", effect: "allow", principals: { tenants: ["acme"] }, agents: ["billing"], skills: ["refund", "invoice"], approval: "required" },
  ],
}));
const caller = { tenant: "acme", key: "k1" };
const record = (): A2aRecord => ({ method: "SendMessage", jsonrpcId: 1, generation: "1.0", agent: "helpdesk", skill: undefined });


describe("authorizing an A2A message", () => {
  it("allows a named skill a rule allows, and records the decision", () => {
    const r = record();
    expect(authorizeMessage(policy, caller, "helpdesk", "faq", ["faq", "triage"], r).rule).toBe("faq");
    expect(r.decision).toMatchObject({ allowed: true, rule: "faq", policyRevision: "a2a-t" });
  });

  it("refuses a skill no rule allows, and a message naming none when one declared skill is refused — recorded before the refusal", () => {
    const r = record();
    const named = refusal(() => authorizeMessage(policy, caller, "helpdesk", "triage", ["faq", "triage"], r));
    expect(named.code).toBe("tool_not_allowed");
    expect(r.decision?.allowed).toBe(false);
    const none = refusal(() => authorizeMessage(policy, caller, "helpdesk", undefined, ["faq", "triage"], record()));
    expect(none.code).toBe("tool_not_allowed");
    expect(none.message).toMatch(/skill "triage"/);
  });

  it("refuses a skill the agent does not declare as a bad request", () => {
    expect(refusal(() => authorizeMessage(policy, caller, "helpdesk", "nope", ["faq"], record())).code).toBe("invalid_request");
  });

  it("answers a rule that requires approval with the decision, for decide's approval gate to hold the message", () => {
    const r = record();
    const d = authorizeMessage(policy, caller, "billing", "refund", ["refund"], r);
    expect(d).toMatchObject({ allowed: true, approval: "required" });
    expect(r.decision).toMatchObject({ allowed: true, rule: d.rule });
  });

  it("lets a caller allowed some skill of an agent reach its tasks, and no one else", () => {
    const r = record();
    authorizeAgentUse(policy, caller, "helpdesk", ["triage", "faq"], r);
    expect(r.decision).toMatchObject({ allowed: true, rule: "faq" });
    expect(refusal(() => authorizeAgentUse(policy, { tenant: "other", key: "k" }, "helpdesk", ["faq"], record())).code).toBe("tool_not_allowed");
  });
});
