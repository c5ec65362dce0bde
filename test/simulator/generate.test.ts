/**
 * The format-neutral core and knob parsing, without HTTP.
 */

import { describe, expect, it } from "vitest";
import { applyStopSequences, conversationHash, countPromptTokens, generate, splitPieces, textTokens, VOCABULARY } from "../../simulator/generate.ts";
import { BASE_KNOBS, KnobError, resolveRequestKnobs, resolveSettings } from "../../simulator/knobs.ts";
import { buildArguments, placeholderFor } from "../../simulator/tool-arguments.ts";
import type { GenerationRequest } from "../../simulator/wire-format.ts";

function request(overrides: Partial<GenerationRequest> = {}): GenerationRequest {
  return {
    model: "m",
    messages: [{ role: "user", text: "hello", media: 0 }],
    tools: [],
    toolChoice: { type: "auto" },
    maxTokens: undefined,
    stream: false,
    streamUsage: false,
    directiveText: "hello",
    ...overrides,
  };
}

describe("prompt token rule", () => {
  it("is 3 + per message (4 + ceil(chars/4) + 85 per media part) + tools", () => {
    expect(countPromptTokens({ messages: [], tools: [] })).toBe(3);
    expect(countPromptTokens({ messages: [{ role: "user", text: "12345", media: 0 }], tools: [] })).toBe(3 + 4 + 2);
    expect(countPromptTokens({ messages: [{ role: "user", text: "", media: 2 }], tools: [] })).toBe(3 + 4 + 170);
    const tool = { name: "f", description: undefined, parameters: { type: "object" } };
    const declared = JSON.stringify({ name: "f", parameters: { type: "object" } }).length;
    expect(countPromptTokens({ messages: [], tools: [tool] })).toBe(3 + Math.ceil(declared / 4));
  });
});

describe("text", () => {
  it("is drawn from the vocabulary, one word per token, shorter outputs being prefixes", () => {
    const long = textTokens(42, 20, true);
    const short = textTokens(42, 5, false);
    expect(long.slice(0, 5)).toEqual(short);
    expect(long.at(-1)?.endsWith(".")).toBe(true);
    for (const token of long.slice(1)) {
      expect(token.startsWith(" ")).toBe(true);
      expect(VOCABULARY).toContain(token.trim().replace(/\.$/, ""));
    }
    expect(VOCABULARY).toContain(long[0]?.toLowerCase());
  });

  it("seeds from roles and texts only", () => {
    const a = conversationHash([{ role: "user", text: "ab", media: 0 }, { role: "user", text: "c", media: 0 }]);
    const b = conversationHash([{ role: "user", text: "a", media: 0 }, { role: "user", text: "bc", media: 0 }]);
    const c = conversationHash([{ role: "system", text: "ab", media: 0 }, { role: "user", text: "c", media: 0 }]);
    expect(new Set([a, b, c]).size).toBe(3);
    expect(conversationHash([{ role: "user", text: "ab", media: 0 }, { role: "user", text: "c", media: 0 }])).toBe(a);
  });
});

describe("generate", () => {
  it("counts reasoning inside the cap and clamps cached tokens to the prompt", () => {
    const knobs = { ...BASE_KNOBS, tokens: 10, reasoningTokens: 4, cachedTokens: 1000 };
    const capped = generate(request({ maxTokens: 8 }), knobs, 1, false);
    expect(capped.tokens).toHaveLength(4);
    expect(capped.finish).toBe("length");
    // Prompt: 3 + 4 + ceil(5 / 4) = 9.
    expect(capped.usage).toEqual({ promptTokens: 9, completionTokens: 8, cachedTokens: 9, reasoningTokens: 4 });

    const free = generate(request(), knobs, 1, false);
    expect(free.finish).toBe("stop");
    expect(free.usage?.completionTokens).toBe(14);
    expect(generate(request(), knobs, 1, true).usage).toBeUndefined();
  });

  it("produces an empty stop for tokens=0", () => {
    const out = generate(request(), { ...BASE_KNOBS, tokens: 0 }, 1, false);
    expect(out.tokens).toEqual([]);
    expect(out.finish).toBe("stop");
    expect(out.usage?.completionTokens).toBe(0);
  });

  it("echoes the last user message without its directives, in pieces of echo-chars characters", () => {
    const text = "Mail [EMAIL_1] today [[sim echo-chars=3]]";
    const out = generate(request({ messages: [{ role: "user", text: "earlier", media: 0 }, { role: "assistant", text: "ok", media: 0 }, { role: "user", text, media: 0 }], directiveText: text }), { ...BASE_KNOBS, echoChars: 3 }, 1, false);
    expect(out.tokens).toEqual(["Mai", "l [", "EMA", "IL_", "1] ", "tod", "ay"]);
    expect(out.finish).toBe("stop");
    expect(out.usage?.completionTokens).toBe(7);
    const capped = generate(request({ messages: [{ role: "user", text, media: 0 }], maxTokens: 2 }), { ...BASE_KNOBS, echoChars: 3 }, 1, false);
    expect(capped.tokens).toEqual(["Mai", "l ["]);
    expect(capped.finish).toBe("length");
  });

  it("calls a tool only when tools were declared", () => {
    const tool = { name: "f", description: undefined, parameters: { type: "object", properties: { a: { type: "string" } }, required: ["a"] } };
    expect(generate(request(), { ...BASE_KNOBS, tool: "f" }, 1, false).toolCall).toBeUndefined();
    const out = generate(request({ tools: [tool], toolChoice: { type: "required" } }), BASE_KNOBS, 1, false);
    expect(out.toolCall?.arguments).toBe('{"a":"sample"}');
    expect(out.toolCall?.pieces).toEqual(splitPieces('{"a":"sample"}'));
    expect(out.finish).toBe("tool");
    expect(out.usage?.completionTokens).toBe(4);
    expect(generate(request({ tools: [tool], toolChoice: { type: "none" } }), BASE_KNOBS, 1, false).toolCall).toBeUndefined();
  });
});

