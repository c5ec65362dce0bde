/**
 * docs/protocols/gemini.md's capability table agrees with the codec: every request feature has a
 * row, and a row says "carried" exactly when the codec carries the feature.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { REQUEST_FEATURES } from "../../src/protocol/features.ts";
import { geminiCodec } from "../../src/protocol/gemini/index.ts";

describe("docs/protocols/gemini.md", () => {
  it("has a capability row per request feature, carried exactly when the codec carries it", () => {
    const doc = readFileSync(new URL("../../docs/protocols/gemini.md", import.meta.url), "utf8");
    const rows = new Map<string, string>();
    for (const m of doc.matchAll(/^\| `([a-z0-9_]+)` \| (carried|refused) \|/gm)) rows.set(m[1]!, m[2]!);
    expect([...rows.keys()].sort()).toEqual([...REQUEST_FEATURES].sort());
    for (const f of REQUEST_FEATURES) expect(rows.get(f), f).toBe(geminiCodec.carries.has(f) ? "carried" : "refused");
  });
});
