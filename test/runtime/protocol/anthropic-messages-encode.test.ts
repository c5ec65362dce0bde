import { describe, expect, it } from "vitest";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import { anthropicMessagesCodec } from "../../../src/protocol/anthropic-messages/index.ts";
import { REQUEST_FEATURES, requestFeatures } from "../../../src/protocol/features.ts";
import type { NeutralMessage, NeutralRequest } from "../../../src/protocol/neutral.ts";
import { openAiChatCodec } from "../../../src/protocol/openai-chat/index.ts";
import { codec, decode, encode, user, assistant, base, neutral, rejectOf, expectInvalid, json, PNG } from "./anthropic-messages-support.ts";

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
