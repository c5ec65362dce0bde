import { expect } from "vitest";
import type { z } from "zod";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import type { Reader } from "../../../src/protocol/fast-guard.ts";

/**
 * Corpus tools for the guard-equivalence tests: a seeded mutator that turns valid provider and
 * client payloads into near-misses (wrong types, null for absent, negative and fractional counts,
 * extra keys, a bad element after good ones, holes), and the checks every guard must pass.
 */

/** mulberry32: a small deterministic generator, so every run tests the same corpus. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Values that sit on the edges of what the schemas accept. */
const ODD_VALUES: readonly unknown[] = [
  null,
  undefined,
  true,
  false,
  0,
  -0,
  1,
  -1,
  2,
  4,
  0.5,
  1.5,
  2.5,
  -2,
  -2.5,
  1e21,
  2 ** 53,
  2 ** 53 - 1,
  -(2 ** 53),
  Number.NaN,
  Number.POSITIVE_INFINITY,
  Number.NEGATIVE_INFINITY,
  "",
  "x",
  "stop",
  "user",
  "assistant",
  "tool",
  "system",
  "developer",
  "function",
  "text",
  "text_delta",
  "thinking",
  "tool_use",
  "function_call",
  "message",
  "high",
  [],
  [null],
  ["a", "b", "c", "d", "e"],
  {},
  { type: "text" },
  { type: "text", text: "t" },
  { index: 0 },
  { message: "m" },
  { role: "user", content: "u" },
];

type Container = Record<string, unknown> | unknown[];
type Slot = { readonly parent: Container; readonly key: string | number };

function isContainer(v: unknown): v is Container {
  return typeof v === "object" && v !== null;
}

/** A deep copy that keeps `undefined`, NaN, -0 and holes (which JSON would not). */
function clone(v: unknown): unknown {
  if (Array.isArray(v)) {
    const out: unknown[] = new Array(v.length);
    for (let i = 0; i < v.length; i++) if (i in v) out[i] = clone(v[i]);
    return out;
  }
  if (isContainer(v)) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = clone(x);
    return out;
  }
  return v;
}

function slots(v: unknown, out: Slot[] = []): Slot[] {
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      out.push({ parent: v, key: i });
      slots(v[i], out);
    }
  } else if (isContainer(v)) {
    const o = v as Record<string, unknown>;
    for (const k of Object.keys(o)) {
      out.push({ parent: o, key: k });
      slots(o[k], out);
    }
  }
  return out;
}

function containers(v: unknown, out: Container[] = []): Container[] {
  if (isContainer(v)) {
    out.push(v);
    for (const x of Object.values(v)) containers(x, out);
  }
  return out;
}

/** Every object key anywhere in `values`: the mutator's pool of keys to add. */
export function keysOf(values: readonly unknown[]): string[] {
  const keys = new Set<string>();
  for (const v of values) for (const c of containers(v)) if (!Array.isArray(c)) for (const k of Object.keys(c)) keys.add(k);
  return [...keys];
}

const pick = <T>(random: () => number, items: readonly T[]): T => items[Math.floor(random() * items.length)]!;

function tweakNumber(random: () => number, n: number): number {
  return pick(random, [-n, n + 0.5, n - 1, -1, n * 1e20, 2 ** 53, Number.NaN, Number.POSITIVE_INFINITY, 0, 1]);
}

/** One random change somewhere in `root` (in place); returns the (possibly replaced) root. */
function mutateOnce(random: () => number, root: unknown, keyPool: readonly string[]): unknown {
  const all = slots(root);
  const roll = random();
  // Now and then the whole value is replaced: a chunk that is not an object at all.
  if (all.length === 0 || roll < 0.03) return clone(pick(random, ODD_VALUES));
  if (roll < 0.18) {
    // Add a key (often one the schemas know) to some object, with an odd value.
    const objects = containers(root).filter((c) => !Array.isArray(c));
    if (objects.length > 0) {
      const target = pick(random, objects) as Record<string, unknown>;
      target[pick(random, [...keyPool, "extra", "__extra__"])] = clone(pick(random, ODD_VALUES));
      return root;
    }
  }
  if (roll < 0.3) {
    // A bad element after good ones: append a changed copy of an element.
    const arrays = containers(root).filter((c): c is unknown[] => Array.isArray(c) && c.length > 0);
    if (arrays.length > 0) {
      const target = pick(random, arrays);
      const copy = clone(pick(random, target));
      target.push(mutateOnce(random, copy, keyPool));
      return root;
    }
  }
  const slot = pick(random, all);
  const current = (slot.parent as Record<string | number, unknown>)[slot.key];
  const parent = slot.parent as Record<string | number, unknown>;
  const op = random();
  if (op < 0.15) {
    if (Array.isArray(slot.parent)) slot.parent.splice(slot.key as number, 1);
    else delete parent[slot.key];
  } else if (op < 0.22 && Array.isArray(slot.parent)) {
    // A hole: zod reads it as undefined; `every` and `for...of` treat it differently.
    delete parent[slot.key];
  } else if (op < 0.45 && typeof current === "number") {
    parent[slot.key] = tweakNumber(random, current);
  } else if (op < 0.55 && typeof current === "string") {
    parent[slot.key] = pick(random, ["", 0, null, [current], { text: current }]);
  } else if (op < 0.65) {
    parent[slot.key] = pick(random, [null, undefined]);
  } else if (op < 0.72 && current !== undefined) {
    parent[slot.key] = pick(random, [[current], { value: current }]);
  } else {
    parent[slot.key] = clone(pick(random, ODD_VALUES));
  }
  return root;
}

