import { describe, expect, it } from "vitest";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import { anthropicMessagesCodec } from "../../../src/protocol/anthropic-messages/index.ts";
import { REQUEST_FEATURES, requestFeatures } from "../../../src/protocol/features.ts";
import type { NeutralMessage, NeutralRequest } from "../../../src/protocol/neutral.ts";
import { openAiChatCodec } from "../../../src/protocol/openai-chat/index.ts";

const codec = anthropicMessagesCodec;
const decode = (body: unknown): NeutralRequest => codec.decodeRequest(body);
const encode = (req: NeutralRequest, model = "claude-upstream-2025") => codec.encodeRequest(req, model, { streamUsage: true }) as Record<string, unknown>;

const user = (content: unknown) => ({ role: "user", content });
const assistant = (content: unknown) => ({ role: "assistant", content });
const base = (extra: Record<string, unknown> = {}) => ({ model: "public-model", max_tokens: 1024, messages: [user("hi")], ...extra });

/** A minimal neutral request around `messages`. */
const neutral = (messages: NeutralMessage[], extra: Partial<NeutralRequest> = {}): NeutralRequest => ({
  model: "public-model",
  messages,
  stream: false,
  streamUsage: false,
  ...extra,
});

/** Runs `fn`, expecting a GatewayError, and returns it. */
function rejectOf(fn: () => unknown): GatewayError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(GatewayError);
    return err as GatewayError;
  }
  throw new Error("expected a GatewayError, nothing was thrown");
}

function expectInvalid(body: unknown, param: string | undefined): GatewayError {
  const err = rejectOf(() => decode(body));
  expect(err.code).toBe("invalid_request");
  expect(err.status).toBe(400);
  expect(err.source).toBe("client");
  expect(err.param).toBe(param);
  return err;
}

/** Strips keys whose value is undefined, the way a JSON body would. */
const json = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

describe("anthropic-messages codec identity", () => {
  it("names itself, its upstream path and the features it carries", () => {
    expect(codec.id).toBe("anthropic-messages");
    expect(codec.upstreamPath).toBe("/messages");
    expect([...codec.carries].sort()).toEqual([
      "anthropic_service_tier",
      "inference_geo",
      "json_schema",
      "parallel_tool_calls",
      "reasoning_budget",
      "reasoning_effort",
      "speed",
      "stop_sequences",
      "tool_result_error",
      "top_k",
    ]);
    for (const f of ["temperature_above_1", "json_object", "seed", "presence_penalty", "frequency_penalty", "metadata", "verbosity", "openai_service_tier"] as const) {
      expect(codec.carries.has(f), f).toBe(false);
    }
  });

  it("names an Anthropic field for every feature", () => {
    for (const f of REQUEST_FEATURES) expect(codec.paramName(f), f).toMatch(/^[a-z_.]+$/);
    expect(codec.paramName("top_k")).toBe("top_k");
    expect(codec.paramName("reasoning_budget")).toBe("thinking");
    expect(codec.paramName("reasoning_effort")).toBe("output_config.effort");
    expect(codec.paramName("json_schema")).toBe("output_config.format");
    expect(codec.paramName("anthropic_service_tier")).toBe("service_tier");
    expect(codec.paramName("speed")).toBe("speed");
    expect(codec.paramName("inference_geo")).toBe("inference_geo");
    expect(codec.paramName("parallel_tool_calls")).toBe("tool_choice.disable_parallel_tool_use");
    expect(codec.paramName("tool_result_error")).toBe("messages");
    expect(codec.paramName("temperature_above_1")).toBe("temperature");
  });
});

