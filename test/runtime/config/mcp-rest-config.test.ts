import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config/load-config.ts";
import { issuesOf } from "../support/config-issues.ts";
import { bundled, textsWith } from "../support/fixtures.ts";


const tool = { name: "get_issue", inputSchema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] }, method: "GET", path: "/issues/{n}" };

/** The bundled gateway.yaml with these MCP servers. */
const withServers = (servers: unknown[]) => {
  const g = bundled("gateway");
  g.mcp = { servers };
  return textsWith({ gateway: g });
};

describe("REST servers in gateway.yaml", () => {
  it("loads a server built from an HTTP API beside MCP servers", () => {
    const c = loadConfig(withServers([{ name: "docs", url: "https://mcp.example.com/mcp", era: "stateless" }, { name: "issues", url: "https://api.example.com/v1", credential: { secret: "ISSUES_TOKEN", scheme: "bearer" }, rest: { tools: [tool] } }]));
    const [mcp, rest] = c.gateway.mcp.servers;
    expect(mcp).toMatchObject({ name: "docs", era: "stateless", rest: undefined });
    expect(rest).toMatchObject({ name: "issues", era: undefined, url: "https://api.example.com/v1", rest: { tools: [{ name: "get_issue", method: "GET", query: {}, body: "none", response: { fields: [], maxBytes: 262144 } }] } });
  });

  it("needs exactly one of era and rest", () => {
    for (const s of [{ name: "x", url: "https://a.example.com" }, { name: "x", url: "https://a.example.com", era: "stateless", rest: { tools: [tool] } }]) {
      expect(issuesOf(() => loadConfig(withServers([s]))).map((i) => `${i.path}: ${i.message}`)).toEqual(["mcp.servers[0].era: an MCP server has an era (stateful or stateless); a server built from an HTTP API has rest instead"]);
    }
  });

  it("puts the API's base URL through the egress guard", () => {
    const issues = issuesOf(() => loadConfig(withServers([{ name: "issues", url: "http://10.1.2.3/api", rest: { tools: [tool] } }])));
    expect(issues).toContainEqual(expect.objectContaining({ file: "gateway.yaml", path: "mcp.servers[0].url" }));
  });

  it("refuses a schema keyword it would not check, and duplicate tools, with the path", () => {
    const loose = { ...tool, inputSchema: { type: "object", properties: { n: { type: "integer" }, q: { anyOf: [{ type: "string" }] } }, required: ["n"] } };
    const at = (tools: unknown[]) => issuesOf(() => loadConfig(withServers([{ name: "issues", url: "https://api.example.com", rest: { tools } }]))).map((i) => i.path);
    expect(at([loose])).toEqual(["mcp.servers[0].rest.tools[0].inputSchema.properties.q"]);
    expect(at([tool, tool])).toEqual(["mcp.servers[0].rest.tools[1].name"]);
  });
});
