import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config/load-config.ts";
import { bundled, textsWith } from "../support/fixtures.ts";
import { issuesOf } from "../support/config-issues.ts";

const issuer = (over: Record<string, unknown> = {}) => ({ name: "corp", issuer: "https://login.example.com/", jwksUrl: "https://login.example.com/jwks.json", algorithms: ["RS256"], tenant: "demo", ...over });

function load(oauth: unknown) {
  const g = bundled("gateway");
  g.auth = { oauth };
  return loadConfig(textsWith({ gateway: g }));
}

const oauthIssues = (oauth: unknown) => issuesOf(() => load(oauth));

describe("gateway.yaml auth.oauth", () => {
  it("loads an issuer with a fixed tenant and fills the defaults", () => {
    const c = load({ resource: "https://gw.example.com/mcp", issuers: [issuer()] }).gateway.auth.oauth!;
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
        'auth.oauth.issuers: duplicate issuer name "corp"',
        "auth.oauth.issuers: issuer https://login.example.com/ is listed twice",
        expect.stringMatching(/^auth\.oauth\.issuers\[0\]\.jwksUrl: http:\/\/10\.1\.2\.3 is a private/),
        'auth.oauth.issuers[1].tenant: unknown tenant "nobody" (publication.yaml tenants)',
        expect.stringMatching(/^auth\.oauth\.issuers\[2\]\.jwksUrl: .*metadata service/),
      ]),
    );
  });

  it("refuses a resource with a fragment, and an issuer with neither or both tenant sources", () => {
    expect(oauthIssues({ resource: "https://gw.example.com/mcp#x", issuers: [issuer()] }).map((i) => i.path)).toContain("auth.oauth.resource");
    expect(oauthIssues({ resource: "https://gw.example.com/mcp", issuers: [issuer({ tenant: undefined })] }).map((i) => i.path)).toContain("auth.oauth.issuers[0]");
    expect(oauthIssues({ resource: "https://gw.example.com/mcp", issuers: [issuer({ claims: { tenant: "org" } })] }).map((i) => i.path)).toContain("auth.oauth.issuers[0]");
  });

  it("loads a fixed chargeTo of the fixed tenant, or a chargeTo claim, and refuses one that names nothing in the tenant", () => {
    const fixed = load({ resource: "https://gw.example.com/mcp", issuers: [issuer({ chargeTo: "platform/playground" }), issuer({ name: "team", issuer: "https://team.example.com/", chargeTo: "platform" })] }).gateway.auth.oauth!;
    expect(fixed.issuers.map((i) => i.chargeTo)).toEqual(["platform/playground", "platform"]);
    const claimed = load({ resource: "https://gw.example.com/mcp", issuers: [issuer({ tenant: undefined, claims: { tenant: "org", chargeTo: "https://example.com/charge_to" } })] }).gateway.auth.oauth!;
    expect(claimed.issuers[0]!.claims.chargeTo).toBe("https://example.com/charge_to");
    const issues = oauthIssues({
      resource: "https://gw.example.com/mcp",
      issuers: [issuer({ chargeTo: "nope" }), issuer({ name: "p", issuer: "https://p.example.com/", chargeTo: "platform/nope" })],
    });
    expect(issues.map((i) => `${i.path}: ${i.message}`)).toEqual([
      'auth.oauth.issuers[0].chargeTo: tenant "demo" has no team "nope" (publication.yaml tenants)',
      'auth.oauth.issuers[1].chargeTo: team "platform" has no project "nope" (publication.yaml tenants)',
    ]);
  });

  it("refuses both a fixed chargeTo and a chargeTo claim, a fixed chargeTo without a fixed tenant, and a malformed one", () => {
    const paths = (over: Record<string, unknown>) => oauthIssues({ resource: "https://gw.example.com/mcp", issuers: [issuer(over)] }).map((i) => `${i.path}: ${i.message}`);
    expect(paths({ chargeTo: "platform", claims: { chargeTo: "proj" } })).toEqual([expect.stringMatching(/^auth\.oauth\.issuers\[0\]\.chargeTo: give at most one of `chargeTo`/)]);
    expect(paths({ tenant: undefined, chargeTo: "platform", claims: { tenant: "org" } })).toEqual([expect.stringMatching(/^auth\.oauth\.issuers\[0\]\.chargeTo: a fixed `chargeTo` needs a fixed `tenant`/)]);
    for (const bad of ["Platform", "a/b/c", "/x", ""]) expect(paths({ chargeTo: bad }).join()).toMatch(/issuers\[0\]\.chargeTo: .*team id or team\/project/);
  });

  it("refuses the key's old place, mcp.oauth, saying where it moved, and names every issue of the rest", () => {
    const g = bundled("gateway");
    g.mcp = { oauth: { resource: "https://gw.example.com/mcp", issuers: [issuer()] } };
    g.auth = { oauth: { resource: "https://gw.example.com/mcp", issuers: [issuer({ tenant: "nobody" })] } };
    const issues = issuesOf(() => loadConfig(textsWith({ gateway: g })));
    expect(issues.map((i) => `${i.file}: ${i.path}: ${i.message}`)).toEqual(["gateway.yaml: mcp.oauth: moved to auth.oauth, since access tokens authenticate every endpoint now, not only /mcp: move the block there unchanged"]);
  });

  it("loads scopes that grant entrypoints (none by default), and refuses one that names an entrypoint the publication lacks", () => {
    expect(load({ resource: "https://gw.example.com/mcp", issuers: [issuer()] }).gateway.auth.oauth!.scopeEntrypoints).toEqual({});
    const c = load({ resource: "https://gw.example.com/", issuers: [issuer()], scopeEntrypoints: { "models:chat": ["sluice-chat"], "models:all": ["*"] } }).gateway.auth.oauth!;
    expect(c.scopeEntrypoints).toEqual({ "models:chat": ["sluice-chat"], "models:all": ["*"] });
    const issues = oauthIssues({ resource: "https://gw.example.com/", issuers: [issuer()], scopeEntrypoints: { "models:chat": ["sluice-chat", "nope"], "bad scope": ["sluice-chat"], empty: [] } });
    expect(issues.map((i) => `${i.path}: ${i.message}`)).toEqual(
      expect.arrayContaining([expect.stringMatching(/^auth\.oauth\.scopeEntrypoints\.bad scope: .*scope token/), expect.stringMatching(/^auth\.oauth\.scopeEntrypoints\.empty: /)]),
    );
    expect(oauthIssues({ resource: "https://gw.example.com/", issuers: [issuer()], scopeEntrypoints: { "models:chat": ["sluice-chat", "nope"] } }).map((i) => `${i.path}: ${i.message}`)).toEqual([
      'auth.oauth.scopeEntrypoints.models:chat[1]: unknown entrypoint "nope" (publication.yaml entrypoints)',
    ]);
  });
});
