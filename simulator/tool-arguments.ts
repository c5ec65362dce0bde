/**
 * Deterministic tool-call arguments built from a JSON Schema.
 *
 * The goal is arguments a caller's validator accepts for the common schema shapes, not a
 * full JSON Schema implementation: required properties are filled, optional ones left out.
 */

type Schema = Readonly<Record<string, unknown>>;

function isObject(value: unknown): value is Schema {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Nesting guard: a recursive `$ref`-free schema can still be absurdly deep. */
const MAX_DEPTH = 8;

/**
 * A placeholder value for `schema`: `const`, then `default`, then the first `enum` value,
 * then the first `anyOf`/`oneOf` branch, else by `type` (the first non-null one when
 * `type` is a list): string `"sample"`, integer/number `1`, boolean `true`, null `null`,
 * array with one placeholder item when `minItems` ≥ 1 (else empty), object with its
 * required properties. A schema without a type is treated as an object when it has
 * `properties`, else as a string.
 */
export function placeholderFor(schema: unknown, depth = 0): unknown {
  if (!isObject(schema) || depth > MAX_DEPTH) return "sample";
  if ("const" in schema) return schema["const"];
  if ("default" in schema) return schema["default"];
  const enumValues = schema["enum"];
  if (Array.isArray(enumValues) && enumValues.length > 0) return enumValues[0];
  for (const union of ["anyOf", "oneOf", "allOf"] as const) {
    const branches = schema[union];
    if (Array.isArray(branches) && branches.length > 0) {
      const branch = branches.find((b) => !(isObject(b) && b["type"] === "null")) ?? branches[0];
      return placeholderFor(branch, depth + 1);
    }
  }
  let type = schema["type"];
  if (Array.isArray(type)) type = type.find((t) => t !== "null") ?? "null";
  if (type === undefined) type = isObject(schema["properties"]) ? "object" : "string";
  switch (type) {
    case "object":
      return objectPlaceholder(schema, depth);
    case "array": {
      const minItems = typeof schema["minItems"] === "number" ? schema["minItems"] : 0;
      return minItems >= 1 ? [placeholderFor(schema["items"], depth + 1)] : [];
    }
    case "integer":
    case "number":
      return typeof schema["minimum"] === "number" ? schema["minimum"] : 1;
    case "boolean":
      return true;
    case "null":
      return null;
    default:
      return "sample";
  }
}

function objectPlaceholder(schema: Schema, depth: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const properties = isObject(schema["properties"]) ? schema["properties"] : {};
  const required = Array.isArray(schema["required"]) ? schema["required"] : [];
  for (const name of required) {
    if (typeof name === "string") out[name] = placeholderFor(properties[name], depth + 1);
  }
  return out;
}

/** The arguments JSON for a tool whose parameters schema is `parameters` (`{}` if absent). */
export function buildArguments(parameters: unknown): string {
  return JSON.stringify(isObject(parameters) ? objectPlaceholder(parameters, 0) : {});
}
