import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { exportedFamilies } from "./support/exported-metrics.ts";
import { tableCells } from "./support/markdown-table.ts";

const DOC = "docs/observability.md";
const HEADER = ["metric (Prometheus name)", "type", "labels", "what"];

/** The metrics table's rows: every family name a row's first cell names (one row may name several), with the row's type and labels cell. */
function documented(markdown: string): Map<string, { type: string; labels: string }> {
  const lines = markdown.split("\n");
  const start = lines.findIndex((l) => l.trim().startsWith("|") && JSON.stringify(tableCells(l)) === JSON.stringify(HEADER));
  if (start < 0) throw new Error(`${DOC} has no table headed | ${HEADER.join(" | ")} |`);
  const out = new Map<string, { type: string; labels: string }>();
  for (const line of lines.slice(start + 2)) {
    if (!line.trim().startsWith("|")) break;
    const [names = "", type = "", labels = ""] = tableCells(line);
    for (const [, name] of names.matchAll(/`([a-z_:][a-z0-9_:]*)`/g)) out.set(name!, { type, labels });
  }
  return out;
}

const doc = documented(readFileSync(resolve(import.meta.dirname, "..", "..", DOC), "utf8"));
const exported = exportedFamilies();

describe(`${DOC} lists every exported series`, () => {
  it("every family the registry exports is a row of the table", () => {
    expect([...exported.keys()].filter((n) => !doc.has(n))).toEqual([]);
  });

  it("every row of the table is a family the registry exports", () => {
    expect([...doc.keys()].filter((n) => !exported.has(n))).toEqual([]);
  });

  it("each row says the family's type and names each of its labels", () => {
    for (const [name, family] of exported) {
      const row = doc.get(name)!;
      expect(row.type.split(" ")[0], name).toBe(family.type);
      const labels = new Set([...family.samples.values()].flatMap((s) => [...s]).filter((l) => l !== "le"));
      for (const label of labels) expect(row.labels, `${name} ${label}`).toContain(`\`${label}\``);
    }
  });

  it("a counter's family ends in _total, and the tenant label is gone while tenantLabel is off", () => {
    for (const [name, family] of exported) if (family.type === "counter") expect(name).toMatch(/_total$/);
    const off = exportedFamilies(false);
    for (const family of off.values()) for (const labels of family.samples.values()) expect(labels.has("sluice_tenant")).toBe(false);
    expect(exported.get("sluice_requests_total")!.samples.get("sluice_requests_total")!.has("sluice_tenant")).toBe(true);
  });
});
