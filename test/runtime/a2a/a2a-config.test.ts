import { describe, expect, it } from "vitest";
import { checkA2aAgentNames } from "../../../src/config/check-a2a.ts";
import { loadConfig } from "../../../src/config/load-config.ts";
import { issuesOf } from "../support/config-issues.ts";
import { bundled, textsWith } from "../support/fixtures.ts";
import { cardV1 } from "./cards.ts";

const price = (perCall: number, currency = "USD") => ({ version: "a-1", currency, perCall });

/** The bundled config with the given publication `a2a` section, `x-session-id` trusted, and the agents it names declared (inline cards). */
function texts(a2a: unknown, agents: readonly string[] = ["helpdesk", "helpdesk-b", "billing"]) {
  const g = bundled("gateway");
  const security = g.security as { trustedHeaders?: string[] };
  g.security = { ...security, trustedHeaders: [...(security.trustedHeaders ?? []), "x-session-id"] };
  g.a2a = { stateSecret: "A2A_STATE_SECRET", agents: agents.map((name) => ({ name, card: cardV1({ name }) })) };
  const p = bundled("publication");
  p.a2a = a2a;
  return textsWith({ gateway: g, publication: p });
}

const section = {
  policy: {
    revision: "a2a-1",
    rules: [
      { id: "support", effect: "allow", principals: { tenants: ["acme"] }, agents: ["helpdesk"], skills: ["faq-*", "triage"] },
      { id: "refunds", effect: "allow", agents: ["billing"], skills: ["refund"], approval: "required" },
      { id: "no-export", effect: "deny", agents: ["*"], skills: ["export"] },
    ],
  },
  prices: [
    { id: "billing", agents: ["billing"], skills: ["*"], price: price(0.01), requests: { perMinute: 60, burst: 5 } },
    { id: "rate", agents: ["*"], skills: ["*"], requests: { perMinute: 120, burst: 20 } },
  ],
  routes: [
    { name: "support", match: { tags: ["support"] }, agents: ["helpdesk", "helpdesk-b"], affinityHeader: "x-session-id" },
    { name: "default", agents: ["helpdesk"] },
  ],
};

describe("publication a2a section", () => {
  it("loads policy, prices and routes with their defaults", () => {
    const cfg = loadConfig(texts(section));
    const a2a = cfg.publication.a2a!;
    expect(a2a.policy.rules[0]!.principals).toEqual({ tenants: ["acme"], keys: ["*"] });
    expect(a2a.policy.rules[1]!.approval).toBe("required");
    expect(a2a.prices[0]!.price).toEqual({ version: "a-1", currency: "USD", perCall: 10_000 });
    expect(a2a.routes.map((r) => r.name)).toEqual(["support", "default"]);
    const minimal = loadConfig(texts({ policy: { revision: "r" } })).publication.a2a!;
    expect(minimal).toEqual({ policy: { revision: "r", rules: [] }, prices: [], routes: [] });
    expect(loadConfig(texts(undefined)).publication.a2a).toBeUndefined();
  });

  it("refuses MCP's vocabulary in an A2A rule and A2A's in an MCP rule: one language, each section its targets", () => {
    const a2aIssues = issuesOf(() => loadConfig(texts({ policy: { revision: "r", rules: [{ id: "x", effect: "allow", servers: ["helpdesk"], names: ["faq"] }] } })));
    expect(a2aIssues.map((i) => i.path)).toEqual(expect.arrayContaining(["a2a.policy.rules[0].servers", "a2a.policy.rules[0].agents"]));
    const p = bundled("publication");
    p.mcp = { policy: { revision: "r", rules: [{ id: "x", effect: "allow", agents: ["helpdesk"], skills: ["faq"] }] } };
    expect(issuesOf(() => loadConfig(textsWith({ publication: p }))).map((i) => i.path)).toEqual(expect.arrayContaining(["mcp.policy.rules[0].agents", "mcp.policy.rules[0].servers"]));
  });

  it("refuses approval on a deny rule, bad names, empty and duplicate rules, an untrusted affinity header and a second currency, naming each", () => {
    const issues = issuesOf(() =>
      loadConfig(
        texts({
          policy: {
            revision: "r",
            rules: [
              { id: "d", effect: "deny", agents: ["*"], skills: ["x"], approval: "required" },
              { id: "d", effect: "allow", agents: ["Bad_Name"], skills: ["x"] },
            ],
          },
          prices: [
            { id: "p", agents: ["a"], skills: ["x"] },
            { id: "eur", agents: ["a"], skills: ["y"], price: price(0.01, "EUR") },
          ],
          routes: [
            { name: "r", match: {}, agents: ["a"] },
            { name: "r", agents: ["a", "a"] },
            { name: "s", agents: ["a"], affinityHeader: "x-client-picks" },
          ],
        }),
      ),
    );
    const lines = issues.map((i) => `${i.path}: ${i.message}`);
    expect(lines).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^a2a\.policy\.rules\[0\]\.approval: approval applies to allow rules only/),
        expect.stringMatching(/^a2a\.policy\.rules\[1\]\.agents\[0\]: .*agent name/),
        expect.stringMatching(/^a2a\.prices\[0\]: a rule needs a price/),
        expect.stringMatching(/^a2a\.routes\[0\]\.match: a match needs skills, tags or both/),
        expect.stringMatching(/^a2a\.routes\[1\]\.agents: each agent once/),
      ]),
    );
    // Cross-checks run once the shapes parse.
    const cross = issuesOf(() =>
      loadConfig(
        texts({
          policy: { revision: "r", rules: [{ id: "d", effect: "allow", agents: ["a"], skills: ["x"] }, { id: "d", effect: "allow", agents: ["a"], skills: ["y"] }] },
          prices: [{ id: "eur", agents: ["a"], skills: ["y"], price: price(0.01, "EUR") }],
          routes: [{ name: "r", agents: ["a"] }, { name: "r", agents: ["b"], affinityHeader: "x-client-picks" }],
        }),
      ),
    ).map((i) => `${i.path}: ${i.message}`);
    expect(cross).toEqual(
      expect.arrayContaining([
        'a2a.policy.rules: duplicate rule id "d"',
        'a2a.routes: duplicate route "r"',
        'a2a.routes[1].affinityHeader: header "x-client-picks" is not in gateway.yaml security.trustedHeaders',
        expect.stringMatching(/one currency for every budget and price, found USD, EUR|one currency for every budget and price, found EUR, USD/),
      ]),
    );
  });

  it("names every agent that gateway.yaml does not declare, in policy, prices and routes", () => {
    const pub = loadConfig(texts(section)).publication;
    // Loading checks it across the two files.
    expect(issuesOf(() => loadConfig(texts(section, ["helpdesk", "helpdesk-b"]))).map((i) => `${i.file}: ${i.path}`)).toEqual(expect.arrayContaining(["publication.yaml: a2a.policy.rules[1].agents[0]", "publication.yaml: a2a.prices[0].agents[0]"]));
    expect(checkA2aAgentNames(pub, new Set(["helpdesk", "helpdesk-b", "billing"]))).toEqual([]);
    expect(checkA2aAgentNames(pub, new Set(["helpdesk"])).map((i) => `${i.path}: ${i.message}`)).toEqual([
      'a2a.policy.rules[1].agents[0]: unknown agent "billing" (gateway.yaml a2a.agents)',
      'a2a.prices[0].agents[0]: unknown agent "billing" (gateway.yaml a2a.agents)',
      'a2a.routes[0].agents[1]: unknown agent "helpdesk-b" (gateway.yaml a2a.agents)',
    ]);
  });
});
