/**
 * docs/protocols/bedrock-converse.md's capability table agrees with the codec: every request
 * feature is named on exactly one row, and that row says "no" exactly when the codec does not
 * carry it.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { bedrockConverseCodec } from "../../src/protocol/bedrock-converse/index.ts";
import { REQUEST_FEATURES } from "../../src/protocol/features.ts";

describe("docs/protocols/bedrock-converse.md", () => {
  it("names each request feature on one capability row, a 'no' row exactly when the codec does not carry it", () => {
    const doc = readFileSync(new URL("../../docs/protocols/bedrock-converse.md", import.meta.url), "utf8");
    const table = doc.slice(doc.indexOf("| | carried | how |"));
    const rows = table
      .slice(0, table.indexOf("\n\n"))
      .split("\n")
      .filter((l) => l.startsWith("|") && !l.startsWith("|---"))
      .slice(1)
      .map((l) => l.split("|").map((c) => c.trim()));
    expect(rows.length).toBeGreaterThan(5);
    for (const f of REQUEST_FEATURES) {
      const naming = rows.filter((r) => [...r[1]!.matchAll(/`([a-z0-9_]+)`/g)].some((m) => m[1] === f));
      expect(naming, `${f} is named on one row`).toHaveLength(1);
      expect(naming[0]![2] === "no", `${f}: the row says ${naming[0]![2]}`).toBe(!bedrockConverseCodec.carries.has(f));
    }
  });
});
