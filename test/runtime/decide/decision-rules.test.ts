import { describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { ConfigValidationError } from "../../../src/config/parse-file.ts";
import type { NeutralMessage, NeutralRequest, ToolDefinition } from "../../../src/protocol/neutral.ts";
import { assistant, compile, entrypoint, image, input, request, RULES_YAML, rules, system, tierIds, tool, user, planRequest } from "./decide-support.ts";

/** The rule a request to entrypoint `ep` matched, and the tiers it planned. */
function decided(ep: string, messages: readonly NeutralMessage[], extra: Partial<NeutralRequest> = {}, headers: Record<string, string> = {}) {
  const plan = planRequest(rules, entrypoint(ep), request(ep, messages, extra), input({ trustedHeaders: new Map(Object.entries(headers)) }));
  return { route: plan.route, tiers: tierIds(plan) };
}
const routeOf = (...args: Parameters<typeof decided>) => decided(...args).route;

/** A user message of exactly `n` characters: with 4 tokens for the message, ceil(n / 4) + 4 tokens. */
const chars = (n: number) => user("x".repeat(n));

describe("keywords", () => {
  it("match a whole word of the last user message, in any case", () => {
    expect(decided("by-keyword", [user("Why does this CODE crash?")])).toEqual({ route: "code", tiers: [["large"], ["small"]] });
    expect(routeOf("by-keyword", [user("code")])).toBe("code");
    expect(routeOf("by-keyword", [user("see the code.")])).toBe("code");
    // Inside another word it is not the keyword.
    expect(routeOf("by-keyword", [user("please decode this")])).toBe("default");
    expect(routeOf("by-keyword", [user("codes of conduct")])).toBe("default");
  });

  it("match a phrase, and keywords spelled with regex characters literally", () => {
    expect(routeOf("by-keyword", [user("here is a stack trace: at main()")])).toBe("code");
    expect(routeOf("by-keyword", [user("the stack is full, trace it")])).toBe("default");
    expect(routeOf("by-keyword", [user("is c++ fast?")])).toBe("code");
    expect(routeOf("by-keyword", [user("is c+ fast?")])).toBe("default");
    expect(routeOf("by-keyword", [user("is ccc fast?")])).toBe("default");
  });

  it("read only the last user message: not earlier turns, the assistant or the system prompt", () => {
    expect(routeOf("by-keyword", [user("fix my code"), assistant("sure"), user("thanks")])).toBe("default");
    expect(routeOf("by-keyword", [user("thanks"), assistant("here is the code")])).toBe("default");
    expect(routeOf("by-keyword", [system("you review code"), user("hello")])).toBe("default");
    // A user turn followed by the assistant's is still the last user message.
    expect(routeOf("by-keyword", [user("hello"), user("my code"), assistant("ok")])).toBe("code");
  });

  it("read the text parts of the last user message joined, past an image between them", () => {
    expect(routeOf("by-keyword", [user("look at this ", image(), "code")])).toBe("code");
  });
});

describe("regex", () => {
  it("tests the configured pattern and flags against the last user message", () => {
    expect(decided("by-regex", [user("Translate this to French")])).toEqual({ route: "translate", tiers: [["small"]] });
    // Anchored at the start, and a word boundary after.
    expect(routeOf("by-regex", [user("please translate this")])).toBe("default");
    expect(routeOf("by-regex", [user("translated already")])).toBe("default");
    expect(routeOf("by-regex", [user("translate x"), assistant("done"), user("and this")])).toBe("default");
  });

  it("sees empty text when there is no user message", () => {
    expect(routeOf("by-regex", [system("translate everything")])).toBe("default");
  });
});

describe("estimated prompt tokens", () => {
  it("promptTokensAbove is strictly above the bound", () => {
    // 384 characters: 96 + 4 = 100 tokens, not above 100; one more character makes 101.
    expect(routeOf("by-tokens", [chars(384)])).toBe("default");
    expect(routeOf("by-tokens", [chars(385)])).toBe("long");
  });

  it("a range holds from just above its lower bound up to and including its upper bound", () => {
    expect(routeOf("by-tokens", [chars(64)])).toBe("default"); // 20
    expect(routeOf("by-tokens", [chars(65)])).toBe("medium"); // 21
    expect(decided("by-tokens", [chars(184)])).toEqual({ route: "medium", tiers: [["small", "large"]] }); // 50
    expect(routeOf("by-tokens", [chars(185)])).toBe("default"); // 51
  });

  it("counts the whole prompt: every message, not just the last user one", () => {
    // Each message alone is 10 + 4 = 14 tokens; together 20 + 8 = 28.
    expect(routeOf("by-tokens", [chars(40)])).toBe("default");
    expect(routeOf("by-tokens", [system("y".repeat(40)), chars(40)])).toBe("medium");
  });

  it("counts images at a fixed cost and tool definitions by their text", () => {
    // "hi": 1 + 4 tokens; two images add 85 each.
    expect(routeOf("by-tokens", [user("hi", image())])).toBe("default"); // 90
    expect(routeOf("by-tokens", [user("hi", image(), image())])).toBe("long"); // 175
    // 2 + 6 (name) + 400 (description) + 2 ("{}") characters: 103 + 4 tokens.
    const wordy: ToolDefinition = { name: "lookup", description: "d".repeat(400) };
    expect(routeOf("by-tokens", [user("hi")], { tools: [wordy] })).toBe("long");
  });

  it("counts the calls an assistant made by their name and arguments", () => {
    const call: NeutralMessage = { role: "assistant", content: [], toolCalls: [{ id: "c1", name: "lookup", arguments: "a".repeat(394) }] };
    // 2 + 6 + 394 = 402 characters: 101 tokens, and 4 for each of the three messages.
    expect(routeOf("by-tokens", [user("hi"), call, { role: "tool", toolCallId: "c1", content: [] }])).toBe("long");
  });
});

describe("tools and images present", () => {
  it("toolsPresent: true needs at least one tool, false needs none", () => {
    expect(decided("by-tools", [user("hi")], { tools: [tool] })).toEqual({ route: "agent", tiers: [["large"]] });
    expect(routeOf("by-tools", [user("hi")])).toBe("chat-only");
    // An empty tool list is no tools.
    expect(routeOf("by-tools", [user("hi")], { tools: [] })).toBe("chat-only");
  });

  it("imagesPresent looks at every message, not only the last", () => {
    expect(decided("by-images", [user("what is this?", image())])).toEqual({ route: "vision", tiers: [["vision"]] });
    expect(routeOf("by-images", [user(image()), assistant("a cat"), user("and its name?")])).toBe("vision");
    expect(routeOf("by-images", [user("no pictures here")])).toBe("default");
  });
});

describe("trusted header", () => {
  it("matches when the header carries one of the listed values, exactly", () => {
    expect(decided("by-header", [user("hi")], {}, { "x-sluice-tier": "gold" })).toEqual({ route: "premium", tiers: [["large"]] });
    expect(routeOf("by-header", [user("hi")], {}, { "x-sluice-tier": "premium" })).toBe("premium");
    expect(routeOf("by-header", [user("hi")], {}, { "x-sluice-tier": "free" })).toBe("default");
    expect(routeOf("by-header", [user("hi")], {}, { "x-sluice-tier": "premium-ish" })).toBe("default");
    expect(routeOf("by-header", [user("hi")])).toBe("default");
  });

  it("is read from the trusted headers only: the prompt saying the header is not the header", () => {
    expect(routeOf("by-header", [user("x-sluice-tier: premium")])).toBe("default");
  });

  it("cannot name a header the bootstrap config does not trust", () => {
    const untrusted = RULES_YAML.replace("{ header: { name: x-sluice-tier, in: [premium, gold] } }", "{ header: { name: x-caller-says, in: [premium] } }");
    expect(untrusted).not.toBe(RULES_YAML);
    let thrown: unknown;
    try {
      compile(untrusted);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ConfigValidationError);
    expect((thrown as ConfigValidationError).issues).toContainEqual(expect.objectContaining({ message: expect.stringContaining('"x-caller-says" is not in gateway.yaml security.trustedHeaders') }));
  });
});

describe("rule order", () => {
  const codeAndTools = [user("review my code")];

  it("takes the first rule that matches, even when later ones match too", () => {
    expect(routeOf("ordered", codeAndTools, { tools: [tool] }, { "x-sluice-tier": "premium" })).toBe("premium");
    expect(decided("ordered", codeAndTools, { tools: [tool] })).toEqual({ route: "code-with-tools", tiers: [["large"], ["small"]] });
  });

  it("needs every condition of a rule to hold", () => {
    // Keyword without tools skips the two-condition rule and lands on the next.
    expect(decided("ordered", codeAndTools)).toEqual({ route: "code", tiers: [["small"], ["large"]] });
    // Tools without the keyword match neither.
    expect(routeOf("ordered", [user("hello")], { tools: [tool] })).toBe("default");
  });

  it("falls back to the entrypoint's default tiers, named \"default\"", () => {
    expect(decided("ordered", [user("hello")])).toEqual({ route: "default", tiers: [["small"], ["large"], ["vision"]] });
    expect(decided("plain", [user("code with a stack trace")], { tools: [tool] }, { "x-sluice-tier": "premium" })).toEqual({ route: "default", tiers: [["small"]] });
  });

  it("is the order of the publication: the same rules reversed decide the other way", () => {
    const doc = parse(RULES_YAML) as { entrypoints: { name: string; routes: unknown[] }[] };
    const ordered = doc.entrypoints.find((e) => e.name === "ordered")!;
    ordered.routes = [ordered.routes[1], ordered.routes[0], ordered.routes[2]];
    const reversed = compile(stringify(doc));
    const ep = entrypoint("ordered", reversed);
    expect(ep.decisions.map((d) => d.name)).toEqual(["code-with-tools", "premium", "code"]);
    const plan = planRequest(reversed, ep, request("ordered", codeAndTools, { tools: [tool] }), input({ trustedHeaders: new Map([["x-sluice-tier", "premium"]]) }));
    expect(plan.route).toBe("code-with-tools");
  });
});
