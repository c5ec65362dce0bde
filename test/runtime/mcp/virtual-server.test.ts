import { describe, expect, it } from "vitest";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import { readOnlyPolicy as policy } from "./policy-fixtures.ts";
import { mergeToolLists, type ServerListing } from "../../../src/mcp/virtual-server.ts";

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
});
