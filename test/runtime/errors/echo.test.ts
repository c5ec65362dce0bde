/**
 * Error messages quote client input through one helper, so their size never follows the input's:
 * the helper itself, then every codec and the engine with megabyte-sized values where a message
 * quotes one.
 */
import { describe, expect, it } from "vitest";
import { echo, MAX_ECHO_CHARS } from "../../../src/errors/echo.ts";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import { PROTOCOL_IDS, type ProtocolId } from "../../../src/protocol/codec.ts";
import { builtinCodecs } from "../../../src/protocol/registry.ts";
import { engineHarness } from "../support/engine-harness.ts";

describe("echo", () => {
  it("returns short input unchanged and cuts long input to a marked prefix", () => {
    expect(echo("sluice-chat")).toBe("sluice-chat");
    const long = echo("m".repeat(1_000_000));
    expect(long).toBe(`${"m".repeat(MAX_ECHO_CHARS)}…`);
    expect(echo("x".repeat(MAX_ECHO_CHARS))).toBe("x".repeat(MAX_ECHO_CHARS));
    expect(echo("abcdef", 3)).toBe("abc…");
  });

  it("never splits a surrogate pair", () => {
    const cut = echo(`${"a".repeat(MAX_ECHO_CHARS - 1)}🙂🙂`);
    expect(cut).toBe(`${"a".repeat(MAX_ECHO_CHARS - 1)}…`);
    expect(() => encodeURIComponent(cut)).not.toThrow();
  });

  it("quotes what is not a string by its string form, and survives a hostile toString", () => {
    expect(echo(42)).toBe("42");
    expect(echo(undefined)).toBe("undefined");
    expect(echo(["a", "b"])).toBe("a,b");
    expect(echo(new Array(1_000_000).fill("z")).length).toBe(MAX_ECHO_CHARS + 1);
    const hostile = {
      toString() {
        throw new Error("no");
      },
    };
    expect(echo(hostile)).toBe("object");
  });
});

/** The longest error message (or param) a bounded echo allows, with room for the sentence around it. */
const BOUND = 600;
const HUGE = "q".repeat(2_000_000);

function rejection(protocol: ProtocolId, body: unknown): GatewayError {
  try {
    builtinCodecs.get(protocol)!.decodeRequest(body);
  } catch (err) {
    expect(err).toBeInstanceOf(GatewayError);
    return err as GatewayError;
  }
  throw new Error(`${protocol}: expected a refusal`);
}

/** A request in each protocol's shape, with `patch` applied to its first message or the body. */
function requestOf(protocol: ProtocolId, patch: { message?: Record<string, unknown>; body?: Record<string, unknown>; part?: Record<string, unknown> }) {
  const content = patch.part ? [patch.part] : "hi";
  const message = { role: "user", content, ...patch.message };
  if (protocol === "openai-responses") return { model: "m", input: [message], ...patch.body };
  if (protocol === "anthropic-messages") return { model: "m", max_tokens: 5, messages: [message], ...patch.body };
  return { model: "m", messages: [message], ...patch.body };
}

/** Valid tools in `protocol`'s shape and a tool_choice naming a tool that is not among them. */
function toolChoiceNaming(protocol: ProtocolId, name: string): Record<string, unknown> {
  switch (protocol) {
    case "openai-chat":
      return { tools: [{ type: "function", function: { name: "f", parameters: {} } }], tool_choice: { type: "function", function: { name } } };
    case "openai-responses":
      return { tools: [{ type: "function", name: "f", parameters: {} }], tool_choice: { type: "function", name } };
    case "anthropic-messages":
      return { tools: [{ name: "f", input_schema: { type: "object" } }], tool_choice: { type: "tool", name } };
  }
}

describe.each(PROTOCOL_IDS)("%s request errors stay short whatever the client sent", (protocol) => {
  const cases: [string, Parameters<typeof requestOf>[1]][] = [
    ["a 2-million-character role", { message: { role: HUGE } }],
    ["a 2-million-character unknown parameter", { body: { [HUGE]: 1 } }],
    ["a 2-million-character content part type", { part: { type: HUGE } }],
    ["a 2-million-character tool_choice name", { body: toolChoiceNaming(protocol, HUGE) }],
    ["a 2-million-character include", { body: { include: [HUGE] } }],
    ["a 2-million-character server tool", { body: { tools: [{ type: HUGE, name: HUGE }] } }],
  ];
  it.each(cases)("%s", (_, patch) => {
    const err = rejection(protocol, requestOf(protocol, patch));
    expect(err.status).toBe(400);
    expect(err.message.length).toBeLessThan(BOUND);
    expect((err.param ?? "").length).toBeLessThan(BOUND);
  });
});

describe("the engine", () => {
  it("quotes a 1 MB model name as a short prefix", async () => {
    const h = engineHarness();
    const a = await h.engine.begin(h.ingress({ model: "m".repeat(1_000_000), messages: [{ role: "user", content: "x" }] })).prepare();
    expect(a.kind).toBe("immediate");
    if (a.kind !== "immediate") return;
    expect(a.error.code).toBe("model_not_found");
    expect(a.error.message).toBe(`The model '${"m".repeat(MAX_ECHO_CHARS)}…' does not exist.`);
  });
});