describe("anthropic-messages decodeRequest: messages", () => {
  it("decodes string content, the required max_tokens and the public model name", () => {
    const req = decode(base());
    expect(req.model).toBe("public-model");
    expect(req.maxOutputTokens).toBe(1024);
    expect(req.messages).toEqual([{ role: "user", content: [{ type: "text", text: "hi" }] }]);
    expect(req.stream).toBe(false);
    expect(req.streamUsage).toBe(false);
  });

  it("decodes a system string and system blocks with cache_control (and no system message for an empty one)", () => {
    expect(decode(base({ system: "be terse" })).messages[0]).toEqual({ role: "system", content: [{ type: "text", text: "be terse" }] });
    const req = decode(
      base({
        system: [
          { type: "text", text: "long preamble", cache_control: { type: "ephemeral", ttl: "1h" } },
          { type: "text", text: "per-request", cache_control: null },
          { type: "text", text: "tail", cache_control: { type: "ephemeral" } },
        ],
      }),
    );
    expect(req.messages[0]).toEqual({
      role: "system",
      content: [
        { type: "text", text: "long preamble", cacheControl: { type: "ephemeral", ttl: "1h" } },
        { type: "text", text: "per-request" },
        { type: "text", text: "tail", cacheControl: { type: "ephemeral" } },
      ],
    });
    expect(decode(base({ system: "" })).messages).toHaveLength(1);
    expect(decode(base({ system: [] })).messages).toHaveLength(1);
  });

  it("decodes base64 and url images into image URLs, keeping order and cache_control", () => {
    const req = decode(
      base({
        messages: [
          user([
            { type: "text", text: "what are these?" },
            { type: "image", source: { type: "base64", media_type: "image/png", data: PNG } },
            { type: "image", source: { type: "url", url: "https://example.com/cat.jpg" }, cache_control: { type: "ephemeral" } },
          ]),
        ],
      }),
    );
    expect(req.messages).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "what are these?" },
          { type: "image", url: `data:image/png;base64,${PNG}` },
          { type: "image", url: "https://example.com/cat.jpg", cacheControl: { type: "ephemeral" } },
        ],
      },
    ]);
  });

  it("splits a user message's tool_result blocks into neutral tool messages, its other blocks into a user message after them", () => {
    const req = decode(
      base({
        messages: [
          user("weather and time?"),
          assistant([
            { type: "text", text: "Checking." },
            { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } },
            { type: "tool_use", id: "toolu_2", name: "get_time", input: {} },
          ]),
          user([
            { type: "tool_result", tool_use_id: "toolu_1", content: "sunny" },
            {
              type: "tool_result",
              tool_use_id: "toolu_2",
              is_error: true,
              content: [
                { type: "text", text: "clock broken" },
                { type: "image", source: { type: "base64", media_type: "image/gif", data: "R0lG" } },
              ],
            },
            { type: "text", text: "and be brief" },
          ]),
        ],
      }),
    );
    expect(req.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "weather and time?" }] },
      {
        role: "assistant",
        content: [{ type: "text", text: "Checking." }],
        toolCalls: [
          { id: "toolu_1", name: "get_weather", arguments: '{"city":"Paris"}' },
          { id: "toolu_2", name: "get_time", arguments: "{}" },
        ],
      },
      { role: "tool", toolCallId: "toolu_1", content: [{ type: "text", text: "sunny" }] },
      {
        role: "tool",
        toolCallId: "toolu_2",
        isError: true,
        content: [
          { type: "text", text: "clock broken" },
          { type: "image", url: "data:image/gif;base64,R0lG" },
        ],
      },
      { role: "user", content: [{ type: "text", text: "and be brief" }] },
    ]);
    expect(requestFeatures(req)).toContain("tool_result_error");
  });

  it("moves a tool_result's cache_control onto its last content part; an empty result has none to carry", () => {
    const cc = { type: "ephemeral" };
    const req = decode(
      base({
        messages: [
          user("x"),
          assistant([
            { type: "tool_use", id: "a", name: "f", input: {} },
            { type: "tool_use", id: "b", name: "f", input: {} },
            { type: "tool_use", id: "c", name: "f", input: {} },
          ]),
          user([
            { type: "tool_result", tool_use_id: "a", content: "one", cache_control: cc },
            { type: "tool_result", tool_use_id: "b", content: [{ type: "text", text: "p1" }, { type: "text", text: "p2" }], cache_control: cc },
            { type: "tool_result", tool_use_id: "c", cache_control: cc },
          ]),
        ],
      }),
    );
    expect(req.messages.slice(2)).toEqual([
      { role: "tool", toolCallId: "a", content: [{ type: "text", text: "one", cacheControl: cc }] },
      { role: "tool", toolCallId: "b", content: [{ type: "text", text: "p1" }, { type: "text", text: "p2", cacheControl: cc }] },
      { role: "tool", toolCallId: "c", content: [] },
    ]);
  });

  it("decodes thinking and redacted_thinking history into reasoning parts, and accepts echoed response fields", () => {
    const req = decode(
      base({
        messages: [
          user("2+2?"),
          assistant([
            { type: "thinking", thinking: "add them", signature: "EqQBCkgIARABGAIiQL" },
            { type: "redacted_thinking", data: "EmwKAhgBEgy3va3pzix" },
            { type: "thinking", thinking: "", signature: "EqOmitted" },
            { type: "thinking", thinking: "unsigned", signature: "" },
            // Response blocks sent back as they came: citations null, caller direct.
            { type: "text", text: "4", citations: null },
            { type: "tool_use", id: "toolu_9", name: "calc", input: { x: 2 }, caller: { type: "direct" } },
          ]),
        ],
      }),
    );
    const a = req.messages[1];
    expect(a).toEqual({
      role: "assistant",
      content: [
        { type: "reasoning", text: "add them", signature: "EqQBCkgIARABGAIiQL" },
        { type: "reasoning", text: "", signature: "anthropic-redacted-thinking:EmwKAhgBEgy3va3pzix" },
        { type: "reasoning", text: "", signature: "EqOmitted" },
        { type: "reasoning", text: "unsigned" },
        { type: "text", text: "4" },
      ],
      toolCalls: [{ id: "toolu_9", name: "calc", arguments: '{"x":2}' }],
    });
  });

  it("decodes an assistant prefill string and empty assistant content", () => {
    const req = decode(base({ messages: [user("Answer:"), assistant("The answer is ("), user("go on"), assistant([])] }));
    expect(req.messages[1]).toEqual({ role: "assistant", content: [{ type: "text", text: "The answer is (" }] });
    expect(req.messages[3]).toEqual({ role: "assistant", content: [] });
  });
});

