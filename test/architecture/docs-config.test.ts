import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { tableCells } from "./support/markdown-table.ts";
import { snapshotSourceSchema } from "../../src/config/backends-schema.ts";
import { scopeLimitsSchema } from "../../src/config/budget-schema.ts";
import { gatewayConfigSchema } from "../../src/config/gateway-schema.ts";
import { publicationSchema } from "../../src/config/publication-schema.ts";
import { conditionSchema } from "../../src/config/decision-schema.ts";
import { DEFAULT_BREAKER_CONFIG } from "../../src/traffic/breaker.ts";

const DOC = "docs/configuration.md";
const HEADER = ["key", "default", "bounds", "meaning"];

// ---------------------------------------------------------------------------------------------
// What the schemas accept: one entry per key a user can write, as a dotted path (`a.b`, `a[].b`).

/** What a reference row must agree with for one accepted key. */
interface KeyFacts {
  readonly required: boolean;
  /** The schema's default, as a user would write it; absent when the schema has none. */
  readonly default?: { readonly value: unknown };
  /** Numeric bounds, rendered; only for numbers. */
  readonly bounds?: string;
  /** Every value an enum or literal accepts. */
  readonly values?: readonly string[];
}

interface ZodDef {
  readonly type: string;
  readonly [field: string]: unknown;
}
const defOf = (schema: unknown): ZodDef => (schema as { _zod: { def: ZodDef } })._zod.def;

/** Wrappers around the schema that does the work; those marked here make a key optional. */
const WRAPPERS: Readonly<Record<string, { optional: boolean }>> = {
  optional: { optional: true },
  default: { optional: true },
  prefault: { optional: true },
  catch: { optional: true },
  nullable: { optional: false },
  readonly: { optional: false },
  nonoptional: { optional: false },
};
/** Types with no keys below them. A type in neither list fails the test, so nothing is skipped silently. */
const LEAVES = new Set(["string", "number", "boolean", "literal", "enum", "record", "union"]);

/** Peels wrappers and pipes (a transform's input side is what a user writes). */
function unwrap(schema: unknown): { core: unknown; required: boolean; default?: { value: unknown } } {
  let s = schema;
  let required = true;
  let dflt: { value: unknown } | undefined;
  for (;;) {
    const def = defOf(s);
    if (def.type === "pipe") {
      s = def.in;
      continue;
    }
    const wrapper = WRAPPERS[def.type];
    if (wrapper === undefined) return dflt === undefined ? { core: s, required } : { core: s, required, default: dflt };
    if (wrapper.optional) required = false;
    // The outermost default is the one a missing key gets.
    if ((def.type === "default" || def.type === "prefault") && dflt === undefined) dflt = { value: def.defaultValue };
    s = def.innerType;
  }
}

/** `≥ 1`, `1–10`, `> 0, ≤ 1`: the checks zod will enforce, as the docs write them. */
function numericBounds(checks: readonly unknown[] = []): string {
  let low = "";
  let high = "";
  for (const check of checks) {
    const c = defOf(check) as unknown as { check: string; value: number; inclusive: boolean };
    if (c.check === "greater_than") low = `${c.inclusive ? "≥" : ">"} ${c.value}`;
    if (c.check === "less_than") high = `${c.inclusive ? "≤" : "<"} ${c.value}`;
  }
  if (low.startsWith("≥") && high.startsWith("≤")) return `${low.slice(2)}–${high.slice(2)}`;
  return [low, high].filter((b) => b !== "").join(", ") || "—";
}

function leaf(core: unknown, required: boolean, dflt: { value: unknown } | undefined): KeyFacts {
  const def = defOf(core);
  return {
    required,
    ...(dflt === undefined ? {} : { default: dflt }),
    ...(def.type === "number" ? { bounds: numericBounds(def.checks as unknown[] | undefined) } : {}),
    ...(def.type === "enum" ? { values: Object.values(def.entries as Record<string, string>) } : {}),
    ...(def.type === "literal" ? { values: (def.values as unknown[]).map(String) } : {}),
  };
}

