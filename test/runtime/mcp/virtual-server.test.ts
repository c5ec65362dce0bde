import { describe, expect, it } from "vitest";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import { policySchema, ToolPolicy } from "../../../src/mcp/tool-policy.ts";
import { mergeToolLists, routeToolCall, type ServerListing } from "../../../src/mcp/virtual-server.ts";

const policy = new ToolPolicy(
  policySchema.parse({
    revision: "p-1",
    rules: [
      { id: "all-read", effect: "allow", servers: ["*"], names: ["*"] },
      { id: "no-delete", effect: "deny", servers: ["*"], names: ["delete_*"] },
      { id: "no-shell", effect: "deny", servers: ["ops"], names: ["shell"] },
    ],
  }),
);
const caller = { tenant: "acme", key: "k1" };

describe("the virtual MCP server", () => {
  it("namespaces every server's tools, hides what the policy denies, and keeps look-alike names apart", () => {
    const listings: ServerListing[] = [
      { server: "github", ok: true, tools: [{ name: "search", description: "Search code" }, { name: "delete_repo" }, { name: "ops.shell" }] },
      { server: "ops", ok: true, tools: [{ name: "shell" }, { name: "status" }] },
    ];
    const merged = mergeToolLists(listings, () => "open", caller, policy);
    expect(merged.tools.map((t) => t.name)).toEqual(["github.search", "github.ops.shell", "ops.status"]);
    expect(merged.tools[0]).toEqual({ name: "github.search", description: "Search code" });
    expect(merged.partial).toEqual([]);
  });

  it("one failing server does not hide the others (fail-open), unless it fails closed", () => {
    const listings: ServerListing[] = [
      { server: "github", ok: true, tools: [{ name: "search" }] },
      { server: "jira", ok: false, reason: "upstream_unreachable" },
    ];
    expect(mergeToolLists(listings, () => "open", caller, policy)).toEqual({ tools: [{ name: "github.search" }], partial: [{ server: "jira", reason: "upstream_unreachable" }], unnamed: [] });
    expect(() => mergeToolLists(listings, (s) => (s === "jira" ? "closed" : "open"), caller, policy)).toThrow(GatewayError);
  });

  it("leaves out, and reports, a tool whose namespaced name would not be a valid tool name", () => {
    const merged = mergeToolLists([{ server: "github", ok: true, tools: [{ name: "x".repeat(127) }, { name: "ok" }] }], () => "open", caller, policy);
    expect(merged.tools.map((t) => t.name)).toEqual(["github.ok"]);
    expect(merged.unnamed).toEqual([{ server: "github", name: "x".repeat(127) }]);
  });

  it("routes a call only to the server its name names, re-authorizing it with its arguments", () => {
    const servers = new Set(["github", "ops"]);
    expect(routeToolCall("github.ops.shell", {}, servers, caller, policy)).toMatchObject({ server: "github", name: "ops.shell", decision: { allowed: true, rule: "all-read" } });
    // The same upstream name on the server that denies it: refused, not routed elsewhere.
    const denied = (() => {
      try {
        routeToolCall("ops.shell", {}, servers, caller, policy);
      } catch (err) {
        return err as GatewayError;
      }
    })();
    expect(denied?.code).toBe("tool_not_allowed");
    expect(denied?.message).toContain("denied by rule no-shell");
    // A denied tool hidden from the list is still refused when called by name.
    expect(() => routeToolCall("github.delete_repo", {}, servers, caller, policy)).toThrow(/denied by rule no-delete/);
    for (const bad of ["search", "jira.search", "GitHub.search", ".search"]) {
      expect(() => routeToolCall(bad, {}, servers, caller, policy), bad).toThrow(/Unknown tool/);
    }
  });
});