describe("anthropic-messages decodeRequest: parameters", () => {
  const tools = [
    {
      name: "get_weather",
      description: "Weather for a city",
      input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
      cache_control: { type: "ephemeral" },
    },
    { type: "custom", name: "noop", input_schema: { type: "object" }, strict: true },
  ];

  it("decodes client tools, with cache_control and strict", () => {
    expect(decode(base({ tools })).tools).toEqual([
      {
        name: "get_weather",
        description: "Weather for a city",
        parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
        strict: undefined,
        cacheControl: { type: "ephemeral" },
      },
      { name: "noop", description: undefined, parameters: { type: "object" }, strict: true },
    ]);
  });

  it("decodes every tool_choice, and disable_parallel_tool_use into parallelToolCalls", () => {
    const choice = (tool_choice: unknown) => decode(base({ tools, tool_choice }));
    expect(choice({ type: "auto" })).toMatchObject({ toolChoice: { type: "auto" }, parallelToolCalls: undefined });
    expect(choice({ type: "any" }).toolChoice).toEqual({ type: "required" });
    expect(choice({ type: "none" }).toolChoice).toEqual({ type: "none" });
    expect(choice({ type: "tool", name: "noop" }).toolChoice).toEqual({ type: "tool", name: "noop" });
    expect(choice({ type: "auto", disable_parallel_tool_use: true }).parallelToolCalls).toBe(false);
    expect(choice({ type: "any", disable_parallel_tool_use: false }).parallelToolCalls).toBe(true);
    expect(choice({ type: "tool", name: "noop", disable_parallel_tool_use: true })).toMatchObject({
      toolChoice: { type: "tool", name: "noop" },
      parallelToolCalls: false,
    });
    expect(requestFeatures(choice({ type: "auto", disable_parallel_tool_use: true }))).toEqual(["parallel_tool_calls"]);
    expect(decode(base({ tools })).toolChoice).toBeUndefined();
  });

  it("carries sampling, stop sequences, thinking budget, metadata.user_id and streaming", () => {
    const req = decode(
      base({
        temperature: 0.3,
        top_p: 0.9,
        top_k: 40,
        stop_sequences: ["\n\nHuman:", "END"],
        thinking: { type: "enabled", budget_tokens: 2048 },
        metadata: { user_id: "user-123" },
        stream: true,
      }),
    );
    expect(req).toMatchObject({
      temperature: 0.3,
      topP: 0.9,
      topK: 40,
      stop: ["\n\nHuman:", "END"],
      reasoningBudgetTokens: 2048,
      user: "user-123",
      stream: true,
      // Anthropic streams always carry usage.
      streamUsage: true,
    });
    expect(req.metadata).toBeUndefined();
    expect(requestFeatures(req).sort()).toEqual(["reasoning_budget", "stop_sequences", "top_k"]);
    const off = decode(base({ thinking: { type: "disabled" }, metadata: { user_id: null }, stream: false }));
    expect([off.reasoningBudgetTokens, off.user, off.stream, off.streamUsage]).toEqual([undefined, undefined, false, false]);
    expect(decode(base({ metadata: {} })).user).toBeUndefined();
  });
});

