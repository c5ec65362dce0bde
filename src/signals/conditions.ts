import type { FieldType, SignalShape } from "./compile-signals.ts";
import type { SignalDatum, SignalField, SignalValue } from "./signal-set.ts";

/**
 * A test of one signal, as configured (publication.yaml, validated by config/decision-schema.ts).
 * Without an operator it asks whether the value is "on": true, a number above zero, a non-empty
 * string or list. A record-valued signal is read at `key` (its primary key when absent).
 */
export interface LeafConfig {
  readonly signal: string;
  readonly key?: string | undefined;
  /** Equal to a boolean, number or string. */
  readonly is?: boolean | number | string | undefined;
  /** One of several strings or numbers. */
  readonly in?: readonly (string | number)[] | undefined;
  /** A number strictly above. */
  readonly above?: number | undefined;
  /** A number at or below. */
  readonly atMost?: number | undefined;
  /** A list (modalities, fired rules) that holds this string. */
  readonly contains?: string | undefined;
}

/** A condition: a signal test, or `all` / `any` of conditions, or `not` one. */
export type ConditionConfig = LeafConfig | { readonly all: readonly ConditionConfig[] } | { readonly any: readonly ConditionConfig[] } | { readonly not: ConditionConfig };

/**
 * A condition's truth, three-valued: `unknown` when it turns on a signal that failed or was late
 * (and nothing else settles it), `pending` while a model-backed signal it turns on was not
 * started yet.
 */
export type Truth = true | false | "unknown" | "pending";

/** A signal as a condition reads it now: its settled value, or `pending` (model-backed, not started). */
export type SignalReader = (name: string) => SignalValue | "pending";

/** A condition compiled once per publication. */
export type CompiledCondition =
  | { readonly op: "leaf"; readonly signal: string; readonly test: (value: SignalDatum) => boolean }
  | { readonly op: "all" | "any"; readonly items: readonly CompiledCondition[] }
  | { readonly op: "not"; readonly item: CompiledCondition };

/**
 * Compiles a condition against the shapes of the signals it names; what does not fit (an unknown
 * signal, a key the signal does not have, an operator its value cannot take) is returned as
 * problems with their paths, for the load check to report.
 */
export function compileCondition(c: ConditionConfig, shapes: ReadonlyMap<string, SignalShape>, path: string): { condition: CompiledCondition; problems: { path: string; message: string }[] } {
  const problems: { path: string; message: string }[] = [];
  const walk = (c: ConditionConfig, at: string): CompiledCondition => {
    if ("all" in c) return { op: "all", items: c.all.map((x, i) => walk(x, `${at}.all[${i}]`)) };
    if ("any" in c) return { op: "any", items: c.any.map((x, i) => walk(x, `${at}.any[${i}]`)) };
    if ("not" in c) return { op: "not", item: walk(c.not, `${at}.not`) };
    const shape = shapes.get(c.signal);
    if (!shape) {
      problems.push({ path: `${at}.signal`, message: `unknown signal "${c.signal}" (publication.yaml signals)` });
      return { op: "leaf", signal: c.signal, test: () => false };
    }
    const field = fieldOf(c, shape);
    if ("problem" in field) {
      problems.push({ path: at, message: field.problem });
      return { op: "leaf", signal: c.signal, test: () => false };
    }
    const problem = operatorProblem(c, field.type);
    if (problem) problems.push({ path: at, message: `signal "${c.signal}"${c.key === undefined ? "" : ` key "${c.key}"`}: ${problem}` });
    return { op: "leaf", signal: c.signal, test: leafTest(c, field.key) };
  };
  return { condition: walk(c, path), problems };
}

/** Which field of the signal's value the leaf reads, and its type. */
function fieldOf(leaf: LeafConfig, shape: SignalShape): { key: string | undefined; type: FieldType } | { problem: string } {
  if ("type" in shape) {
    if (leaf.key !== undefined) return { problem: `signal "${leaf.signal}" has a plain value: it takes no key` };
    return { key: undefined, type: shape.type };
  }
  const key = leaf.key ?? shape.primary;
  const type = shape.keys[key] ?? shape.anyKey;
  if (type === undefined) return { problem: `signal "${leaf.signal}" has no key "${key}" (it has ${Object.keys(shape.keys).map((k) => `"${k}"`).join(", ")})` };
  return { key, type };
}

