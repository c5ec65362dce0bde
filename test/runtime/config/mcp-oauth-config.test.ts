import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config/load-config.ts";
import { bundled, textsWith } from "../support/fixtures.ts";
import { issuesOf } from "../support/config-issues.ts";

const issuer = (over: Record<string, unknown> = {}) => ({ name: "corp", issuer: "https://login.example.com/", jwksUrl: "https://login.example.com/jwks.json", algorithms: ["RS256"], tenant: "demo", ...over });

function load(oauth: unknown) {
  const g = bundled("gateway");
  g.mcp = { oauth };
  return loadConfig(textsWith({ gateway: g }));
}

const oauthIssues = (oauth: unknown) => issuesOf(() => load(oauth));

describe("gateway.yaml mcp.oauth", () => {
  it("loads an issuer with a fixed tenant and fills the defaults", () => {
    const c = load({ resource: "https://gw.example.com/mcp", issuers: [issuer()] }).gateway.mcp.oauth!;
    expect(c).toMatchObject({ requiredScopes: [], clockSkewSeconds: 30, jwksCacheTtlMs: 600_000, jwksMinRefetchMs: 30_000, jwksTimeoutMs: 5000 });
    expect(c.issuers[0]!.claims).toEqual({ subject: "sub", scope: "scope" });
  });

  it("sends every JWKS URL through the egress guard, and refuses a fixed tenant the publication lacks and repeated issuers", () => {
    const issues = oauthIssues({
      resource: "https://gw.example.com/mcp",
      issuers: [issuer({ jwksUrl: "http://10.1.2.3/jwks.json" }), issuer({ tenant: "nobody" }), issuer({ name: "other", jwksUrl: "https://169.254.169.254/jwks" })],
    });
    expect(issues.map((i) => `${i.path}: ${i.message}`)).toEqual(
      expect.arrayContaining([
        'mcp.oauth.issuers: duplicate issuer name "corp"',
        "mcp.oauth.issuers: issuer https://login.example.com/ is listed twice",
        expect.stringMatching(/^mcp\.oauth\.issuers\[0\]\.jwksUrl: http:\/\/10\.1\.2\.3 is a private/),
        'mcp.oauth.issuers[1].tenant: unknown tenant "nobody" (publication.yaml tenants)',
        expect.stringMatching(/^mcp\.oauth\.issuers\[2\]\.jwksUrl: .*metadata service/),
      ]),
    );
  });

  it("refuses a resource with a fragment, and an issuer with neither or both tenant sources", () => {
    expect(oauthIssues({ resource: "https://gw.example.com/mcp#x", issuers: [issuer()] }).map((i) => i.path)).toContain("mcp.oauth.resource");
    expect(oauthIssues({ resource: "https://gw.example.com/mcp", issuers: [issuer({ tenant: undefined })] }).map((i) => i.path)).toContain("mcp.oauth.issuers[0]");
    expect(oauthIssues({ resource: "https://gw.example.com/mcp", issuers: [issuer({ claims: { tenant: "org" } })] }).map((i) => i.path)).toContain("mcp.oauth.issuers[0]");
  });
});