/** `count` variants of the seeds, each changed in one to three places; deterministic for `seed`. */
export function mutants(seeds: readonly unknown[], count: number, seed: number, keyPool: readonly string[] = keysOf(seeds)): unknown[] {
  const random = seededRandom(seed);
  const out: unknown[] = [];
  for (let i = 0; i < count; i++) {
    let v = clone(pick(random, seeds));
    const changes = 1 + Math.floor(random() * 3);
    for (let c = 0; c < changes; c++) v = mutateOnce(random, v, keyPool);
    out.push(v);
  }
  return out;
}

/**
 * Systematic near-misses of one seed: every value in it replaced by each odd value in turn, every
 * value deleted, and every object given each key of `keyPool` with a few odd values.
 */
export function substitutions(seed: unknown, keyPool: readonly string[] = keysOf([seed])): unknown[] {
  const out: unknown[] = [];
  const count = slots(seed).length;
  for (let i = 0; i < count; i++) {
    for (const odd of ODD_VALUES) {
      const copy = clone(seed);
      const slot = slots(copy)[i]!;
      (slot.parent as Record<string | number, unknown>)[slot.key] = clone(odd);
      out.push(copy);
    }
    const copy = clone(seed);
    const slot = slots(copy)[i]!;
    if (Array.isArray(slot.parent)) slot.parent.splice(slot.key as number, 1);
    else delete (slot.parent as Record<string, unknown>)[slot.key as string];
    out.push(copy);
  }
  const objectCount = containers(seed).filter((c) => !Array.isArray(c)).length;
  for (let i = 0; i < objectCount; i++) {
    for (const key of keyPool) {
      for (const odd of [null, undefined, "x", 1, {}, []]) {
        const copy = clone(seed);
        const target = containers(copy).filter((c) => !Array.isArray(c))[i] as Record<string, unknown>;
        if (key in target) continue;
        target[key] = clone(odd);
        out.push(copy);
      }
    }
  }
  return out;
}

/** Tally of one guard over a corpus, so a test can show both outcomes were exercised. */
export interface GuardTally {
  /** The guard vouched (and zod agreed). */
  fast: number;
  /** The guard deferred and zod accepted. */
  deferredValid: number;
  /** The guard deferred and zod rejected. */
  rejected: number;
}

export const emptyTally = (): GuardTally => ({ fast: 0, deferredValid: 0, rejected: 0 });

/**
 * The guard rule: whenever the guard vouches, zod accepts the same input and returns a value equal
 * to the guard's (so every decoder reads the same fields either way).
 */
export function expectGuardWithinZod<S extends z.ZodType>(guard: Reader<z.output<S>>, schema: S, input: unknown, tally: GuardTally, label = ""): void {
  const fast = guard(input);
  const parsed = schema.safeParse(input);
  if (fast !== undefined) {
    expect(parsed.success, `${label} guard vouched for input zod rejects: ${show(input)}`).toBe(true);
    expect(fast, `${label} guard value differs from zod's for ${show(input)}`).toEqual(parsed.data);
    tally.fast++;
  } else if (parsed.success) {
    tally.deferredValid++;
  } else {
    tally.rejected++;
  }
}

/** A decode's outcome, comparable with toEqual: its value, or the error's observable fields. */
export function outcome(fn: () => unknown): unknown {
  try {
    return { value: fn() };
  } catch (err) {
    if (!(err instanceof GatewayError)) throw err;
    const cause = err.cause as { issues?: unknown } | undefined;
    return { error: { code: err.code, status: err.status, source: err.source, message: err.message, param: err.param, causeIssues: cause?.issues } };
  }
}

/** For failure messages: JSON with the values JSON would lose. */
export function show(v: unknown): string {
  const text = JSON.stringify(v, (_k, x: unknown) =>
    x === undefined ? "<undefined>" : typeof x === "number" && !Number.isFinite(x) ? String(x) : Object.is(x, -0) ? "<-0>" : x,
  );
  return text === undefined ? String(v) : text.length > 600 ? `${text.slice(0, 600)}…` : text;
}
