import { describe, expect, it } from "vitest";
import { refusalCode } from "../support/refusal.ts";
import { buildRestRequest, restToolSchema, trimResponse } from "../../../src/mcp/rest-tool.ts";

const tool = restToolSchema.parse({
  name: "get_issue",
  inputSchema: { type: "object", properties: { owner: { type: "string" }, repo: { type: "string" }, number: { type: "integer" }, state: { type: "string" } }, required: ["owner", "repo", "number"] },
  method: "GET",
  path: "/repos/{owner}/{repo}/issues/{number}",
  query: { state: "{state}", per_page: "50" },
  response: { fields: ["title", "user.login"] },
});
const target = { baseUrl: "https://api.example.com/v3/", credential: { secret: "EXAMPLE_TOKEN", scheme: "bearer" } } as const;
const secrets = (name: string) => (name === "EXAMPLE_TOKEN" ? "token-value" : undefined);
const refused = refusalCode;

describe("REST tools", () => {
  it("builds the request from the template: encoded path segments, query, the credential from its secret", () => {
    const r = buildRestRequest(target, tool, { owner: "acme corp", repo: "app", number: 42, state: "open" }, secrets);
    expect(r).toEqual({
      method: "GET",
      url: "https://api.example.com/v3/repos/acme%20corp/app/issues/42?state=open&per_page=50",
      headers: { accept: "application/json", "user-agent": "sluice", authorization: "Bearer token-value" },
      body: undefined,
    });
    expect(buildRestRequest(target, tool, { owner: "a", repo: "b", number: 1 }, secrets).url).toBe("https://api.example.com/v3/repos/a/b/issues/1?per_page=50");
  });

  it("refuses path traversal in every spelling, and arguments that are not scalars", () => {
    for (const owner of ["..", ".", "", "a/../../admin", "..\\\\x", "a/b", { x: 1 }, ["a"], null]) {
      expect(refused(() => buildRestRequest(target, tool, { owner, repo: "r", number: 1 }, secrets)), JSON.stringify(owner)).toBe("invalid_request");
    }
    // Encoded dots stay encoded: the percent sign itself is encoded, so no decoder turns them into a traversal.
    expect(buildRestRequest(target, tool, { owner: "%2e%2e", repo: "r", number: 1 }, secrets).url).toContain("/repos/%252e%252e/r/");
    expect(refused(() => buildRestRequest(target, tool, { owner: "a", repo: "r", number: 1, state: { $ne: 1 } }, secrets))).toBe("invalid_request");
    expect(refused(() => buildRestRequest(target, tool, "not an object", secrets))).toBe("invalid_request");
  });

  it("sends the remaining arguments as the JSON body when asked, and fails closed without its secret", () => {
    const post = restToolSchema.parse({ name: "create", inputSchema: { type: "object", properties: { repo: { type: "string" } }, required: ["repo"] }, method: "POST", path: "/repos/{repo}/issues", body: "arguments" });
    expect(buildRestRequest({ baseUrl: "https://api.example.com" }, post, { repo: "r", title: "t", labels: ["bug"] }, secrets)).toMatchObject({ url: "https://api.example.com/repos/r/issues", body: JSON.stringify({ title: "t", labels: ["bug"] }), headers: { "content-type": "application/json" } });
    expect(refused(() => buildRestRequest(target, tool, { owner: "a", repo: "r", number: 1 }, () => undefined))).toBe("internal_error");
  });

  it("refuses templates whose placeholders are not whole segments or not declared arguments, at load", () => {
    const schema = { type: "object", properties: { name: { type: "string" }, q: { type: "string" } }, required: ["name"] };
    const issues = (t: object) => {
      const r = restToolSchema.safeParse({ name: "x", inputSchema: schema, method: "GET", ...t });
      return r.success ? [] : r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
    };
    expect(issues({ path: "/files/{name}" })).toEqual([]);
    expect(issues({ path: "/files/{name}.json" })).toHaveLength(1);
    expect(issues({ path: "/files/{other}" })).toEqual(["path: {other} is not a property of the inputSchema"]);
    expect(issues({ path: "/files/{q}" })).toEqual(["path: {q} fills a path segment: list it in the inputSchema's required"]);
    expect(issues({ query: { q: "{other}" } })).toEqual(["query.q: {other} is not a property of the inputSchema"]);
    expect(issues({ query: { q: "a{q}" } })).toEqual(["query.q: a literal, or exactly one {arg} placeholder"]);
    expect(issues({ body: "arguments" })).toEqual(["body: a GET request has no body"]);
  });

  it("trims a JSON answer to the configured fields", () => {
    expect(trimResponse({ title: "t", body: "long", user: { login: "u", id: 1 }, extra: [1] }, ["title", "user.login", "missing.x"])).toEqual({ title: "t", user: { login: "u" } });
    expect(trimResponse({ a: 1 }, [])).toEqual({ a: 1 });
    expect(trimResponse([{ title: "a", x: 1 }, { title: "b" }], ["title"])).toEqual([{ title: "a" }, { title: "b" }]);
    // Only the answer's own data is read and written: no prototype is reached through a field name.
    const trimmed = trimResponse(JSON.parse('{"__proto__":{"polluted":1},"a":1}'), ["__proto__.polluted", "constructor.name"]) as Record<string, unknown>;
    expect(JSON.stringify(trimmed)).toBe('{"__proto__":{"polluted":1}}');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});
