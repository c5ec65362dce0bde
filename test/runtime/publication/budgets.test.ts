import { describe, expect, it } from "vitest";
import { compileBudgetPolicy } from "../../../src/publication/budgets.ts";
import { compilePublication } from "../../../src/publication/compile-publication.ts";
import { loadConfig } from "../../../src/config/load-config.ts";
import { ConfigValidationError } from "../../../src/config/parse-file.ts";
import { bundled, bundledTexts, textsWith } from "../support/fixtures.ts";

const config = loadConfig(bundledTexts);
const policy = compileBudgetPolicy(config.publication);
const none = new Map<string, string>();
/** The demo key's principal, as authentication makes it from the key's config. */
const DEMO = { tenantId: "demo", keyId: "demo", chargeTo: "platform/playground" };

function issuesOf(publication: unknown, gateway?: unknown): string[] {
  try {
    loadConfig(textsWith({ publication, ...(gateway ? { gateway } : {}) }));
    return [];
  } catch (err) {
    if (err instanceof ConfigValidationError) return err.issues.map((i) => `${i.path}: ${i.message}`);
    throw err;
  }
}

describe("budget policy", () => {
  it("charges a key along tenant → team → project → key, with the configured limits", () => {
    const b = policy.forPrincipal(DEMO, none)!;
    expect(b.root).toBe("tenant:demo");
    expect(b.scopes.map((s) => s.name)).toEqual(["tenant:demo", "team:platform", "project:platform/playground", "key:demo"]);
    expect(b.scopes[0]!.limits).toEqual({ money: { currency: "USD", limitMicros: 1_000_000_000, periodMs: 30 * 86_400_000 } });
    expect(b.scopes[1]!.limits).toEqual({ tokens: { limit: 50_000_000, windowMs: 3_600_000 } });
    expect(b.exposeBudget).toBe(true);
    const limited = policy.forPrincipal({ tenantId: "demo", keyId: "limited", chargeTo: "platform" }, none)!;
    expect(limited.scopes.map((s) => s.name)).toEqual(["tenant:demo", "team:platform", "key:limited"]);
    expect(limited.scopes[2]!.limits).toEqual({ requests: { perMinute: 600, burst: 100 } });
    expect(limited.exposeBudget).toBe(false);
  });

  it("takes the charge target from the principal: a key's configured one and a token's claim make the same path", () => {
    // Authentication puts the key's configured chargeTo on its principal.
    const keys = [...compilePublication(config.publication).keys.values()].map((k) => k.principal);
    expect(keys).toEqual(expect.arrayContaining([DEMO, { tenantId: "demo", keyId: "limited", chargeTo: "platform" }]));
    // A token caller (no configured key) charged to the same project: the same scopes and limits above its own.
    const token = policy.forPrincipal({ tenantId: "demo", keyId: "corp:alice", chargeTo: "platform/playground" }, none)!;
    const key = policy.forPrincipal(DEMO, none)!;
    expect(token.scopes.slice(0, 3)).toEqual(key.scopes.slice(0, 3));
    expect(token.scopes.map((s) => s.name)).toEqual(["tenant:demo", "team:platform", "project:platform/playground", "key:corp:alice"]);
    expect(token.scopes[3]).toEqual({ name: "key:corp:alice" });
    expect(token.exposeBudget).toBe(false);
    // Charged to a team, or to the tenant alone: the path stops there.
    expect(policy.forPrincipal({ tenantId: "demo", keyId: "corp:bob", chargeTo: "platform" }, none)!.scopes.map((s) => s.name)).toEqual(["tenant:demo", "team:platform", "key:corp:bob"]);
    expect(policy.forPrincipal({ tenantId: "demo", keyId: "corp:carol" }, none)!.scopes.map((s) => s.name)).toEqual(["tenant:demo", "key:corp:carol"]);
    // A target that authentication should have refused is never charged to less than it names.
    let thrown: unknown;
    try {
      policy.forPrincipal({ tenantId: "demo", keyId: "corp:dave", chargeTo: "platform/nope" }, none);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toMatchObject({ code: "internal_error", status: 500 });
  });

  it("adds the end user named by the trusted header, and refuses an unusable one", () => {
    const b = policy.forPrincipal(DEMO, new Map([["x-sluice-end-user", "user-42"]]))!;
    expect(b.scopes.at(-1)).toEqual({ name: "user:user-42", limits: { money: { currency: "USD", limitMicros: 5_000_000, periodMs: 86_400_000 } } });
    expect(() => policy.forPrincipal(DEMO, new Map([["x-sluice-end-user", "has space"]]))).toThrow(/x-sluice-end-user/);
    expect(() => policy.forPrincipal(DEMO, new Map([["x-sluice-end-user", "x".repeat(129)]]))).toThrow(/1-128/);
  });

  it("leaves tenants without budgets off the ledger", () => {
    const pub = bundled("publication");
    pub.tenants.push({ id: "free", apiKeys: [{ id: "k", sha256: "a".repeat(64), entrypoints: ["*"] }] });
    const p = compileBudgetPolicy(loadConfig(textsWith({ publication: pub })).publication);
    expect(p.forPrincipal({ tenantId: "free", keyId: "k" }, none)).toBeUndefined();
    expect(p.tenants().map((t) => t.id)).toEqual(["demo"]);
  });

  it("carries the tenant's ledger retention to every reservation: 30 days unless configured, 7 to 3650 days", () => {
    expect(policy.forPrincipal(DEMO, none)!.retentionMs).toBe(30 * 86_400_000);
    const pub = bundled("publication");
    pub.tenants[0].ledger = { ...pub.tenants[0].ledger, retention: "90d" };
    const p = compileBudgetPolicy(loadConfig(textsWith({ publication: pub })).publication);
    expect(p.forPrincipal(DEMO, none)!.retentionMs).toBe(90 * 86_400_000);
    expect(p.tenants()[0]!.retentionMs).toBe(90 * 86_400_000);
    pub.tenants[0].ledger.retention = "1d";
    expect(issuesOf(pub).join("\n")).toMatch(/ledger\.retention.*7d to 3650d/);
  });

  it("knows each revision's price and each entrypoint's mode", () => {
    expect(policy.price("chat-large", 1)).toMatchObject({ version: "2026-11", input: 3_000_000, cacheWrite: 3_750_000 });
    expect(policy.price("chat-large", 9)).toBeUndefined();
    expect(policy.entrypoint("sluice-chat")).toEqual({ mode: "strict", defaultMaxOutputTokens: 4096 });
    expect(policy.entrypoint("sluice-large").mode).toBe("soft");
  });
});

describe("budget config checks", () => {
  it("refuses a chargeTo naming no team or project of the tenant", () => {
    const pub = bundled("publication");
    pub.tenants[0].apiKeys[0].chargeTo = "platform/nope";
    pub.tenants[0].apiKeys[1].chargeTo = "ghost";
    expect(issuesOf(pub)).toEqual(['tenants[0].apiKeys[0].chargeTo: team "platform" has no project "nope"', 'tenants[0].apiKeys[1].chargeTo: tenant "demo" has no team "ghost"']);
  });

  it("refuses an untrusted end-user header, mixed currencies and unpriced revisions under a money limit", () => {
    const pub = bundled("publication");
    pub.tenants[0].endUsers.header = "x-user";
    pub.models[0].revisions[0].price.currency = "EUR";
    delete pub.models[1].revisions[0].price;
    const issues = issuesOf(pub);
    expect(issues).toContain('tenants[0].endUsers.header: header "x-user" is not in gateway.yaml security.trustedHeaders');
    expect(issues).toContain("models[1].revisions[0]: model chat-large revision 1 needs a price: some scope has a money limit or balance");
    expect(issues.some((i) => i.includes("one currency for every budget and price"))).toBe(true);
  });

  it("refuses bad limits with the path and a reason", () => {
    const pub = bundled("publication");
    pub.tenants[0].limits = { money: { limit: 1, currency: "USD", period: "1 week" } };
    pub.tenants[0].teams[0].limits = {};
    const issues = issuesOf(pub);
    expect(issues.some((i) => i.startsWith("tenants.0.limits.money.period") || i.includes("money.period"))).toBe(true);
    expect(issues.some((i) => i.includes("name at least one limit"))).toBe(true);
  });
});
