import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config/load-config.ts";
import { compilePublication } from "../../../src/publication/compile-publication.ts";
import { redactedConfig } from "../../../src/config/redact.ts";
import { ALLOWED_TARGETS, FORBIDDEN_TARGETS } from "../support/egress-targets.ts";
import { issuesOf } from "../support/config-issues.ts";
import { bundled, bundledTexts, textsWith } from "../support/fixtures.ts";


describe("config loading", () => {
  it("loads the bundled defaults and fills defaults", () => {
    const c = loadConfig(bundledTexts);
    expect(c.gateway.listeners.public.port).toBe(8787);
    expect(c.gateway.listeners.admin.port).toBe(8788);
    expect(c.publication.entrypoints.map((e) => e.name)).toContain("sluice-chat");
    expect(c.publication.entrypoints.find((e) => e.name === "sluice-large")?.retry.maxAttempts).toBe(1);
    expect(c.backendsSeed.pools.length).toBeGreaterThan(0);
  });

  it("caps limits.maxHeaderBytes at the request head workerd itself serves", () => {
    const at = bundled("gateway");
    at.limits.maxHeaderBytes = 128 * 1024;
    expect(loadConfig(textsWith({ gateway: at })).gateway.limits.maxHeaderBytes).toBe(131072);
    const past = bundled("gateway");
    past.limits.maxHeaderBytes = 128 * 1024 + 1;
    expect(issuesOf(() => loadConfig(textsWith({ gateway: past }))).map((i) => i.path)).toContain("limits.maxHeaderBytes");
  });

  it("rejects an unknown key with the file and the full path", () => {
    const g = bundled("gateway");
    g.limits.maxBodyBytez = 10;
    const issues = issuesOf(() => loadConfig(textsWith({ gateway: g })));
    expect(issues).toContainEqual({ file: "gateway.yaml", path: "limits.maxBodyBytez", message: "unknown key" });
  });

  it("collects the issues of every file before failing", () => {
    const g = bundled("gateway");
    g.listeners.public.port = 70000;
    const b = bundled("backends");
    b.backends[0].protocol = "smoke-signals";
    const issues = issuesOf(() => loadConfig(textsWith({ gateway: g, backends: b })));
    expect(issues.map((i) => `${i.file}:${i.path}`)).toEqual(
      expect.arrayContaining(["gateway.yaml:listeners.public.port", "backends.yaml:backends[0].protocol"]),
    );
  });

  it("reports YAML syntax errors and duplicate keys with a line", () => {
    const issues = issuesOf(() => loadConfig({ ...bundledTexts, gateway: "version: 1\nversion: 1\n" }));
    expect(issues[0]?.file).toBe("gateway.yaml");
    expect(issues[0]?.path).toMatch(/^line 2/);
  });

  it("refuses inline secrets: a credential is a secret name, not a value", () => {
    const b = bundled("backends");
    b.backends[0].credential = { secret: "sk-live-abc123" };
    const issues = issuesOf(() => loadConfig(textsWith({ backends: b })));
    expect(issues.some((i) => i.path === "backends[0].credential.secret")).toBe(true);
  });

  it("checks publication references", () => {
    const p = bundled("publication");
    p.entrypoints[0].default = [["no-such-model"]];
    p.entrypoints[0].routes[0].when = { header: { name: "x-untrusted", in: ["a"] } };
    p.tenants[0].apiKeys[1].entrypoints = ["ghost"];
    p.models[0].activeRevision = 9;
    const issues = issuesOf(() => loadConfig(textsWith({ publication: p })));
    const paths = issues.map((i) => i.path);
    expect(paths).toContain("entrypoints[0].default[0][0]");
    expect(paths).toContain("entrypoints[0].routes[0].when.header.name");
    expect(paths).toContain("tenants[0].apiKeys[1].entrypoints[0]");
    expect(paths).toContain("models[0].activeRevision");
  });

  it("rejects API keys that are not SHA-256 digests", () => {
    const p = bundled("publication");
    p.tenants[0].apiKeys[0].sha256 = "sk-sluice-demo";
    const issues = issuesOf(() => loadConfig(textsWith({ publication: p })));
    expect(issues.map((i) => i.path)).toContain("tenants[0].apiKeys[0].sha256");
  });

  it("derives pool requirements from active revisions only", () => {
    const p = bundled("publication");
    p.models[0].revisions.push({ revision: 2, pool: "retired-pool", requires: ["chat"] });
    const reqs = compilePublication(loadConfig(textsWith({ publication: p })).publication).poolRequirements;
    expect(reqs.map((r) => r.pool)).not.toContain("retired-pool");
    expect(reqs.map((r) => r.pool)).toEqual(expect.arrayContaining(["sim-small", "sim-large"]));
  });

  it("refuses a CORS origin that is not exactly an origin", () => {
    for (const origin of ["https://app.example.com/", "https://app.example.com/path", "app.example.com", "*", "https://App.example.com", "ftp://app.example.com"]) {
      const g = bundled("gateway");
      g.security.cors = { allowOrigins: [origin] };
      expect(issuesOf(() => loadConfig(textsWith({ gateway: g }))).map((i) => i.path), origin).toContain("security.cors.allowOrigins[0]");
    }
    const ok = bundled("gateway");
    ok.security.cors = { allowOrigins: ["https://app.example.com", "http://localhost:5173"] };
    expect(loadConfig(textsWith({ gateway: ok })).gateway.security.cors.allowOrigins).toHaveLength(2);
  });

  it("refuses an egress allowlist entry that is not host:port, or names what is never allowed", () => {
    const g = bundled("gateway");
    g.security.egress.allow = ["127.0.0.1:9901", "http://127.0.0.1:9901", "169.254.169.254"];
    const issues = issuesOf(() => loadConfig(textsWith({ gateway: g })));
    expect(issues.map((i) => i.path)).toEqual(["security.egress.allow[1]", "security.egress.allow[2]"]);
    expect(issues[1]!.message).toContain("metadata");
  });

  it("refuses a provider response header that is never passed to clients", () => {
    const b = bundled("backends");
    b.backends[0].responseHeaders = ["x-request-id", "set-cookie", "server", "connection", "x-sluice-attempts"];
    const issues = issuesOf(() => loadConfig(textsWith({ backends: b })));
    expect(issues.map((i) => i.path)).toEqual([1, 2, 3, 4].map((n) => `backends[0].responseHeaders[${n}]`));
  });

  it("redacts key hashes when printing", () => {
    const printed = JSON.stringify(redactedConfig(loadConfig(bundledTexts)));
    expect(printed).not.toContain("1c590839af894cf25f9a5fe06929af05b377f60efbe55508ef93d251887b9213");
    expect(printed).toContain("1c590839…(redacted)");
  });
});

