import { describe, expect, it } from "vitest";
import { A2aPolicy, a2aSkillVisible } from "../../../src/a2a/a2a-policy.ts";
import { a2aPricesSchema } from "../../../src/config/tool-price-schema.ts";
import { a2aPolicySchema } from "../../../src/mcp/tool-policy.ts";

const policy = new A2aPolicy(
  a2aPolicySchema.parse({
    revision: "a2a-3",
    rules: [
      { id: "support", effect: "allow", principals: { tenants: ["acme"] }, agents: ["helpdesk"], skills: ["faq-*", "triage"] },
      { id: "refunds", effect: "allow", principals: { tenants: ["acme"], keys: ["finance-*"] }, agents: ["billing"], skills: ["refund"], approval: "required" },
      { id: "invoices", effect: "allow", principals: { tenants: ["acme"] }, agents: ["billing"], skills: ["invoice"] },
      { id: "no-export", effect: "deny", agents: ["*"], skills: ["export"] },
      { id: "ops-all", effect: "allow", principals: { keys: ["ops"] }, agents: ["*"], skills: ["*"] },
    ],
  }),
  a2aPricesSchema.parse([
    { id: "refund-price", agents: ["billing"], skills: ["refund"], price: { version: "b-1", currency: "USD", perCall: 0.05 }, requests: { perMinute: 10, burst: 2 } },
    { id: "billing-rest", agents: ["billing"], skills: ["*"], price: { version: "b-1", currency: "USD", perCall: 0.001 } },
    { id: "helpdesk-rate", agents: ["helpdesk"], skills: ["faq-*"], requests: { perMinute: 100, burst: 10 } },
  ]),
);
const analyst = { tenant: "acme", key: "analyst-1" };
const finance = { tenant: "acme", key: "finance-2" };

describe("A2A policy", () => {
  it("denies by default, naming no rule but the revision", () => {
    expect(policy.decide({ tenant: "other", key: "k" }, "helpdesk", "faq-billing")).toEqual({
      allowed: false,
      rule: undefined,
      policyRevision: "a2a-3",
      reason: "no rule allows it (deny by default)",
      skill: "faq-billing",
    });
    expect(new A2aPolicy(undefined).decide(analyst, "helpdesk", "faq").allowed).toBe(false);
  });

  it("allows by principal × agent × skill glob and names the rule", () => {
    expect(policy.decide(analyst, "helpdesk", "faq-billing")).toEqual({ allowed: true, rule: "support", policyRevision: "a2a-3", reason: "allowed by rule support", skill: "faq-billing" });
    expect(policy.decide(analyst, "helpdesk", "triage").rule).toBe("support");
    expect(policy.decide(analyst, "helpdesk", "escalate").allowed).toBe(false);
    expect(policy.decide(analyst, "billing", "faq-billing").allowed).toBe(false);
    // A glob's dots and other characters are literal.
    expect(policy.decide(analyst, "helpdesk", "faqXbilling").allowed).toBe(false);
  });

  it("lets a deny rule win over any allow rule", () => {
    expect(policy.decide({ tenant: "acme", key: "ops" }, "billing", "export")).toMatchObject({ allowed: false, rule: "no-export", reason: "denied by rule no-export" });
    expect(policy.decide({ tenant: "acme", key: "ops" }, "billing", "refund")).toMatchObject({ allowed: true, rule: "ops-all" });
  });

  it("marks approval from the allowing rule, as for MCP tools", () => {
    expect(policy.decide(finance, "billing", "refund")).toEqual({
      allowed: true,
      rule: "refunds",
      policyRevision: "a2a-3",
      reason: "allowed by rule refunds after approval",
      approval: "required",
      skill: "refund",
    });
    expect(policy.decide(finance, "billing", "invoice").approval).toBeUndefined();
    expect(policy.decide(analyst, "billing", "refund").allowed).toBe(false);
  });

  it("decides a message that names no skill on every skill the agent declares", () => {
    // Every declared skill allowed: allowed; one needing approval makes the message need it.
    expect(policy.decide(finance, "billing", undefined, ["invoice", "refund"])).toMatchObject({ allowed: true, rule: "refunds", approval: "required", skill: undefined });
    expect(policy.decide(finance, "billing", undefined, ["invoice"])).toMatchObject({ allowed: true, rule: "invoices", skill: undefined });
    // One refused skill refuses the message, and the reason names it.
    const d = policy.decide(analyst, "helpdesk", undefined, ["faq-a", "escalate"]);
    expect(d).toMatchObject({ allowed: false, rule: undefined, skill: undefined });
    expect(d.reason).toBe('skill "escalate": no rule allows it (deny by default)');
    expect(policy.decide({ tenant: "acme", key: "ops" }, "billing", undefined, ["invoice", "export"])).toMatchObject({ allowed: false, rule: "no-export" });
    // An agent that declares no skills needs a rule for every skill.
    expect(policy.decide(analyst, "helpdesk", undefined, []).allowed).toBe(false);
    expect(policy.decide({ tenant: "acme", key: "ops" }, "helpdesk", undefined, [])).toMatchObject({ allowed: true, rule: "ops-all" });
  });

  it("shows on a caller's card only the skills it could call", () => {
    expect(a2aSkillVisible(policy, analyst, "helpdesk", "faq-a")).toBe(true);
    expect(a2aSkillVisible(policy, analyst, "helpdesk", "escalate")).toBe(false);
    expect(a2aSkillVisible(policy, finance, "billing", "refund")).toBe(true);
    expect(a2aSkillVisible(policy, { tenant: "acme", key: "ops" }, "billing", "export")).toBe(false);
    expect(a2aSkillVisible(policy, { tenant: "acme", key: "ops" }, "billing", "anything")).toBe(true);
  });

  it("prices a call by the first matching rule, in micro-units, like a tool", () => {
    expect(policy.unpriced).toBe(false);
    expect(policy.pricing("billing", "refund")).toEqual({ rule: "refund-price", price: { version: "b-1", currency: "USD", micros: 50_000 }, requests: { perMinute: 10, burst: 2 } });
    expect(policy.pricing("billing", "invoice")).toMatchObject({ rule: "billing-rest", price: { micros: 1000 }, requests: undefined });
    // A message that names no skill is priced by a rule whose skills match `*`.
    expect(policy.pricing("billing", undefined)).toMatchObject({ rule: "billing-rest" });
    expect(policy.pricing("helpdesk", "faq-a")).toMatchObject({ rule: "helpdesk-rate", price: undefined, requests: { perMinute: 100, burst: 10 } });
    expect(policy.pricing("helpdesk", undefined)).toBeUndefined();
    expect(policy.pricing("helpdesk", "triage")).toBeUndefined();
    expect(new A2aPolicy(undefined).unpriced).toBe(true);
  });
});
