import { describe, expect, it } from "vitest";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import { checkArguments, inputSchemaSchema, schemaViolation } from "../../../src/mcp/input-schema.ts";

const schema = inputSchemaSchema.parse({
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object",
  properties: {
    owner: { type: "string", minLength: 1, maxLength: 3, pattern: "^[a-z]+$", description: "who" },
    number: { type: "integer", minimum: 1, maximum: 10 },
    state: { enum: ["open", "closed"] },
    labels: { type: "array", items: { type: "string" }, maxItems: 2 },
    nested: { type: "object", properties: { flag: { type: ["boolean", "null"] } }, required: ["flag"], additionalProperties: false },
    when: { type: "string", format: "date-time" },
  },
  required: ["owner"],
  additionalProperties: false,
});

describe("tool input schemas", () => {
  it("accepts arguments that meet the schema", () => {
    expect(schemaViolation(schema, { owner: "abc", number: 3, state: "open", labels: ["x"], nested: { flag: null }, when: "not checked: format is an annotation" })).toBeUndefined();
  });

  it("names the argument and the rule it breaks, never its value", () => {
    const cases: [unknown, string, string][] = [
      [{}, "owner", "is required"],
      [{ owner: 1 }, "owner", "must be of type string"],
      [{ owner: "" }, "owner", "must be at least 1 characters"],
      [{ owner: "abcd" }, "owner", "must be at most 3 characters"],
      [{ owner: "AB" }, "owner", "does not match the pattern"],
      [{ owner: "a", number: 1.5 }, "number", "must be of type integer"],
      [{ owner: "a", number: 0 }, "number", "must be at least 1"],
      [{ owner: "a", number: 11 }, "number", "must be at most 10"],
      [{ owner: "a", state: "merged" }, "state", "must be one of the listed values"],
      [{ owner: "a", labels: [1] }, "labels[0]", "must be of type string"],
      [{ owner: "a", labels: ["a", "b", "c"] }, "labels", "must have at most 2 items"],
      [{ owner: "a", nested: {} }, "nested.flag", "is required"],
      [{ owner: "a", nested: { flag: 1 } }, "nested.flag", "must be of type boolean or null"],
      [{ owner: "a", extra: true }, "extra", "is not an argument of this tool"],
      [[], "", "must be of type object"],
    ];
    for (const [args, path, reason] of cases) expect(schemaViolation(schema, args), JSON.stringify(args)).toEqual({ path, reason });
    expect(schemaViolation(schema, { owner: "a", extra: undefined })).toEqual({ path: "extra", reason: "is not an argument of this tool" });
    // Characters, not UTF-16 units: one astral character is one.
    expect(schemaViolation(inputSchemaSchema.parse({ type: "object", properties: { s: { type: "string", maxLength: 1 } } }), { s: "😀" })).toBeUndefined();
  });

  it("refuses failing arguments as invalid params, naming where", () => {
    try {
      checkArguments(schema, { owner: "a", number: 0 });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(GatewayError);
      expect((err as GatewayError).code).toBe("invalid_request");
      expect((err as GatewayError).message).toBe("Argument 'number' must be at least 1.");
    }
  });

  it("refuses at load a keyword outside the subset rather than ignoring it, and a root that is not an object", () => {
    const refused = (s: unknown) => {
      const r = inputSchemaSchema.safeParse(s);
      return r.success ? undefined : r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ");
    };
    expect(refused({ type: "object", properties: { a: { oneOf: [{ type: "string" }] } } })).toMatch(/^properties\.a: oneOf: not a keyword this gateway checks \(supported: type, properties/);
    expect(refused({ type: "object", $ref: "#/defs/x" })).toMatch(/\$ref/);
    expect(refused({ type: "object", additionalProperties: { type: "string" } })).toMatch(/additionalProperties: only true or false/);
    expect(refused({ type: "object", properties: { a: { type: "string", pattern: "(" } } })).toMatch(/pattern: not a valid regular expression/);
    expect(refused({ type: "object", properties: { a: { type: "date" } } })).toMatch(/properties\.a\.type/);
    expect(refused({ type: "array" })).toMatch(/type: a tool's inputSchema has type: object at its root/);
    expect(refused({ properties: {} })).toMatch(/type: a tool's inputSchema has type: object/);
    expect(refused({ type: "object", properties: { a: { type: "string" } }, required: ["a"] })).toBeUndefined();
  });
});
