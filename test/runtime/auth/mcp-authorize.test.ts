import { describe, expect, it } from "vitest";
import { routeToolCall } from "../../../src/auth/mcp-authorize.ts";
import type { GatewayError } from "../../../src/errors/gateway-error.ts";
import { readOnlyPolicy as policy } from "../mcp/policy-fixtures.ts";

const caller = { tenant: "acme", key: "k1" };

describe("the authorize phase of an MCP tool call on the virtual server", () => {
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
