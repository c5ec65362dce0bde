import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "..", "..");

function files(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}

/** Import specifiers of a file (type-only ones included), relative ones resolved to repo paths. */
function imports(file: string): string[] {
  const text = readFileSync(join(ROOT, file), "utf8");
  const specs = [...text.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s+["']([^"']+)["']/gm), ...text.matchAll(/import\(\s*["']([^"']+)["']\s*\)/g)].map((m) => m[1]!);
  return specs.map((s) => (s.startsWith(".") ? relative(ROOT, resolve(ROOT, dirname(file), s)) : s));
}

const concern = (path: string) => /^src\/([^/]+)\//.exec(path)?.[1];

/**
 * One total order of the layers, innermost first: a folder may import only folders before it.
 * The request runtime's phase folders sit between the pure building blocks below them and the
 * engine that runs them in order above them; the adapters (worker, http) come last.
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
  "admit",
  "invoker",
  "settle",
  "reserve",
  "respond",
  "approvals",
  "engine",
  "worker",
  "http",
] as const;

/** Folders that must stay transport-neutral: no Hono, no Workers runtime modules, no bindings. */
const ADAPTERS = new Set(["worker", "http"]);

describe("module boundaries", () => {
  const src = files("src");

  it("places every folder of src/ in the layer order", () => {
    const concerns = new Set(src.map(concern).filter((c): c is string => c !== undefined));
    expect([...concerns].filter((c) => !(LAYERS as readonly string[]).includes(c))).toEqual([]);
  });

  it("keeps the engine, its phases and their building blocks transport-neutral", () => {
    const offenders: string[] = [];
    for (const f of src.filter((f) => !ADAPTERS.has(concern(f) ?? "worker"))) {
      for (const spec of imports(f)) {
        if (spec === "hono" || spec.startsWith("hono/") || spec.startsWith("cloudflare:")) offenders.push(`${f} imports ${spec}`);
        if (spec.startsWith("durable-objects/")) offenders.push(`${f} imports ${spec}`);
      }
      const text = readFileSync(join(ROOT, f), "utf8");
      if (/\bEnv\b/.test(text.replace(/\/\/.*$|\/\*[\s\S]*?\*\//gm, ""))) offenders.push(`${f} names the Env bindings type`);
    }
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

  it("has no import cycle between files, inside a folder or across folders", () => {
    const graph = new Map<string, string[]>(
      src.map((f) => [f, imports(f).filter((s) => s.startsWith("src/") || s === "src/index.ts").filter((s) => src.includes(s))]),
    );
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
    for (const f of src) if (state.get(f) === undefined) visit(f);
    expect(cycles).toEqual([]);
  });

  it("keeps Durable Objects thin: logic lives in src/", () => {
    for (const f of files("durable-objects")) {
      const text = readFileSync(join(ROOT, f), "utf8");
      expect(text.split("\n").length, `${f} should stay a thin shell`).toBeLessThan(200);
    }
  });
});
