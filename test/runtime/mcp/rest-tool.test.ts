import { describe, expect, it } from "vitest";
import { refusalCode } from "./refusal.ts";
import { buildRestRequest, restToolSchema, trimResponse } from "../../../src/mcp/rest-tool.ts";

const tool = restToolSchema.parse({
  name: "get_issue",
  request: {
    method: "GET",
    baseUrl: "https://api.example.com/v3/",
    path: "/repos/{owner}/{repo}/issues/{number}",
    query: { state: "{state}", per_page: "50" },
    credential: { secret: "EXAMPLE_TOKEN", scheme: "bearer" },
  },
  response: { fields: ["title", "user.login"] },
});
const secrets = (name: string) => (name === "EXAMPLE_TOKEN" ? "token-value" : undefined);
const refused = refusalCode;

describe("REST tools", () => {
  it("builds the request from the template: encoded path segments, query, the credential from its secret", () => {
    const r = buildRestRequest(tool, { owner: "acme corp", repo: "app", number: 42, state: "open" }, secrets);
    expect(r).toEqual({
      method: "GET",
      url: "https://api.example.com/v3/repos/acme%20corp/app/issues/42?state=open&per_page=50",
      headers: { accept: "application/json", "user-agent": "sluice", authorization: "Bearer token-value" },
      body: undefined,
    });
    expect(buildRestRequest(tool, { owner: "a", repo: "b", number: 1 }, secrets).url).toBe("https://api.example.com/v3/repos/a/b/issues/1?per_page=50");
  });

  it("refuses path traversal in every spelling, and arguments that are not scalars", () => {
    for (const owner of ["..", ".", "", "a/../../admin", "..\\\\x", "a/b", { x: 1 }, ["a"], null]) {
      expect(refused(() => buildRestRequest(tool, { owner, repo: "r", number: 1 }, secrets)), JSON.stringify(owner)).toBe("invalid_request");
    }
    // Encoded dots stay encoded: the percent sign itself is encoded, so no decoder turns them into a traversal.
    expect(buildRestRequest(tool, { owner: "%2e%2e", repo: "r", number: 1 }, secrets).url).toContain("/repos/%252e%252e/r/");
    expect(refused(() => buildRestRequest(tool, { owner: "a", repo: "r", number: 1, state: { $ne: 1 } }, secrets))).toBe("invalid_request");
    expect(refused(() => buildRestRequest(tool, "not an object", secrets))).toBe("invalid_request");
  });

  it("sends the remaining arguments as the JSON body when asked, and fails closed without its secret", () => {
    const post = restToolSchema.parse({ name: "create", request: { method: "POST", baseUrl: "https://api.example.com", path: "/repos/{repo}/issues", body: "arguments" } });
    expect(buildRestRequest(post, { repo: "r", title: "t", labels: ["bug"] }, secrets)).toMatchObject({ url: "https://api.example.com/repos/r/issues", body: JSON.stringify({ title: "t", labels: ["bug"] }), headers: { "content-type": "application/json" } });
    expect(refused(() => buildRestRequest(tool, { owner: "a", repo: "r", number: 1 }, () => undefined))).toBe("internal_error");
  });

  it("refuses templates whose placeholders are not whole segments, at load", () => {
    expect(restToolSchema.safeParse({ name: "x", request: { method: "GET", baseUrl: "https://a.example", path: "/files/{name}.json" } }).success).toBe(false);
    expect(restToolSchema.safeParse({ name: "x", request: { method: "GET", baseUrl: "ftp://a.example" } }).success).toBe(false);
  });

  it("trims a JSON answer to the configured fields", () => {
    expect(trimResponse({ title: "t", body: "long", user: { login: "u", id: 1 }, extra: [1] }, ["title", "user.login", "missing.x"])).toEqual({ title: "t", user: { login: "u" } });
    expect(trimResponse({ a: 1 }, [])).toEqual({ a: 1 });
  });
});
