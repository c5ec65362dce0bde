import { describe, expect, it } from "vitest";
import { policySchema, ToolPolicy } from "../../../src/mcp/tool-policy.ts";

const policy = new ToolPolicy(
  policySchema.parse({
    revision: "p-7",
    rules: [
      { id: "analysts-read", effect: "allow", principals: { tenants: ["acme"] }, servers: ["github"], names: ["search_*", "get_issue"] },
      {
        id: "analysts-files",
        effect: "allow",
        principals: { tenants: ["acme"], keys: ["analyst-*"] },
        servers: ["fs"],
        names: ["read_file"],
        arguments: { path: { pathPrefix: "/srv/docs/", maxLength: 200 }, limit: { type: "number", max: 50 } },
      },
      { id: "no-secrets", effect: "deny", servers: ["*"], names: ["read_file"], arguments: { path: { pattern: ".*\\.env" } } },
      { id: "never-delete", effect: "deny", servers: ["*"], names: ["delete_*"] },
      { id: "admins", effect: "allow", principals: { keys: ["admin"] }, servers: ["*"], names: ["*"] },
    ],
  }),
);
const q = (over: Partial<Parameters<ToolPolicy["decide"]>[0]> = {}) => ({ tenant: "acme", key: "analyst-1", server: "github", kind: "tool" as const, name: "search_code", ...over });

describe("MCP tool policy", () => {
  it("denies by default, naming no rule", () => {
    const d = policy.decide(q({ tenant: "other", key: "k" }), {});
    expect(d).toEqual({ allowed: false, rule: undefined, policyRevision: "p-7", reason: "no rule allows it (deny by default)" });
    expect(policy.visible(q({ server: "jira" })).allowed).toBe(false);
  });

  it("allows by principal, server and name glob, and names the rule and revision", () => {
    expect(policy.decide(q(), { query: "x" })).toEqual({ allowed: true, rule: "analysts-read", policyRevision: "p-7", reason: "allowed by rule analysts-read" });
    expect(policy.decide(q({ name: "search" }), {}).allowed).toBe(false);
    expect(policy.decide(q({ kind: "prompt" }), {}).allowed).toBe(false);
  });

  it("checks argument constraints on the parsed arguments, naming the argument but not its value", () => {
    const files = q({ server: "fs", name: "read_file" });
    expect(policy.decide(files, { path: "/srv/docs/a.md", limit: 10 }).allowed).toBe(true);
    const outside = policy.decide(files, { path: "/etc/passwd" });
    expect(outside).toMatchObject({ allowed: false, rule: undefined });
    expect(outside.reason).toBe("no rule allows these arguments (rule analysts-files: argument path is not under the allowed path)");
    expect(outside.reason).not.toContain("passwd");
    expect(policy.decide(files, { path: "/srv/docs/a.md", limit: 500 }).reason).toContain("argument limit is above 50");
    expect(policy.decide(files, { path: "/srv/docs/a.md", limit: "5" }).reason).toContain("argument limit must be a number");
    expect(policy.decide(files, {}).reason).toContain("argument path is missing");
    expect(policy.decide(q({ server: "fs", name: "read_file", key: "viewer" }), { path: "/srv/docs/a.md" }).allowed).toBe(false);
  });

  it("refuses path traversal in every spelling a later decoder could undo", () => {
    const files = q({ server: "fs", name: "read_file" });
    for (const path of ["/srv/docs/../secrets", "/srv/docs/./../x", "/srv/docs/%2e%2e/x", "/srv/docs/..%2fx", "/srv/docs\\..\\x", "/srv/docs//x", "/srv/docs/x\0"]) {
      expect(policy.decide(files, { path }).allowed, path).toBe(false);
    }
  });

  it("a deny rule wins over any allow, and one with constraints denies only matching calls", () => {
    const admin = q({ key: "admin", server: "fs", name: "read_file" });
    expect(policy.decide(admin, { path: "/srv/app/.env" })).toMatchObject({ allowed: false, rule: "no-secrets" });
    expect(policy.decide(admin, { path: "/srv/app/main.ts" })).toMatchObject({ allowed: true, rule: "admins" });
    expect(policy.decide(q({ key: "admin", name: "delete_repo" }), {})).toMatchObject({ allowed: false, rule: "never-delete" });
  });

  it("lists what some call could be allowed for, hiding hard-denied and unallowed items", () => {
    expect(policy.visible(q())).toMatchObject({ allowed: true, rule: "analysts-read" });
    // Visible although only some arguments pass: each call is decided again.
    expect(policy.visible(q({ server: "fs", name: "read_file" })).allowed).toBe(true);
    expect(policy.visible(q({ key: "admin", name: "delete_repo" }))).toMatchObject({ allowed: false, rule: "never-delete" });
    expect(policy.visible(q({ name: "create_issue" })).allowed).toBe(false);
  });

  it("refuses malformed rules at load, naming the field", () => {
    const bad = policySchema.safeParse({ revision: "r", rules: [{ id: "Bad Id", effect: "maybe", servers: ["Git.Hub"], names: [], arguments: { x: { pattern: "(" } } }] });
    expect(bad.success).toBe(false);
    const paths = bad.error!.issues.map((i) => i.path.join("."));
    expect(paths).toEqual(expect.arrayContaining(["rules.0.id", "rules.0.effect", "rules.0.servers.0", "rules.0.names", "rules.0.arguments.x.pattern"]));
  });
});

