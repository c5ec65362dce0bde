import { describe, expect, it } from "vitest";
import { namespacedName, splitNamespaced } from "../../../src/mcp/tool-names.ts";

describe("namespaced tool names", () => {
  it("round-trips every (server, name) pair, dots in names included", () => {
    for (const [server, name] of [
      ["github", "search"],
      ["github", "repo.search"],
      ["a", "b.c.d"],
      ["fs-2", "read_file"],
      ["x", "."],
    ] as const) {
      const full = namespacedName(server, name)!;
      expect(full).toBe(`${server}.${name}`);
      expect(splitNamespaced(full)).toEqual({ server, name });
    }
  });

  it("never gives two pairs one name, even when names are built to collide", () => {
    // LiteLLM's `server_tool` prefixing sent `a_b` + `c` and `a` + `b_c` to one name.
    const pairs = [
      ["a", "b.c"],
      ["a-b", "c"],
      ["ab", "c"],
      ["a", "bc"],
      ["github", "github.search"],
      ["github-github", "search"],
    ] as const;
    const names = pairs.map(([s, n]) => namespacedName(s, n));
    expect(new Set(names).size).toBe(pairs.length);
    for (const [i, [s, n]] of pairs.entries()) expect(splitNamespaced(names[i]!)).toEqual({ server: s, name: n });
  });

  it("refuses server names with a dot or upper case, and names past the spec's 128 characters", () => {
    expect(namespacedName("git.hub", "x")).toBeUndefined();
    expect(namespacedName("GitHub", "x")).toBeUndefined();
    expect(namespacedName("-gh", "x")).toBeUndefined();
    expect(namespacedName("gh", "x".repeat(125))).toBe(`gh.${"x".repeat(125)}`);
    expect(namespacedName("gh", "x".repeat(126))).toBeUndefined();
    expect(namespacedName("gh", "has space")).toBeUndefined();
  });

  it("does not read a name without a configured-server shape as namespaced", () => {
    for (const bad of ["search", ".search", "github.", "Git.search", "a_b.c", "../x"]) expect(splitNamespaced(bad), bad).toBeUndefined();
  });
});
