import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "..", "..");

function files(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}

const parse = (text: string, name = "inline.ts") => ts.createSourceFile(name, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);

const parsed = new Map<string, ts.SourceFile>();
/** A repo file's syntax tree, parsed once for all the rules. */
function sourceFile(file: string): ts.SourceFile {
  let tree = parsed.get(file);
  if (tree === undefined) parsed.set(file, (tree = parse(readFileSync(join(ROOT, file), "utf8"), file)));
  return tree;
}

/**
 * Every module specifier a source names, in the order written: static imports (`import type`
 * included), side-effect imports, `export … from` and `export * from`, `import x = require(…)`,
 * dynamic `import(…)` and type-position `import(…)`. Read from the syntax tree, so a specifier in a
 * comment or a string is not an import and a statement's layout does not matter.
 */
function importSpecifiers(source: string | ts.SourceFile): string[] {
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier !== undefined && ts.isStringLiteral(node.moduleSpecifier)) {
      found.push(node.moduleSpecifier.text);
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference) && ts.isStringLiteral(node.moduleReference.expression)) {
      found.push(node.moduleReference.expression.text);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [arg] = node.arguments;
      // A computed specifier cannot be checked: it is reported, never skipped.
      found.push(arg !== undefined && ts.isStringLiteralLike(arg) ? arg.text : `<computed import: ${node.getText()}>`);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      found.push(node.argument.literal.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(typeof source === "string" ? parse(source) : source);
  return found;
}

const resolved = new Map<string, string[]>();
/** A file's import specifiers, relative ones resolved to repo paths (`src/x/y.ts`). */
function imports(file: string): string[] {
  let specs = resolved.get(file);
  if (specs === undefined) resolved.set(file, (specs = importSpecifiers(sourceFile(file)).map((s) => (s.startsWith(".") ? relative(ROOT, resolve(ROOT, dirname(file), s)) : s))));
  return specs;
}

const concern = (path: string) => /^src\/([^/]+)\//.exec(path)?.[1];

/**
 * One total order of the layers, innermost first: a folder may import only folders before it.
 * The request runtime's phase folders sit between the pure building blocks below them and the
 * engine that runs them in order above them, in the order of {@link PHASES}; the adapters (worker,
 * http) come last.
 */
const LAYERS = [
  "errors",
  "digest",
  "deps",
  "io",
  "egress",
  "traffic",
  "protocol",
  "attribution",
  "audit",
  "mcp",
  "ledger",
  "call-budget",
  "tasks",
  "config",
  "publication",
  "auth",
  "decide",
  "snapshot",
  "context",
  "telemetry",
  "task-ledger",
  "reserve",
  "admit",
  "invoker",
  "respond",
  "settle",
  "approvals",
  "engine",
  "worker",
  "http",
] as const;

/**
 * The request runtime's phase folders in the order the engine runs them: no phase imports a later
 * one. `auth` is authenticate and authorize, `invoker` is invoke. `protocol` runs as the decode
 * phase but is also a building block every later phase speaks (neutral requests, events, codecs),
 * so it sits low in {@link LAYERS} and is not listed here.
 */
const PHASES = ["auth", "decide", "reserve", "admit", "invoker", "respond", "settle"] as const;

/** Folders that must stay transport-neutral: no Hono, no Workers runtime modules, no bindings. */
const ADAPTERS = new Set(["worker", "http"]);

/** The composition root: the one file of src/ that may name the Durable Object classes. */
const COMPOSITION_ROOT = "src/index.ts";

describe("the import parser", () => {
  it("finds every form of import a module can write", () => {
    const source = `
      import value from "./static.ts";
      import { a,
        b } from "./multi-line.ts";
      import type { T } from "./type-only.ts";
      import { type U } from "./inline-type.ts";
      import "./side-effect.ts";
      export { c } from "./re-export.ts";
      export type { V } from "./re-export-type.ts";
      export * from "./star.ts";
      export * as ns from "./star-as.ts";
      import legacy = require("./require.ts");
      async function later() { return import("./dynamic.ts"); }
      type W = typeof import("./type-query.ts");
      const x = 1; export { x };
    `;
    expect(importSpecifiers(source)).toEqual([
      "./static.ts",
      "./multi-line.ts",
      "./type-only.ts",
      "./inline-type.ts",
      "./side-effect.ts",
      "./re-export.ts",
      "./re-export-type.ts",
      "./star.ts",
      "./star-as.ts",
      "./require.ts",
      "./dynamic.ts",
      "./type-query.ts",
    ]);
  });

  it("ignores specifiers in comments and strings, and reports a computed import", () => {
    const source = `
      // import "./commented.ts";
      /* export * from "./block-commented.ts"; */
      const s = 'import x from "./in-a-string.ts"';
      const t = \`export * from "./in-a-template.ts"\`;
      const name = "./computed.ts";
      void import(name);
    `;
    expect(importSpecifiers(source)).toEqual(["<computed import: import(name)>"]);
  });
});

describe("module boundaries", () => {
  const src = files("src");
  const durableObjects = files("durable-objects");
  const all = [...src, ...durableObjects];

  it("places every folder of src/ in the layer order, and every phase in it in phase order", () => {
    const concerns = new Set(src.map(concern).filter((c): c is string => c !== undefined));
    expect([...concerns].filter((c) => !(LAYERS as readonly string[]).includes(c))).toEqual([]);
    expect(LAYERS.filter((l) => (PHASES as readonly string[]).includes(l))).toEqual([...PHASES]);
  });

  it("resolves every relative import to a file that exists", () => {
    // An import the graph cannot place would escape every rule below.
    const offenders = all.flatMap((f) =>
      importSpecifiers(sourceFile(f))
        .filter((s) => s.startsWith(".") && !existsSync(resolve(ROOT, dirname(f), s)))
        .map((s) => `${f} → ${s}`),
    );
    expect(offenders).toEqual([]);
  });

  it("keeps the engine, its phases and their building blocks transport-neutral", () => {
    const offenders: string[] = [];
    for (const f of src.filter((f) => !ADAPTERS.has(concern(f) ?? "worker"))) {
      for (const spec of imports(f)) {
        if (spec === "hono" || spec.startsWith("hono/") || spec.startsWith("cloudflare:")) offenders.push(`${f} imports ${spec}`);
      }
      const named = (node: ts.Node): boolean => (ts.isIdentifier(node) && node.text === "Env") || (ts.forEachChild(node, named) ?? false);
      if (named(sourceFile(f))) offenders.push(`${f} names the Env bindings type`);
    }
    expect(offenders).toEqual([]);
  });

  it("keeps durable-objects/ out of src/: only the composition root names the classes", () => {
    const offenders = src.filter((f) => f !== COMPOSITION_ROOT).flatMap((f) => imports(f).filter((s) => s.startsWith("durable-objects/")).map((s) => `${f} imports ${s}`));
    expect(offenders).toEqual([]);
  });

  it("lets imports point only to earlier layers", () => {
    const rank = new Map<string, number>(LAYERS.map((l, i) => [l, i]));
    const offenders: string[] = [];
    for (const f of src) {
      const from = concern(f);
      if (!from) continue;
      for (const spec of imports(f)) {
        const to = concern(spec);
        if (to && to !== from && !(rank.get(to)! < rank.get(from)!)) offenders.push(`${f} → ${spec}`);
      }
    }
    expect(offenders).toEqual([]);
  });

  it("lets no phase import a later phase", () => {
    const order = new Map<string, number>(PHASES.map((p, i) => [p, i]));
    const offenders: string[] = [];
    for (const f of src) {
      const from = order.get(concern(f) ?? "");
      if (from === undefined) continue;
      for (const spec of imports(f)) {
        const to = order.get(concern(spec) ?? "");
        if (to !== undefined && to > from) offenders.push(`${f} (${PHASES[from]}) → ${spec} (${PHASES[to]})`);
      }
    }
    expect(offenders).toEqual([]);
  });

  it("has no import cycle between files of src/ and durable-objects/, inside a folder or across folders", () => {
    const known = new Set(all);
    const graph = new Map<string, string[]>(all.map((f) => [f, imports(f).filter((s) => known.has(s))]));
    const cycles: string[] = [];
    const state = new Map<string, "visiting" | "done">();
    const stack: string[] = [];
    const visit = (f: string) => {
      state.set(f, "visiting");
      stack.push(f);
      for (const to of graph.get(f) ?? []) {
        if (state.get(to) === "visiting") cycles.push([...stack.slice(stack.indexOf(to)), to].join(" → "));
        else if (state.get(to) === undefined) visit(to);
      }
      stack.pop();
      state.set(f, "done");
    };
    for (const f of all) if (state.get(f) === undefined) visit(f);
    expect(cycles).toEqual([]);
  });

  it("keeps Durable Objects thin: logic lives in src/", () => {
    for (const f of durableObjects) {
      const text = readFileSync(join(ROOT, f), "utf8");
      expect(text.split("\n").length, `${f} should stay a thin shell`).toBeLessThan(200);
    }
  });
});
