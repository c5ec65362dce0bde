import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "..", "..");

function files(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}

/** Import specifiers of a file, relative ones resolved to repo paths. */
function imports(file: string): string[] {
  const text = readFileSync(join(ROOT, file), "utf8");
  const specs = [...text.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s+["']([^"']+)["']/gm), ...text.matchAll(/import\(\s*["']([^"']+)["']\s*\)/g)].map((m) => m[1]!);
  return specs.map((s) => (s.startsWith(".") ? relative(ROOT, resolve(ROOT, dirname(file), s)) : s));
}

const concern = (path: string) => /^src\/([^/]+)\//.exec(path)?.[1];

/** Transport-neutral modules: no Hono, no Workers runtime modules, no bindings object. */
const NEUTRAL = ["engine", "plan", "protocol", "traffic", "invoker", "pipeline", "snapshot", "config", "auth", "errors", "digest", "budget", "ledger", "billing", "io"];

/** Which concerns each concern may import (besides itself). Imports point inward. */
const ALLOWED: Record<string, readonly string[]> = {
  errors: [],
  digest: [],
  io: [],
  traffic: [],
  budget: ["errors", "traffic"],
  ledger: ["errors", "traffic"],
  billing: ["config", "engine", "errors", "invoker", "ledger", "plan", "protocol"],
  config: ["errors", "ledger", "traffic", "snapshot", "protocol"],
  protocol: ["errors", "config"],
  plan: ["config", "protocol"],
  snapshot: ["config", "digest", "errors", "traffic", "protocol"],
  auth: ["config", "digest", "errors", "engine"],
  engine: ["config", "errors", "plan", "protocol", "traffic"],
  pipeline: ["errors", "invoker", "protocol", "traffic"],
  invoker: ["budget", "errors", "io", "pipeline", "plan", "protocol", "snapshot", "traffic"],
  http: ["billing", "budget", "config", "ledger", "digest", "engine", "errors", "invoker", "io", "pipeline", "plan", "protocol", "snapshot", "worker"],
  worker: ["auth", "billing", "budget", "config", "ledger", "digest", "engine", "errors", "http", "invoker", "pipeline", "protocol", "snapshot", "traffic"],
};

describe("module boundaries", () => {
  const src = files("src");

  it("covers every concern folder with a rule", () => {
    const concerns = new Set(src.map(concern).filter((c): c is string => c !== undefined));
    expect([...concerns].filter((c) => !(c in ALLOWED))).toEqual([]);
  });

  it("keeps the engine and its inner modules transport-neutral", () => {
    const offenders: string[] = [];
    for (const f of src.filter((f) => NEUTRAL.includes(concern(f) ?? ""))) {
      for (const spec of imports(f)) {
        if (spec === "hono" || spec.startsWith("hono/") || spec.startsWith("cloudflare:")) offenders.push(`${f} imports ${spec}`);
        if (spec.startsWith("durable-objects/")) offenders.push(`${f} imports ${spec}`);
      }
      const text = readFileSync(join(ROOT, f), "utf8");
      if (/\bEnv\b/.test(text.replace(/\/\/.*$|\/\*[\s\S]*?\*\//gm, ""))) offenders.push(`${f} names the Env bindings type`);
    }
    expect(offenders).toEqual([]);
  });

  it("lets imports point only inward", () => {
    const offenders: string[] = [];
    for (const f of src) {
      const from = concern(f);
      if (!from) continue;
      for (const spec of imports(f)) {
        const to = concern(spec);
        if (to && to !== from && !ALLOWED[from]!.includes(to)) offenders.push(`${f} → ${spec}`);
      }
    }
    expect(offenders).toEqual([]);
  });

  it("keeps Durable Objects thin: logic lives in src/", () => {
    for (const f of files("durable-objects")) {
      const text = readFileSync(join(ROOT, f), "utf8");
      expect(text.split("\n").length, `${f} should stay a thin shell`).toBeLessThan(200);
    }
  });
});