describe("approval: required", () => {
  it("marks the decision of the rule that requires it, narrowed by argument constraints", () => {
    const policy = new ToolPolicy(
      policySchema.parse({
        revision: "r7",
        rules: [
          { id: "big-deletes", effect: "allow", servers: ["files"], names: ["delete"], arguments: { count: { min: 100 } }, approval: "required" },
          { id: "small-deletes", effect: "allow", servers: ["files"], names: ["delete"] },
        ],
      }),
    );
    const q = { tenant: "acme", key: "k", server: "files", kind: "tool" as const, name: "delete" };
    expect(policy.decide(q, { count: 500 })).toMatchObject({ allowed: true, rule: "big-deletes", approval: "required", policyRevision: "r7" });
    expect(policy.decide(q, { count: 5 })).toMatchObject({ allowed: true, rule: "small-deletes" });
    expect(policy.decide(q, { count: 5 }).approval).toBeUndefined();
  });

  it("says before the arguments whether some call of a tool may need approval (a task-capable tool in tools/list)", () => {
    const policy = new ToolPolicy(
      policySchema.parse({
        revision: "r8",
        rules: [
          { id: "never-wipe", effect: "deny", servers: ["files"], names: ["wipe"] },
          { id: "plain-reads", effect: "allow", servers: ["files"], names: ["read"] },
          { id: "big-deletes", effect: "allow", servers: ["files"], names: ["delete"], arguments: { count: { min: 100 } }, approval: "required" },
          { id: "everything", effect: "allow", servers: ["files"], names: ["*"], approval: "required" },
        ],
      }),
    );
    const q = (name: string, key = "k") => ({ tenant: "acme", key, server: "files", kind: "tool" as const, name });
    expect(policy.mayNeedApproval(q("delete"))).toBe(true);
    expect(policy.mayNeedApproval(q("deploy"))).toBe(true);
    // An earlier rule admitting every call without approval wins; a hard deny hides it; no rule, no approval.
    expect(policy.mayNeedApproval(q("read"))).toBe(false);
    expect(policy.mayNeedApproval(q("wipe"))).toBe(false);
    expect(policy.mayNeedApproval({ ...q("delete"), server: "other" })).toBe(false);
  });

  it("is refused on a deny rule", () => {
    expect(policySchema.safeParse({ revision: "r", rules: [{ id: "d", effect: "deny", servers: ["*"], names: ["*"], approval: "required" }] }).success).toBe(false);
  });
});
