import { describe, expect, it } from "vitest";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import { anthropicMessagesCodec } from "../../../src/protocol/anthropic-messages/index.ts";
import { REQUEST_FEATURES, requestFeatures } from "../../../src/protocol/features.ts";
import type { NeutralMessage, NeutralRequest } from "../../../src/protocol/neutral.ts";
import { openAiChatCodec } from "../../../src/protocol/openai-chat/index.ts";
import { codec, decode, encode, user, assistant, base, neutral, rejectOf, expectInvalid, json, PNG } from "./anthropic-messages-support.ts";

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
