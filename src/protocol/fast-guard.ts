import type { z } from "zod";

/**
 * Hand-written guards in front of zod. A CPU profile under load put zod's `safeParse` at 6-7% of
 * the isolate's time, most of it validating every streamed provider event. A guard checks only
 * what one schema checks, with plain property reads and no issue bookkeeping or output copy.
 *
 * zod stays the authority. The rule every guard keeps: it returns its input (typed) only when zod
 * would accept that input and the decoder would read the same values from it as from zod's output
 * (none of these schemas transforms or defaults anything); otherwise it returns `undefined` and
 * zod decides, errors and all. A guard may give up on valid input; it must never vouch for input
 * zod rejects. Each check below mirrors zod 4's own: what `z.looseObject` counts as an object, what
 * `.int()` counts as an integer, that `.optional()` lets a present `undefined` through.
 */

/** Reads one schema's value from untrusted input: the value, or `undefined` when it is invalid. */
export type Reader<T> = (input: unknown) => T | undefined;

/** A guard over `schema` with zod as the fallback for everything the guard does not vouch for. */
export function guarded<S extends z.ZodType>(schema: S, guard: Reader<z.output<S>>): Reader<z.output<S>> {
  return (input) => {
    const fast = guard(input);
    if (fast !== undefined) return fast;
    const parsed = schema.safeParse(input);
    return parsed.success ? parsed.data : undefined;
  };
}

/** zod alone: for schemas not worth a guard (rare events), and for tests to compare the guards against. */
export function zodOnly<S extends z.ZodType>(schema: S): Reader<z.output<S>> {
  return (input) => {
    const parsed = schema.safeParse(input);
    return parsed.success ? parsed.data : undefined;
  };
}

/** One reader per schema of a record of schemas. */
export type Readers<T extends Record<string, z.ZodType>> = { readonly [K in keyof T]: Reader<z.output<T[K]>> };

/** Guards for some of a record's schemas; a schema without one is read by zod alone. */
export type Guards<T extends Record<string, z.ZodType>> = { readonly [K in keyof T]?: Reader<z.output<T[K]>> };

/** Readers for a record of schemas, each guarded where `guards` has a guard for it. */
export function readersOf<T extends Record<string, z.ZodType>>(schemas: T, guards: Guards<T>): Readers<T> {
  const out: Record<string, Reader<unknown>> = {};
  for (const key of Object.keys(schemas)) {
    const schema = schemas[key]!;
    const guard = guards[key];
    out[key] = guard ? guarded(schema, guard) : zodOnly(schema);
  }
  return out as Readers<T>;
}

/** A guard from a predicate that holds exactly when the input is in the accepted set. */
export function guardOf<T>(ok: (input: unknown) => boolean): Reader<T> {
  return (input) => (ok(input) ? (input as T) : undefined);
}

/** What zod's object schemas accept as an object (arrays are not; any other object is). */
export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Every element, holes included: `Array.prototype.every` skips holes, zod reads them as `undefined`. */
export function everyItem(a: readonly unknown[], ok: (v: unknown) => boolean): boolean {
  for (let i = 0; i < a.length; i++) if (!ok(a[i])) return false;
  return true;
}

/** `z.number().int().min(0)`: zod's `.int()` means a safe integer. */
export function isCount(v: unknown): v is number {
  return Number.isSafeInteger(v) && (v as number) >= 0;
}

/** `z.string().optional()`. */
export function isOptString(v: unknown): v is string | undefined {
  return v === undefined || typeof v === "string";
}

/** `z.string().nullable().optional()`. */
export function isNullishString(v: unknown): v is string | null | undefined {
  return v === undefined || v === null || typeof v === "string";
}

/** `count.optional()`. */
export function isOptCount(v: unknown): v is number | undefined {
  return v === undefined || isCount(v);
}

/** `count.nullable().optional()`. */
export function isNullishCount(v: unknown): v is number | null | undefined {
  return v === undefined || v === null || isCount(v);
}