describe("anthropic-messages decodeRequest: refusals", () => {
  it("requires max_tokens, naming it, and refuses a non-positive or fractional one", () => {
    const err = expectInvalid({ model: "m", messages: [user("hi")] }, "max_tokens");
    expect(err.message).toContain("Missing required parameter: 'max_tokens'");
    expectInvalid(base({ max_tokens: 0 }), "max_tokens");
    expectInvalid(base({ max_tokens: 1.5 }), "max_tokens");
    const wrong = expectInvalid(base({ max_tokens: "100" }), "max_tokens");
    expect(wrong.message).not.toContain("Missing");
  });

  it("names a missing model or messages, and refuses an empty messages array", () => {
    expectInvalid({ max_tokens: 5, messages: [user("x")] }, "model");
    expectInvalid({ model: "m", max_tokens: 5 }, "messages");
    expectInvalid(base({ messages: [] }), "messages");
  });

  it("refuses an unknown top-level parameter by name", () => {
    for (const p of ["mcp_servers", "context_management", "frobnicate", "max_completion_tokens"]) {
      const err = expectInvalid(base({ [p]: {} }), p);
      expect(err.message).toContain(p);
    }
  });

  it("refuses a server tool, naming the tool and its position", () => {
    const cases = [
      { type: "web_search_20250305", name: "web_search", max_uses: 5 },
      { type: "bash_20250124", name: "bash" },
      { type: "computer_20250124", name: "computer", display_width_px: 1024, display_height_px: 768 },
      { type: "text_editor_20250728", name: "str_replace_based_edit_tool" },
    ];
    for (const tool of cases) {
      const err = expectInvalid(base({ tools: [{ name: "ok", input_schema: { type: "object" } }, tool] }), "tools[1]");
      expect(err.message).toContain(tool.name);
      expect(err.message).toContain(tool.type);
      expect(err.message).toContain("server tool");
    }
  });

  it("refuses bad roles", () => {
    for (const role of ["tool", "developer", "wizard"]) {
      const err = expectInvalid(base({ messages: [user("x"), { role, content: "x" }] }), "messages[1].role");
      expect(err.message).toContain("'user', 'assistant' and 'system'");
    }
    // A system message holds text only.
    expectInvalid(base({ messages: [{ role: "system", content: [{ type: "image", source: { type: "url", url: "https://x/y.png" } }] }, user("x")] }), "messages[0].content[0].type");
    expectInvalid(base({ messages: [{ content: "x" }] }), "messages[0].role");
  });

  it("refuses blocks in the wrong role: tool_use from the user, tool_result or images from the assistant", () => {
    expectInvalid(base({ messages: [user([{ type: "tool_use", id: "t", name: "f", input: {} }])] }), "messages[0].content[0].type");
    expectInvalid(base({ messages: [user("x"), assistant([{ type: "tool_result", tool_use_id: "t" }])] }), "messages[1].content[0].type");
    expectInvalid(
      base({ messages: [user("x"), assistant([{ type: "image", source: { type: "url", url: "https://x/y.png" } }])] }),
      "messages[1].content[0].type",
    );
    expectInvalid(base({ messages: [user([{ type: "thinking", thinking: "x", signature: "s" }])] }), "messages[0].content[0].type");
  });

  it("refuses documents with a clear message, and other unsupported blocks by type", () => {
    const doc = expectInvalid(
      base({ messages: [user([{ type: "document", source: { type: "text", media_type: "text/plain", data: "hello" } }])] }),
      "messages[0].content[0].type",
    );
    expect(doc.message).toContain("document blocks are not supported");
    const inner = expectInvalid(
      base({ messages: [user([{ type: "tool_result", tool_use_id: "t", content: [{ type: "document", source: {} }] }])] }),
      "messages[0].content[0].content[0].type",
    );
    expect(inner.message).toContain("document blocks are not supported");
    const sr = expectInvalid(base({ messages: [user([{ type: "search_result", source: "s", title: "t", content: [] }])] }), "messages[0].content[0].type");
    expect(sr.message).toContain("'search_result'");
    const srv = expectInvalid(
      base({ messages: [user("x"), assistant([{ type: "server_tool_use", id: "s", name: "web_search", input: {} }])] }),
      "messages[1].content[0].type",
    );
    expect(srv.message).toContain("'server_tool_use'");
  });

  it("refuses file image sources, unsupported media types, citations and a server caller", () => {
    expectInvalid(base({ messages: [user([{ type: "image", source: { type: "file", file_id: "file_1" } }])] }), "messages[0].content[0].source.type");
    expectInvalid(
      base({ messages: [user([{ type: "image", source: { type: "base64", media_type: "image/bmp", data: "Qk0" } }])] }),
      "messages[0].content[0].source.media_type",
    );
    const cite = expectInvalid(
      base({ messages: [user("x"), assistant([{ type: "text", text: "y", citations: [{ type: "char_location" }] }])] }),
      "messages[1].content[0].citations",
    );
    expect(cite.message).toContain("citations are not supported");
    expectInvalid(
      base({ messages: [user("x"), assistant([{ type: "tool_use", id: "t", name: "f", input: {}, caller: { type: "code_execution_20250825" } }])] }),
      "messages[1].content[0].caller.type",
    );
  });

  it("names the precise field inside string-or-blocks content", () => {
    const err = expectInvalid(base({ messages: [user([{ type: "text", text: 5 }])] }), "messages[0].content[0].text");
    expect(err.message).not.toContain("Invalid input'");
    expectInvalid(base({ messages: [user([{ type: "text", text: "x", extra: 1 }])] }), "messages[0].content[0].extra");
    expectInvalid(base({ messages: [user([])] }), "messages[0].content");
    expectInvalid(base({ messages: [user(5)] }), "messages[0].content");
  });

  it("refuses out-of-range sampling, unknown thinking types, small budgets and bad tool_choice", () => {
    expectInvalid(base({ temperature: 1.5 }), "temperature");
    expectInvalid(base({ top_p: -0.1 }), "top_p");
    expectInvalid(base({ top_k: 2.5 }), "top_k");
    const unknown = expectInvalid(base({ thinking: { type: "deliberate" } }), "thinking.type");
    expect(unknown.message).toContain("'adaptive'");
    expectInvalid(base({ thinking: { type: "between_tools", display: "omitted" } }), "thinking.display");
    expectInvalid(base({ thinking: { type: "adaptive", display: "full" } }), "thinking.display");
    expectInvalid(base({ thinking: { type: "enabled", budget_tokens: 512 } }), "thinking.budget_tokens");
    expectInvalid(base({ thinking: { type: "enabled" } }), "thinking.budget_tokens");
    expectInvalid(base({ tool_choice: { type: "required" } }), "tool_choice.type");
    expectInvalid(base({ tool_choice: { type: "none", disable_parallel_tool_use: true } }), "tool_choice.disable_parallel_tool_use");
    const t = [{ name: "a", input_schema: {} }];
    const err = expectInvalid(base({ tools: t, tool_choice: { type: "tool", name: "b" } }), "tool_choice.name");
    expect(err.message).toContain("'b'");
    expectInvalid(base({ tools: [{ name: "has space", input_schema: {} }] }), "tools[0].name");
    expectInvalid(base({ tools: [{ name: "f" }] }), "tools[0].input_schema");
    expectInvalid(base({ metadata: { user_id: "u", team: "x" } }), "metadata.team");
  });

  it("rejects a body that is not an object", () => {
    for (const body of [null, "hello", 42, [], undefined]) {
      const err = rejectOf(() => decode(body));
      expect(err.code).toBe("invalid_request");
      expect(err.status).toBe(400);
    }
  });
});