function operatorProblem(leaf: LeafConfig, type: FieldType): string | undefined {
  if (leaf.is !== undefined) {
    const t = typeof leaf.is;
    if (type === "list") return "a list is tested with contains, not is";
    if (t !== type) return `its value is a ${type}; is ${JSON.stringify(leaf.is)} is a ${t}`;
  }
  if (leaf.in !== undefined) {
    if (type !== "string" && type !== "number") return `in tests a string or a number; its value is a ${type}`;
    if (leaf.in.some((x) => typeof x !== type)) return `every value of in must be a ${type}`;
  }
  if ((leaf.above !== undefined || leaf.atMost !== undefined) && type !== "number") return `above and atMost test a number; its value is a ${type}`;
  if (leaf.contains !== undefined && type !== "list") return `contains tests a list; its value is a ${type}`;
  return undefined;
}

function leafTest(leaf: LeafConfig, key: string | undefined): (value: SignalDatum) => boolean {
  const read = key === undefined ? (v: SignalDatum) => v as SignalField : (v: SignalDatum) => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Readonly<Record<string, SignalField>>)[key] : undefined);
  const { is, in: among, above, atMost, contains } = leaf;
  if (is !== undefined) return (v) => read(v) === is;
  if (among !== undefined) {
    const set = new Set<unknown>(among);
    return (v) => set.has(read(v));
  }
  if (above !== undefined) return (v) => {
    const x = read(v);
    return typeof x === "number" && x > above;
  };
  if (atMost !== undefined) return (v) => {
    const x = read(v);
    return typeof x === "number" && x <= atMost;
  };
  if (contains !== undefined) return (v) => {
    const x = read(v);
    return Array.isArray(x) && x.includes(contains);
  };
  return (v) => {
    const x = read(v);
    if (typeof x === "boolean") return x;
    if (typeof x === "number") return x > 0;
    if (typeof x === "string") return x !== "";
    return Array.isArray(x) && x.length > 0;
  };
}

/**
 * The condition's truth with the signals as they are now. `all` is false as soon as one part is
 * false, whatever else is pending or unknown (and `any` true as soon as one is true), so a local
 * signal can settle a decision without its model-backed one. A signal that does not apply to the
 * request makes its test false; one that failed or was late makes it unknown.
 */
export function evaluate(c: CompiledCondition, read: SignalReader): Truth {
  switch (c.op) {
    case "leaf": {
      const v = read(c.signal);
      if (v === "pending") return "pending";
      if (v.state === "unknown") return v.reason === "not_applicable" ? false : "unknown";
      return c.test(v.value);
    }
    case "not": {
      const t = evaluate(c.item, read);
      return typeof t === "boolean" ? !t : t;
    }
    case "all":
    case "any": {
      const decisive = c.op === "any";
      let pending = false;
      let unknown = false;
      for (const item of c.items) {
        const t = evaluate(item, read);
        if (t === decisive) return decisive;
        if (t === "pending") pending = true;
        else if (t === "unknown") unknown = true;
      }
      return pending ? "pending" : unknown ? "unknown" : !decisive;
    }
  }
}

/** The signals the condition tests whose reading is `pending` now (the model-backed ones it may still need). */
export function pendingSignals(c: CompiledCondition, read: SignalReader, into: Set<string>): void {
  switch (c.op) {
    case "leaf":
      if (read(c.signal) === "pending") into.add(c.signal);
      return;
    case "not":
      return pendingSignals(c.item, read, into);
    case "all":
    case "any":
      for (const item of c.items) pendingSignals(item, read, into);
  }
}

/** Every signal the condition names. */
export function signalsOf(c: CompiledCondition, into: Set<string> = new Set()): Set<string> {
  if (c.op === "leaf") into.add(c.signal);
  else if (c.op === "not") signalsOf(c.item, into);
  else for (const item of c.items) signalsOf(item, into);
  return into;
}