/**
 * Every key a schema accepts. An array of objects adds `[]` and goes on into the objects; a list of
 * values is one key. Schemas in `blocks` are documented once in a table of their own: where one
 * is used, its key is a leaf.
 */
function acceptedKeys(schema: unknown, blocks: ReadonlySet<unknown> = new Set()): Map<string, KeyFacts> {
  const out = new Map<string, KeyFacts>();
  const walk = (s: unknown, path: string): void => {
    const { core, required, default: dflt } = unwrap(s);
    const def = defOf(core);
    if (path !== "" && blocks.has(core)) {
      out.set(path, { required, ...(dflt === undefined ? {} : { default: dflt }) });
      return;
    }
    if (def.type === "object") {
      for (const [key, child] of Object.entries(def.shape as Record<string, unknown>)) walk(child, path === "" ? key : `${path}.${key}`);
      return;
    }
    if (def.type === "array") {
      const element = unwrap(def.element).core;
      if (defOf(element).type === "object" || blocks.has(element)) {
        walk(def.element, `${path}[]`);
        return;
      }
      // A list of values: its row speaks for the list, and its element's values count.
      const el = leaf(element, true, undefined);
      out.set(path, { required, ...(dflt === undefined ? {} : { default: dflt }), ...(el.values ? { values: el.values } : {}) });
      return;
    }
    if (def.type === "union" && (def.options as unknown[]).every((o) => defOf(unwrap(o).core).type === "object")) {
      // A union of objects (a backend's credential: a key, or an application): the keys of every
      // shape, each required only when every shape requires it (as an object's keys, whatever the
      // union's own optionality).
      const shapes = (def.options as unknown[]).map((o) => acceptedKeys(o, blocks));
      for (const name of new Set(shapes.flatMap((m) => [...m.keys()]))) {
        const facts = shapes.flatMap((m) => (m.has(name) ? [m.get(name)!] : []));
        const merged = { ...facts[0]!, ...facts.find((f) => f.default !== undefined) };
        out.set(`${path}.${name}`, { ...merged, required: facts.length === shapes.length && facts.every((f) => f.required) });
      }
      return;
    }
    if (!LEAVES.has(def.type)) throw new Error(`${path}: no rule for a zod ${def.type}; teach acceptedKeys() about it`);
    out.set(path, leaf(core, required, dflt));
  };
  walk(schema, "");
  return out;
}

/**
 * Defaults applied outside the schemas: an unset breaker field takes the breaker's own default
 * (src/traffic/breaker.ts), and the docs show that figure.
 */
const APPLIED_DEFAULTS: ReadonlyMap<string, unknown> = new Map(
  Object.keys(defOf(unwrap(gatewayConfigSchema.shape.breaker).core).shape as object)
    .filter((k) => k in DEFAULT_BREAKER_CONFIG)
    .map((k) => [`breaker.${k}`, DEFAULT_BREAKER_CONFIG[k as keyof typeof DEFAULT_BREAKER_CONFIG]]),
);

/** A default as a user writes it in YAML: `4096`, `true`, `[chat]`, `{}`, `10m`, `""`. */
function render(value: unknown): string {
  if (value === "") return '""';
  if (Array.isArray(value)) return `[${value.map(render).join(", ")}]`;
  if (typeof value === "object" && value !== null) return Object.keys(value).length === 0 ? "{}" : JSON.stringify(value);
  return String(value);
}

// ---------------------------------------------------------------------------------------------
// What the docs say: reference tables (first header cell `key`) under the heading they belong to.

interface Row {
  readonly heading: string;
  readonly key: string;
  readonly cells: readonly string[];
}

const cells = tableCells;

function referenceTables(markdown: string): { headers: { heading: string; header: string[] }[]; rows: Row[] } {
  const headers: { heading: string; header: string[] }[] = [];
  const rows: Row[] = [];
  let heading = "";
  let inKeyTable = false;
  let previousWasTable = false;
  for (const line of markdown.split("\n")) {
    const h = /^#{1,6}\s+(.*)$/.exec(line);
    if (h) heading = h[1]!.trim();
    const isTable = line.trim().startsWith("|");
    if (isTable && !previousWasTable) {
      const header = cells(line);
      inKeyTable = header[0] === "key";
      if (inKeyTable) headers.push({ heading, header });
    } else if (isTable && inKeyTable && !/^\|[\s|:-]+\|$/.test(line.trim())) {
      const c = cells(line);
      rows.push({ heading, key: c[0] ?? "", cells: c });
    }
    previousWasTable = isTable;
  }
  return { headers, rows };
}

