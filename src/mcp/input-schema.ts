import { z } from "zod";
import { GatewayError } from "../errors/gateway-error.ts";
import { regexSource } from "./tool-policy.ts";

/**
 * The part of JSON Schema (2020-12) a configured tool's `inputSchema` may use, and the validator
 * the gateway runs on a call's arguments before it builds a request. The subset is declared here
 * and enforced when the configuration loads: a keyword outside it is refused there, never ignored,
 * so no schema shown to clients promises a check the gateway does not make.
 */

/** JSON Schema's instance types. */
const TYPES = ["object", "array", "string", "number", "integer", "boolean", "null"] as const;
type JsonType = (typeof TYPES)[number];

const scalar = z.union([z.string(), z.number(), z.boolean(), z.null()]);

/** One (sub)schema of the subset. */
export interface InputSchema {
  readonly type?: JsonType | readonly JsonType[] | undefined;
  readonly properties?: Readonly<Record<string, InputSchema>> | undefined;
  readonly required?: readonly string[] | undefined;
  readonly additionalProperties?: boolean | undefined;
  readonly items?: InputSchema | undefined;
  readonly enum?: readonly (string | number | boolean | null)[] | undefined;
  readonly minimum?: number | undefined;
  readonly maximum?: number | undefined;
  readonly minLength?: number | undefined;
  readonly maxLength?: number | undefined;
  readonly pattern?: string | undefined;
  readonly minItems?: number | undefined;
  readonly maxItems?: number | undefined;
  // Annotations: shown to clients, asserting nothing (JSON Schema treats `format` as one by default).
  readonly title?: string | undefined;
  readonly description?: string | undefined;
  readonly default?: unknown;
  readonly examples?: readonly unknown[] | undefined;
  readonly format?: string | undefined;
}

const count = z.number().int().min(0);

/** The keywords of the subset; strict objects, so an unsupported keyword fails the configuration with its path. */
const keywords = () => ({
  type: z.union([z.enum(TYPES), z.array(z.enum(TYPES)).min(1)], { message: `type: one of ${TYPES.join(", ")}, or a list of them` }).optional(),
  properties: z.record(z.string(), subschema).optional(),
  required: z.array(z.string()).optional(),
  additionalProperties: z.boolean({ message: "additionalProperties: only true or false is supported" }).optional(),
  items: subschema.optional(),
  enum: z.array(scalar, { message: "enum: a list of strings, numbers, booleans or null" }).min(1).optional(),
  minimum: z.number().optional(),
  maximum: z.number().optional(),
  minLength: count.optional(),
  maxLength: count.optional(),
  pattern: regexSource("pattern: not a valid regular expression").optional(),
  minItems: count.optional(),
  maxItems: count.optional(),
  title: z.string().optional(),
  description: z.string().optional(),
  default: z.unknown().optional(),
  examples: z.array(z.unknown()).optional(),
  format: z.string().optional(),
});

const subschema: z.ZodType<InputSchema> = z.lazy(() => z.strictObject(keywords()));
const rootSchema: z.ZodType<InputSchema & { readonly $schema?: string | undefined }> = z.lazy(() => z.strictObject({ ...keywords(), $schema: z.string().optional() }));

/**
 * A tool's `inputSchema` in configuration: the subset above with `type: object` at its root (as
 * MCP requires). Written as a record checked whole, so the configuration reference documents it
 * as one key rather than walking JSON Schema's own keywords.
 */
export const inputSchemaSchema = z.record(z.string(), z.unknown()).transform((value, ctx): InputSchema => {
  const parsed = rootSchema.safeParse(value);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const message = issue.code === "unrecognized_keys" ? `${issue.keys.join(", ")}: not a keyword this gateway checks (supported: ${Object.keys(keywords()).join(", ")})` : issue.message;
      ctx.addIssue({ code: "custom", message, path: issue.path });
    }
    return z.NEVER;
  }
  if (parsed.data.type !== "object") {
    ctx.addIssue({ code: "custom", message: "a tool's inputSchema has type: object at its root", path: ["type"] });
    return z.NEVER;
  }
  return parsed.data;
});

const typeOf = (v: unknown): JsonType | "other" => {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isFinite(v) ? "number" : "other";
  if (typeof v === "string" || typeof v === "boolean" || typeof v === "object") return typeof v as JsonType;
  return "other";
};

const matchesType = (v: unknown, t: JsonType): boolean => (t === "integer" ? typeof v === "number" && Number.isInteger(v) : typeOf(v) === t);

/** The first way `value` fails `schema`: where, and which keyword (never the value itself). */
export function schemaViolation(schema: InputSchema, value: unknown, at = ""): { readonly path: string; readonly reason: string } | undefined {
  const fail = (reason: string, path = at) => ({ path, reason });
  if (schema.type !== undefined) {
    const types: readonly JsonType[] = typeof schema.type === "string" ? [schema.type] : schema.type;
    if (!types.some((t) => matchesType(value, t))) return fail(`must be of type ${types.join(" or ")}`);
  }
  if (schema.enum !== undefined && !schema.enum.some((e) => e === value)) return fail("must be one of the listed values");
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) return fail(`must be at least ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) return fail(`must be at most ${schema.maximum}`);
  }
  if (typeof value === "string") {
    // JSON Schema counts characters (code points), not UTF-16 units.
    const length = [...value].length;
    if (schema.minLength !== undefined && length < schema.minLength) return fail(`must be at least ${schema.minLength} characters`);
    if (schema.maxLength !== undefined && length > schema.maxLength) return fail(`must be at most ${schema.maxLength} characters`);
    if (schema.pattern !== undefined && !new RegExp(schema.pattern, "u").test(value)) return fail("does not match the pattern");
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) return fail(`must have at least ${schema.minItems} items`);
    if (schema.maxItems !== undefined && value.length > schema.maxItems) return fail(`must have at most ${schema.maxItems} items`);
    if (schema.items !== undefined) {
      for (let i = 0; i < value.length; i++) {
        const v = schemaViolation(schema.items, value[i], `${at}[${i}]`);
        if (v) return v;
      }
    }
  }
  if (typeOf(value) === "object") {
    const obj = value as Record<string, unknown>;
    const join = (k: string) => (at === "" ? k : `${at}.${k}`);
    for (const k of schema.required ?? []) if (!Object.hasOwn(obj, k)) return fail("is required", join(k));
    for (const [k, v] of Object.entries(obj)) {
      const sub = schema.properties !== undefined && Object.hasOwn(schema.properties, k) ? schema.properties[k] : undefined;
      if (sub !== undefined) {
        const violation = schemaViolation(sub, v, join(k));
        if (violation) return violation;
      } else if (schema.additionalProperties === false) return fail("is not an argument of this tool", join(k.slice(0, 64)));
    }
  }
  return undefined;
}

/** Refuses arguments that do not meet the tool's schema, as the caller's invalid params (-32602). */
export function checkArguments(schema: InputSchema, args: unknown): void {
  const v = schemaViolation(schema, args);
  if (v === undefined) return;
  const name = v.path === "" ? "The arguments" : `Argument '${v.path}'`;
  throw new GatewayError("invalid_request", `${name} ${v.reason}.`, { param: v.path === "" ? "params.arguments" : `params.arguments.${v.path}` });
}
