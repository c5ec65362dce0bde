/**
 * Every backend an operator is shown how to write (the README's and docs/configuration.md's
 * `backends:` examples) is one the loader takes: schema, transport and credential checks, and
 * the egress guard's default policy (the examples name real providers' public addresses).
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { BACKEND_PROTOCOL_IDS } from "../../src/protocol/codec.ts";
import { builtinCodecs } from "../../src/protocol/registry.ts";
import { normalizeSnapshot } from "../../src/snapshot/normalize.ts";

const FILES = ["README.md", "docs/configuration.md"];

/** The YAML blocks of a markdown file whose top level is a list of `backends`. */
function backendExamples(file: string): { file: string; at: number; source: Record<string, unknown> }[] {
  const text = readFileSync(new URL(`../../${file}`, import.meta.url), "utf8");
  const out: { file: string; at: number; source: Record<string, unknown> }[] = [];
  for (const m of text.matchAll(/^```yaml\n([\s\S]*?)^```/gm)) {
    let doc: unknown;
    try {
      doc = parse(m[1]!);
    } catch {
      continue; // a fragment (a key shown on its own), not a file
    }
    if (typeof doc === "object" && doc !== null && Array.isArray((doc as { backends?: unknown }).backends)) {
      out.push({ file, at: text.slice(0, m.index).split("\n").length, source: doc as Record<string, unknown> });
    }
  }
  return out;
}

const examples = FILES.flatMap(backendExamples);

describe("backend examples in the docs", () => {
  it("show every HTTP provider protocol at least once", () => {
    const shown = new Set(examples.flatMap((e) => (e.source.backends as { protocol?: string }[]).map((b) => b.protocol)));
    for (const p of ["azure-openai", "bedrock-converse", "gemini"] as const) {
      expect(BACKEND_PROTOCOL_IDS).toContain(p);
      expect(shown, `an example backend speaks ${p}`).toContain(p);
    }
  });

  it.each(examples.map((e) => ({ name: `${e.file}:${e.at}`, e })))("$name is taken by the loader", async ({ e }) => {
    const backends = e.source.backends as { name: string }[];
    // Sections that show only backends get a pool so the snapshot is whole.
    const pools = e.source.pools ?? [{ name: "example", members: [{ backend: backends[0]!.name, model: "m" }] }];
    const result = await normalizeSnapshot(
      { version: 1, backends, pools },
      { supportedProtocols: new Set(BACKEND_PROTOCOL_IDS), logprobsProtocols: builtinCodecs.logprobsIds(), requirements: [], egress: { allow: [] } },
    );
    expect(result.ok ? [] : result.reasons).toEqual([]);
  });
});