/** Which schema each section's tables describe; a section is found by how its heading starts. */
const SECTIONS = [
  { heading: "gateway.yaml", keys: acceptedKeys(gatewayConfigSchema) },
  // A decision's condition is a recursive grammar, documented in docs/routing.md: here it is one key.
  { heading: "publication.yaml", keys: acceptedKeys(publicationSchema, new Set([scopeLimitsSchema, conditionSchema])) },
  { heading: "Limits", keys: acceptedKeys(scopeLimitsSchema) },
  { heading: "backends.yaml", keys: acceptedKeys(snapshotSourceSchema) },
] as const;

const doc = referenceTables(readFileSync(resolve(import.meta.dirname, "..", "..", DOC), "utf8"));
const sectionOf = (heading: string) => SECTIONS.find((s) => heading.startsWith(s.heading));
const unquote = (cell: string) => /^`([^`]+)`$/.exec(cell)?.[1];

describe(`${DOC}: the reference tables`, () => {
  it("keeps every reference table in a known section and in one format", () => {
    for (const { heading, header } of doc.headers) {
      expect(sectionOf(heading), `a key table under "${heading}"`).toBeDefined();
      expect(header, `the header of the table under "${heading}"`).toEqual(HEADER);
    }
    for (const row of doc.rows) {
      expect(row.cells, `row ${row.key}`).toHaveLength(HEADER.length);
      expect(unquote(row.key), `row ${row.key}: one key path in backticks`).toMatch(/^[A-Za-z][A-Za-z0-9]*(\[\])?(\.[A-Za-z][A-Za-z0-9]*(\[\])?)*$/);
    }
  });

  describe.each(SECTIONS)("$heading", ({ heading, keys }) => {
    const rows = doc.rows.filter((r) => sectionOf(r.heading)?.heading === heading);
    const documented = new Map(rows.map((r) => [unquote(r.key) ?? r.key, r]));

    it("documents each key once", () => {
      const names = rows.map((r) => unquote(r.key) ?? r.key);
      expect(names.filter((n, i) => names.indexOf(n) !== i)).toEqual([]);
    });

    it("documents every key the schema accepts", () => {
      expect([...keys.keys()].filter((k) => !documented.has(k))).toEqual([]);
    });

    it("documents no key the schema refuses", () => {
      expect([...documented.keys()].filter((k) => !keys.has(k))).toEqual([]);
    });

    it("shows whether a key is required, and its default, as the schema has them", () => {
      for (const [key, facts] of keys) {
        const cell = documented.get(key)?.cells[1];
        if (cell === undefined) continue;
        const dflt = facts.default ?? (APPLIED_DEFAULTS.has(key) ? { value: APPLIED_DEFAULTS.get(key) } : undefined);
        expect(cell === "required", `${key}: "required" in the default column`).toBe(facts.required);
        if (dflt !== undefined) expect(cell, `${key}: default column`).toBe(`\`${render(dflt.value)}\``);
        // An optional key without a default says in words what its absence means: no value in backticks.
        else if (!facts.required) expect(cell, `${key}: default column`).toMatch(/^[^`]+$/);
      }
    });

    it("shows the numeric bounds the schema enforces", () => {
      for (const [key, facts] of keys) {
        const cell = documented.get(key)?.cells[2];
        if (cell !== undefined && facts.bounds !== undefined) expect(cell, `${key}: bounds column`).toBe(facts.bounds);
      }
    });

    it("names every value an enumerated key accepts", () => {
      for (const [key, facts] of keys) {
        const row = documented.get(key);
        if (row === undefined || facts.values === undefined) continue;
        const text = row.cells.slice(1).join(" ");
        expect(facts.values.filter((v) => !text.includes(`\`${v}\``)), `${key}: values not named`).toEqual([]);
      }
    });
  });
});