describe("tool arguments", () => {
  it("fills required properties with type-appropriate placeholders", () => {
    const schema = {
      type: "object",
      properties: {
        s: { type: "string" },
        n: { type: "number" },
        i: { type: "integer", minimum: 5 },
        b: { type: "boolean" },
        e: { enum: ["x", "y"] },
        c: { const: 7 },
        d: { type: "string", default: "dflt" },
        u: { anyOf: [{ type: "null" }, { type: "integer" }] },
        t: { type: ["null", "boolean"] },
        arr: { type: "array", items: { type: "string" }, minItems: 1 },
        empty: { type: "array", items: { type: "string" } },
        obj: { type: "object", properties: { deep: { type: "string" }, skip: { type: "string" } }, required: ["deep"] },
        optional: { type: "string" },
      },
      required: ["s", "n", "i", "b", "e", "c", "d", "u", "t", "arr", "empty", "obj"],
    };
    expect(JSON.parse(buildArguments(schema))).toEqual({
      s: "sample",
      n: 1,
      i: 5,
      b: true,
      e: "x",
      c: 7,
      d: "dflt",
      u: 1,
      t: true,
      arr: ["sample"],
      empty: [],
      obj: { deep: "sample" },
    });
    expect(buildArguments(undefined)).toBe("{}");
    expect(placeholderFor({ type: "null" })).toBeNull();
  });
});

describe("knobs", () => {
  it("layers directives then headers over the base, and returns the base untouched when none", () => {
    expect(resolveRequestKnobs(BASE_KNOBS, "plain", {})).toBe(BASE_KNOBS);
    const knobs = resolveRequestKnobs(BASE_KNOBS, "x [[sim tokens=3 fault=omit-usage]] y [[sim status=429]]", {
      "x-sim-tokens": "9",
      "x-sim-fault": "none",
    });
    expect(knobs).toMatchObject({ tokens: 9, fault: undefined, status: 429 });
  });

  it("rejects unknown names and bad values", () => {
    expect(() => resolveRequestKnobs(BASE_KNOBS, "[[sim nope=1]]", {})).toThrow(KnobError);
    expect(() => resolveRequestKnobs(BASE_KNOBS, "[[sim tokens]]", {})).toThrow(/key=value/);
    expect(() => resolveRequestKnobs(BASE_KNOBS, "", { "x-sim-status": "200" })).toThrow(/4xx or 5xx/);
    expect(() => resolveSettings(BASE_KNOBS, { latencyMs: -1 })).toThrow(KnobError);
    expect(resolveSettings(BASE_KNOBS, { latencyMs: 5, "cut-after": "2" })).toMatchObject({ latencyMs: 5, cutAfter: 2 });
  });
});

describe("stop sequences", () => {
  const tokens = ["Alpha", " beta", " gamma", " delta."];

  it("ends the text before the earliest match and counts the tokens up to the match's end", () => {
    expect(applyStopSequences(tokens, [" gam"])).toEqual({ tokens: ["Alpha", " beta"], consumed: 3, sequence: " gam" });
    // A match inside a token keeps that token's prefix; the earliest match wins over list order.
    expect(applyStopSequences(tokens, ["delta", "ta g"])).toEqual({ tokens: ["Alpha", " be"], consumed: 3, sequence: "ta g" });
    expect(applyStopSequences(tokens, ["Al"])).toEqual({ tokens: [], consumed: 1, sequence: "Al" });
    expect(applyStopSequences(tokens, ["zeta", ""])).toBeUndefined();
  });

  it("gives finish stop_sequence in generate, and reasoning words only when asked", () => {
    const knobs = { ...BASE_KNOBS, tokens: 4, reasoningTokens: 2 };
    const plain = generate(request(), knobs, 7, false);
    const second = plain.tokens[1] ?? "";
    const stopped = generate(request({ stopSequences: [second] }), knobs, 7, false);
    expect(stopped.finish).toBe("stop_sequence");
    expect(stopped.stopSequence).toBe(second);
    expect(stopped.tokens).toEqual(plain.tokens.slice(0, 1));
    expect(stopped.usage?.completionTokens).toBe(2 + 2);
    expect(plain.reasoning).toEqual([]);
    const shown = generate(request({ reasoningText: true }), knobs, 7, false);
    expect(shown.reasoning).toHaveLength(2);
    expect(shown.reasoning).not.toEqual(shown.tokens.slice(0, 2));
  });
});
