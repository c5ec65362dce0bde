import { policySchema, ToolPolicy } from "../../../src/mcp/tool-policy.ts";

/** A policy that allows every tool but deletions anywhere and `shell` on `ops` (virtual-server naming and routing tests). */
export const readOnlyPolicy = new ToolPolicy(
  policySchema.parse({
    revision: "p-1",
    rules: [
      { id: "all-read", effect: "allow", servers: ["*"], names: ["*"] },
      { id: "no-delete", effect: "deny", servers: ["*"], names: ["delete_*"] },
      { id: "no-shell", effect: "deny", servers: ["ops"], names: ["shell"] },
    ],
  }),
);