describe("anthropic-messages encodeRequest", () => {
  const full = {
    model: "public-model",
    max_tokens: 2048,
    system: [
      { type: "text", text: "You are terse.", cache_control: { type: "ephemeral", ttl: "1h" } },
      { type: "text", text: "Today is Monday." },
    ],
    messages: [
      user([
        { type: "text", text: "Look at this", cache_control: { type: "ephemeral" } },
        { type: "image", source: { type: "base64", media_type: "image/png", data: PNG } },
        { type: "image", source: { type: "url", url: "https://example.com/a.jpg" } },
      ]),
      assistant([
        { type: "thinking", thinking: "they want weather", signature: "EqSig1" },
        { type: "redacted_thinking", data: "EmwRedacted" },
        { type: "text", text: "Let me check." },
        { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris", days: [1, 2] } },
        { type: "tool_use", id: "toolu_2", name: "get_time", input: {} },
      ]),
      user([
        { type: "tool_result", tool_use_id: "toolu_1", content: "sunny" },
        {
          type: "tool_result",
          tool_use_id: "toolu_2",
          is_error: true,
          content: [
            { type: "text", text: "no clock", cache_control: { type: "ephemeral" } },
            { type: "image", source: { type: "url", url: "https://example.com/clock.png" } },
          ],
        },
        { type: "text", text: "summarize" },
      ]),
      assistant("Sunny; the clock failed."),
      user("thanks"),
    ],
    tools: [
      {
        name: "get_weather",
        description: "Weather",
        input_schema: { type: "object", properties: { city: { type: "string" } } },
        cache_control: { type: "ephemeral" },
      },
      { name: "get_time", input_schema: { type: "object" }, strict: true },
    ],
    tool_choice: { type: "any", disable_parallel_tool_use: true },
    temperature: 0.5,
    top_p: 0.8,
    top_k: 20,
    stop_sequences: ["STOP"],
    thinking: { type: "enabled", budget_tokens: 1500 },
    metadata: { user_id: "u-1" },
    stream: true,
  };

  it("round-trips every carried field Anthropic → neutral → Anthropic, with the upstream model id", () => {
    const wire = json(encode(decode(full), "claude-provider-v4"));
    expect(wire).toEqual({ ...full, model: "claude-provider-v4" });
    expect(JSON.stringify(wire)).not.toContain("public-model");
  });

  it("decode → encode → decode is a fixed point of the neutral request (except the model)", () => {
    const req = decode(full);
    expect(json(decode(json(encode(req, "public-model"))))).toEqual(json(req));
  });

  it("encodes the simple forms: string system, string content, no stream, no tool_choice", () => {
    const wire = json(encode(decode(base({ system: "sys", messages: [user("hi"), assistant("hello"), user("bye")] }))));
    expect(wire).toEqual({
      model: "claude-upstream-2025",
      max_tokens: 1024,
      system: "sys",
      messages: [user("hi"), assistant("hello"), user("bye")],
    });
  });

  it("hoists system and developer messages, wherever they stand, into top-level system blocks in order", () => {
    const wire = encode(
      neutral([
        { role: "system", content: [{ type: "text", text: "one" }] },
        { role: "user", content: [{ type: "text", text: "hi" }] },
        { role: "developer", content: [{ type: "text", text: "two", cacheControl: { type: "ephemeral" } }] },
        { role: "user", content: [{ type: "text", text: "again" }] },
      ]),
    );
    expect(wire.system).toEqual([
      { type: "text", text: "one" },
      { type: "text", text: "two", cache_control: { type: "ephemeral" } },
    ]);
    expect(wire.messages).toEqual([user("hi"), user("again")]);
  });

  it("groups consecutive tool messages into one user message of tool_result blocks, joined by the next user message", () => {
    const wire = encode(
      neutral([
        { role: "user", content: [{ type: "text", text: "go" }] },
        { role: "assistant", content: [], toolCalls: [{ id: "a", name: "f", arguments: '{"n":1}' }, { id: "b", name: "f", arguments: "" }] },
        { role: "tool", toolCallId: "a", content: [{ type: "text", text: "r1" }] },
        { role: "tool", toolCallId: "b", content: [], isError: false },
        { role: "user", content: [{ type: "text", text: "next" }] },
        { role: "assistant", content: [], toolCalls: [{ id: "c", name: "f", arguments: "{}" }] },
        { role: "tool", toolCallId: "c", content: [{ type: "text", text: "r3" }] },
        { role: "assistant", content: [{ type: "text", text: "done" }] },
      ]),
    );
    expect(wire.messages).toEqual([
      user("go"),
      assistant([
        { type: "tool_use", id: "a", name: "f", input: { n: 1 } },
        // Empty arguments are a call without arguments.
        { type: "tool_use", id: "b", name: "f", input: {} },
      ]),
      user([
        { type: "tool_result", tool_use_id: "a", content: "r1" },
        { type: "tool_result", tool_use_id: "b", is_error: false },
        { type: "text", text: "next" },
      ]),
      assistant([{ type: "tool_use", id: "c", name: "f", input: {} }]),
      user([{ type: "tool_result", tool_use_id: "c", content: "r3" }]),
      assistant("done"),
    ]);
  });

  it("encodes an OpenAI Chat request (decoded by that codec) for an Anthropic backend", () => {
    const req = openAiChatCodec.decodeRequest({
      model: "public-model",
      messages: [
        { role: "system", content: "be terse" },
        {
          role: "user",
          content: [
            { type: "text", text: "see" },
            { type: "image_url", image_url: { url: "data:image/jpeg;base64,/9j/4AAQ", detail: "high" } },
          ],
        },
        { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "lookup", arguments: '{"q":"x"}' } }] },
        { role: "tool", tool_call_id: "call_1", content: "found" },
      ],
      tools: [{ type: "function", function: { name: "lookup", parameters: { type: "object" } } }, { type: "function", function: { name: "ping" } }],
      tool_choice: "required",
      parallel_tool_calls: false,
      stop: "END",
      user: "u-9",
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(json(encode(req))).toEqual({
      model: "claude-upstream-2025",
      // Anthropic requires max_tokens: the documented default.
      max_tokens: 4096,
      system: "be terse",
      messages: [
        user([
          { type: "text", text: "see" },
          { type: "image", source: { type: "base64", media_type: "image/jpeg", data: "/9j/4AAQ" } },
        ]),
        assistant([{ type: "tool_use", id: "call_1", name: "lookup", input: { q: "x" } }]),
        user([{ type: "tool_result", tool_use_id: "call_1", content: "found" }]),
      ],
      tools: [
        { name: "lookup", input_schema: { type: "object" } },
        { name: "ping", input_schema: { type: "object", properties: {} } },
      ],
      tool_choice: { type: "any", disable_parallel_tool_use: true },
      stop_sequences: ["END"],
      metadata: { user_id: "u-9" },
      stream: true,
    });
  });

  it("defaults max_tokens to 4096 plus the thinking budget, and keeps an explicit one", () => {
    const msgs: NeutralMessage[] = [{ role: "user", content: [{ type: "text", text: "x" }] }];
    expect(encode(neutral(msgs)).max_tokens).toBe(4096);
    expect(encode(neutral(msgs, { reasoningBudgetTokens: 8000 }))).toMatchObject({ max_tokens: 12096, thinking: { type: "enabled", budget_tokens: 8000 } });
    expect(encode(neutral(msgs, { maxOutputTokens: 10, reasoningBudgetTokens: 8000 })).max_tokens).toBe(10);
  });

  it("carries parallelToolCalls inside tool_choice: auto when none was given, nothing for 'none' or without tools", () => {
    const msgs: NeutralMessage[] = [{ role: "user", content: [{ type: "text", text: "x" }] }];
    const tools = [{ name: "f" }];
    expect(encode(neutral(msgs, { tools, parallelToolCalls: false })).tool_choice).toEqual({ type: "auto", disable_parallel_tool_use: true });
    expect(encode(neutral(msgs, { tools, parallelToolCalls: true })).tool_choice).toBeUndefined();
    expect(encode(neutral(msgs, { tools, toolChoice: { type: "auto" }, parallelToolCalls: true })).tool_choice).toEqual({
      type: "auto",
      disable_parallel_tool_use: false,
    });
    expect(encode(neutral(msgs, { tools, toolChoice: { type: "none" }, parallelToolCalls: false })).tool_choice).toEqual({ type: "none" });
    expect(encode(neutral(msgs, { tools, toolChoice: { type: "tool", name: "f" } })).tool_choice).toEqual({ type: "tool", name: "f" });
    expect(encode(neutral(msgs, { parallelToolCalls: false }))).not.toHaveProperty("tool_choice");
  });

  it("drops reasoning without a signature, and reasoning outside assistant messages", () => {
    const wire = encode(
      neutral([
        { role: "user", content: [{ type: "text", text: "q" }, { type: "reasoning", text: "stray" }] },
        {
          role: "assistant",
          content: [
            { type: "reasoning", text: "from an OpenAI-compatible server" },
            { type: "reasoning", text: "", signature: "" },
            { type: "reasoning", text: "signed", signature: "EqSig" },
            { type: "text", text: "a" },
          ],
        },
      ]),
    );
    expect(wire.messages).toEqual([
      user("q"),
      assistant([
        { type: "thinking", thinking: "signed", signature: "EqSig" },
        { type: "text", text: "a" },
      ]),
    ]);
  });

  it("omits empty text blocks and messages left empty, which Anthropic refuses", () => {
    const wire = encode(
      neutral([
        { role: "system", content: [{ type: "text", text: "" }] },
        { role: "user", content: [{ type: "text", text: "" }] },
        { role: "user", content: [{ type: "text", text: "real" }, { type: "text", text: "" }] },
        { role: "assistant", content: [] },
      ]),
    );
    expect(wire).not.toHaveProperty("system");
    expect(wire.messages).toEqual([user("real")]);
  });

  it("refuses tool-call arguments that are not a JSON object, naming the message", () => {
    for (const args of ["{not json", "[1,2]", '"str"', "null"]) {
      const err = rejectOf(() =>
        encode(
          neutral([
            { role: "user", content: [{ type: "text", text: "x" }] },
            { role: "assistant", content: [], toolCalls: [{ id: "call_bad", name: "f", arguments: args }] },
          ]),
        ),
      );
      expect(err.code, args).toBe("invalid_request");
      expect(err.param).toBe("messages[1]");
      expect(err.message).toContain("call_bad");
    }
  });

  it("refuses images Anthropic cannot take: non-base64 data URLs, other schemes, images in system or assistant messages", () => {
    const img = (url: string, role: "user" | "system" | "assistant" = "user"): NeutralMessage[] => [{ role, content: [{ type: "image", url }] } as NeutralMessage];
    for (const url of ["data:image/svg+xml,%3Csvg%3E", "ftp://example.com/a.png"]) {
      expect(rejectOf(() => encode(neutral(img(url)))).param, url).toBe("messages[0]");
    }
    expect(rejectOf(() => encode(neutral(img("https://x/y.png", "system")))).param).toBe("messages[0]");
    expect(rejectOf(() => encode(neutral(img("https://x/y.png", "assistant")))).param).toBe("messages[0]");
    expect(encode(neutral(img("http://example.com/a.png"))).messages).toEqual([
      user([{ type: "image", source: { type: "url", url: "http://example.com/a.png" } }]),
    ]);
  });

  it("leaves out what Anthropic does not carry: message names, image detail, other protocols' features", () => {
    const wire = encode(
      neutral([{ role: "user", name: "alice", content: [{ type: "image", url: "https://x/y.png", detail: "low" }] }], {
        seed: 1,
        presencePenalty: 0.5,
        frequencyPenalty: 0.5,
        responseFormat: { type: "text" },
        metadata: { k: "v" },
        verbosity: "low",
        openAiServiceTier: "flex",
        promptCacheKey: "k",
        promptCacheRetention: "24h",
      }),
    );
    expect(json(wire)).toEqual({
      model: "claude-upstream-2025",
      max_tokens: 4096,
      messages: [user([{ type: "image", source: { type: "url", url: "https://x/y.png" } }])],
    });
  });
});