describe("the egress guard at config load", () => {
  const withBaseUrl = (url: string) => {
    const b = bundled("backends");
    b.backends[0].baseUrl = url;
    return textsWith({ backends: b });
  };

  it.each(FORBIDDEN_TARGETS)("fails the start for a seed backend at $url ($what)", ({ url }) => {
    const issues = issuesOf(() => loadConfig(withBaseUrl(url)));
    expect(issues).toContainEqual(expect.objectContaining({ file: "backends.yaml", path: "backends[0].baseUrl" }));
  });

  it.each(ALLOWED_TARGETS)("starts with a seed backend at $url ($what)", ({ url }) => {
    expect(loadConfig(withBaseUrl(url)).backendsSeed.backends[0]!.baseUrl).toBe(url);
  });

  it("allows exactly the simulator's loopback address in the bundled gateway.yaml", () => {
    expect(loadConfig(bundledTexts).gateway.security.egress.allow).toEqual(["127.0.0.1:9901"]);
    const g = bundled("gateway");
    g.security.egress.allow = [];
    expect(issuesOf(() => loadConfig(textsWith({ gateway: g })))).toEqual([
      { file: "backends.yaml", path: "backends[0].baseUrl", message: "http://127.0.0.1:9901 is a loopback address; list it in gateway.yaml security.egress.allow to reach it" },
    ]);
  });
});
