import { describe, expect, it } from "vitest";
import { policySchema, ToolPolicy } from "../../../src/mcp/tool-policy.ts";
import { mergeCatalog, namespacedUri, renameContents, routeCatalogRead, splitNamespacedUri } from "../../../src/mcp/virtual-catalog.ts";
import { refusalCode } from "../support/refusal.ts";

const policy = new ToolPolicy(
  policySchema.parse({
    revision: "p-1",
    rules: [
      { id: "prompts", effect: "allow", servers: ["*"], kind: "prompt", names: ["*"] },
      { id: "docs", effect: "allow", servers: ["*"], kind: "resource", names: ["file:///*"] },
      { id: "no-env", effect: "deny", servers: ["*"], kind: "resource", names: ["file:///etc/*"] },
    ],
  }),
);
const caller = { tenant: "acme", key: "k1" };

describe("prompts and resources on the virtual server", () => {
  it("names resources <server>+<uri>, split at the first +, whatever the URI holds", () => {
    expect(namespacedUri("docs", "git+ssh://x/a+b")).toBe("docs+git+ssh://x/a+b");
    expect(splitNamespacedUri("docs+git+ssh://x/a+b")).toEqual({ server: "docs", uri: "git+ssh://x/a+b" });
    expect(splitNamespacedUri("file:///a+b")).toBeUndefined();
    expect(splitNamespacedUri("+x")).toBeUndefined();
    expect(splitNamespacedUri("docs+")).toBeUndefined();
  });

  it("merges each server's items under its name, filtered on the server's own names, and reports a failed server", () => {
    const merged = mergeCatalog(
      "resources/list",
      [
        { server: "a", ok: true, items: [{ uri: "file:///readme", name: "readme" }, { uri: "file:///etc/passwd", name: "pw" }, { uri: "http://x", name: "web" }] },
        { server: "b", ok: true, items: [{ uri: "file:///readme", name: "readme" }] },
        { server: "c", ok: false, reason: "upstream_unreachable" },
      ],
      () => "open",
      caller,
      policy,
      true,
    );
    // Two servers' same URI stay two items.
    expect(merged.items).toEqual([
      { uri: "a+file:///readme", name: "readme" },
      { uri: "b+file:///readme", name: "readme" },
    ]);
    expect(merged.partial).toEqual([{ server: "c", reason: "upstream_unreachable" }]);
    expect(mergeCatalog("prompts/list", [{ server: "a", ok: true, items: [{ name: "greet" }] }], () => "open", caller, policy, true).items).toEqual([{ name: "a.greet" }]);
    expect(mergeCatalog("resources/templates/list", [{ server: "a", ok: true, items: [{ uriTemplate: "file:///{path}" }] }], () => "open", caller, policy, false).items).toEqual([{ uriTemplate: "file:///{path}" }]);
    expect(refusalCode(() => mergeCatalog("prompts/list", [{ server: "c", ok: false, reason: "x" }], () => "closed", caller, policy, true))).toBe("upstream_error");
  });

  it("routes a read only to the server its name names, and renames the contents back", () => {
    const servers = new Set(["a", "b"]);
    expect(routeCatalogRead("resources/read", "b+file:///readme", servers)).toEqual({ server: "b", name: "file:///readme" });
    expect(routeCatalogRead("prompts/get", "a.greet.formal", servers)).toEqual({ server: "a", name: "greet.formal" });
    expect(refusalCode(() => routeCatalogRead("resources/read", "z+file:///readme", servers))).toBe("invalid_request");
    expect(refusalCode(() => routeCatalogRead("prompts/get", "greet", servers))).toBe("invalid_request");
    expect(renameContents("b", { contents: [{ uri: "file:///readme", text: "x" }] })).toEqual({ contents: [{ uri: "b+file:///readme", text: "x" }] });
  });
});
