import { describe, expect, it } from "vitest";
import { REQUEST_FEATURES, requestFeatures } from "../../../src/protocol/features.ts";
import type { NeutralRequest } from "../../../src/protocol/neutral.ts";
import { openAiResponsesCodec } from "../../../src/protocol/openai-responses/index.ts";
import { invalidRequestOf, json } from "./error-helpers.ts";

const decode = (body: unknown): NeutralRequest => openAiResponsesCodec.decodeRequest(body);
const encode = (req: NeutralRequest, model = "gpt-upstream-2025") =>
  openAiResponsesCodec.encodeRequest(req, model, { streamUsage: true }) as Record<string, unknown>;

const base = (extra: Record<string, unknown> = {}) => ({ model: "public-model", input: "hi", ...extra });
const neutral = (extra: Partial<NeutralRequest> = {}): NeutralRequest => ({
  model: "public-model",
  messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
  stream: false,
  streamUsage: false,
  ...extra,
});


const expectInvalid = invalidRequestOf(decode);

describe("openai-responses decodeRequest: input", () => {
  it("turns a string input into one user message and keeps the public model name", () => {
    const req = decode(base());
    expect(req.model).toBe("public-model");
    expect(req.messages).toEqual([{ role: "user", content: [{ type: "text", text: "hi" }] }]);
    expect(req.stream).toBe(false);
    expect(req.streamUsage).toBe(false);
  });

  it("puts instructions first as a system message, before the input", () => {
    const req = decode(base({ instructions: "Be terse.", input: [{ role: "developer", content: "dev note" }, { role: "user", content: "q" }] }));
    expect(req.messages).toEqual([
      { role: "system", content: [{ type: "text", text: "Be terse." }] },
      { role: "developer", content: [{ type: "text", text: "dev note" }] },
      { role: "user", content: [{ type: "text", text: "q" }] },
    ]);
  });

  it("decodes message items with and without type, text and image parts in order, detail kept", () => {
    const req = decode(
      base({
        input: [
          { role: "system", content: [{ type: "input_text", text: "sys" }] },
          {
            type: "message",
            role: "user",
            content: [
              { type: "input_text", text: "what is this?" },
              { type: "input_image", image_url: "https://example.com/cat.png", detail: "high" },
              { type: "input_image", image_url: "data:image/png;base64,AAAA" },
              { type: "input_text", text: "and this?" },
            ],
          },
        ],
      }),
    );
    expect(json(req.messages)).toEqual([
      { role: "system", content: [{ type: "text", text: "sys" }] },
      {
        role: "user",
        content: [
          { type: "text", text: "what is this?" },
          { type: "image", url: "https://example.com/cat.png", detail: "high" },
          { type: "image", url: "data:image/png;base64,AAAA" },
          { type: "text", text: "and this?" },
        ],
      },
    ]);
  });

  it("groups a replayed assistant turn (reasoning, message, function calls) into one neutral message; outputs become tool messages", () => {
    const req = decode(
      base({
        input: [
          { role: "user", content: "weather in Paris and the time?" },
          { type: "reasoning", id: "rs_1", summary: [{ type: "summary_text", text: "Need two tools." }, { type: "summary_text", text: "Call both." }], encrypted_content: "gAAAA-opaque" },
          { type: "message", id: "msg_1", status: "completed", role: "assistant", content: [{ type: "output_text", text: "Checking.", annotations: [], logprobs: [] }] },
          { type: "function_call", id: "fc_1", call_id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}', status: "completed" },
          { type: "function_call", call_id: "call_2", name: "get_time", arguments: "{}" },
          { type: "function_call_output", call_id: "call_1", output: "sunny" },
          { type: "function_call_output", call_id: "call_2", output: [{ type: "input_text", text: "noon" }] },
          { role: "assistant", content: "Sunny at noon." },
        ],
      }),
    );
    expect(req.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "weather in Paris and the time?" }] },
      {
        role: "assistant",
        content: [
          { type: "reasoning", text: "Need two tools.\n\nCall both." },
          { type: "text", text: "Checking." },
        ],
        toolCalls: [
          { id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' },
          { id: "call_2", name: "get_time", arguments: "{}" },
        ],
      },
      { role: "tool", toolCallId: "call_1", content: [{ type: "text", text: "sunny" }] },
      { role: "tool", toolCallId: "call_2", content: [{ type: "text", text: "noon" }] },
      { role: "assistant", content: [{ type: "text", text: "Sunny at noon." }], toolCalls: undefined },
    ]);
    // The opaque encrypted reasoning goes nowhere.
    expect(JSON.stringify(req)).not.toContain("gAAAA-opaque");
  });

  it("keeps the produced order: a message after a call starts a new assistant turn; two messages stay two", () => {
    const req = decode(
      base({
        input: [
          { role: "user", content: "x" },
          { type: "function_call", call_id: "c1", name: "f", arguments: "{}" },
          { role: "assistant", content: "after the call" },
          { role: "assistant", content: [{ type: "refusal", refusal: "I can't." }] },
        ],
      }),
    );
    expect(req.messages.slice(1)).toEqual([
      { role: "assistant", content: [], toolCalls: [{ id: "c1", name: "f", arguments: "{}" }] },
      { role: "assistant", content: [{ type: "text", text: "after the call" }], toolCalls: undefined },
      { role: "assistant", content: [{ type: "text", text: "I can't." }], toolCalls: undefined },
    ]);
  });

  it("drops a turn of replayed reasoning alone; falls back to reasoning_text when there is no summary", () => {
    expect(
      decode(base({ input: [{ role: "user", content: "x" }, { type: "reasoning", id: "rs_1", summary: [] }, { role: "user", content: "y" }] })).messages,
    ).toEqual([
      { role: "user", content: [{ type: "text", text: "x" }] },
      { role: "user", content: [{ type: "text", text: "y" }] },
    ]);
    const req = decode(
      base({ input: [{ type: "reasoning", summary: [], content: [{ type: "reasoning_text", text: "raw" }] }, { role: "assistant", content: "a" }] }),
    );
    expect(req.messages).toEqual([{ role: "assistant", content: [{ type: "reasoning", text: "raw" }, { type: "text", text: "a" }], toolCalls: undefined }]);
  });

  it("decodes function_call_output with image parts and an empty string output", () => {
    const req = decode(
      base({
        input: [
          { type: "function_call_output", call_id: "c1", output: [{ type: "input_text", text: "chart:" }, { type: "input_image", image_url: "data:image/png;base64,QQ==", detail: "low" }] },
          { type: "function_call_output", call_id: "c2", output: "" },
        ],
      }),
    );
    expect(req.messages).toEqual([
      { role: "tool", toolCallId: "c1", content: [{ type: "text", text: "chart:" }, { type: "image", url: "data:image/png;base64,QQ==", detail: "low" }] },
      { role: "tool", toolCallId: "c2", content: [] },
    ]);
  });
});

describe("openai-responses decodeRequest: parameters", () => {
  it("decodes every carried parameter", () => {
    const req = decode(
      base({
        stream: true,
        stream_options: { include_obfuscation: false },
        max_output_tokens: 256,
        temperature: 1.5,
        top_p: 0.9,
        parallel_tool_calls: false,
        tools: [
          { type: "function", name: "get_weather", description: "Weather by city", parameters: { type: "object", properties: { city: { type: "string" } } }, strict: true },
          { type: "function", name: "noop", parameters: null, strict: null, description: null },
        ],
        tool_choice: { type: "function", name: "get_weather" },
        text: { format: { type: "json_schema", name: "answer", schema: { type: "object" }, strict: true, description: "The answer" } },
        reasoning: { effort: "low", summary: "auto" },
        metadata: { team: "search" },
        user: "end-user-1",
        store: false,
        truncation: "disabled",
        include: [],
        background: false,
        previous_response_id: null,
        conversation: null,
      }),
    );
    expect(req).toEqual({
      model: "public-model",
      messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
      tools: [
        { name: "get_weather", description: "Weather by city", parameters: { type: "object", properties: { city: { type: "string" } } }, strict: true },
        { name: "noop", description: undefined, parameters: undefined, strict: undefined },
      ],
      toolChoice: { type: "tool", name: "get_weather" },
      parallelToolCalls: false,
      maxOutputTokens: 256,
      temperature: 1.5,
      topP: 0.9,
      responseFormat: { type: "json_schema", name: "answer", schema: { type: "object" }, strict: true, description: "The answer" },
      reasoningEffort: "low",
      metadata: { team: "search" },
      user: "end-user-1",
      stream: true,
      streamUsage: true,
    });
    expect(requestFeatures(req).sort()).toEqual(["json_schema", "metadata", "parallel_tool_calls", "reasoning_effort", "temperature_above_1"]);
  });

  it("decodes the string tool choices and the json_object / text formats", () => {
    for (const c of ["auto", "none", "required"] as const) expect(decode(base({ tool_choice: c })).toolChoice).toEqual({ type: c });
    expect(decode(base({ text: { format: { type: "json_object" } } })).responseFormat).toEqual({ type: "json_object" });
    expect(decode(base({ text: { format: { type: "text" } } })).responseFormat).toEqual({ type: "text" });
    expect(decode(base({ text: {} })).responseFormat).toBeUndefined();
  });

  it("treats null like absent for nullable parameters", () => {
    const req = decode(
      base({ temperature: null, top_p: null, max_output_tokens: null, parallel_tool_calls: null, metadata: null, instructions: null, reasoning: null, store: null, stream: null }),
    );
    expect(json(req)).toEqual({ model: "public-model", messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }], stream: false, streamUsage: false });
  });
});

describe("openai-responses decodeRequest: refusals name the parameter", () => {
  it("refuses store: true (stateless only)", () => {
    const err = expectInvalid(base({ store: true }), "store");
    expect(err.message).toContain("stored responses are not supported");
  });

  it("refuses previous_response_id and conversation", () => {
    expect(expectInvalid(base({ previous_response_id: "resp_abc" }), "previous_response_id").message).toContain("stored responses are not supported");
    expect(expectInvalid(base({ conversation: "conv_1" }), "conversation").message).toContain("stored conversations are not supported");
    expectInvalid(base({ conversation: { id: "conv_1" } }), "conversation");
  });

  it("refuses background, truncation auto, and any include value but encrypted reasoning", () => {
    expect(expectInvalid(base({ background: true }), "background").message).toContain("background responses are not supported");
    expect(expectInvalid(base({ truncation: "auto" }), "truncation").message).toContain("'disabled'");
    // Stateless clients always ask for encrypted reasoning; it is accepted and none is returned.
    expect(decode(base({ include: ["reasoning.encrypted_content"] })).model).toBe("public-model");
    expect(expectInvalid(base({ include: ["reasoning.encrypted_content", "message.output_text.logprobs"] }), "include[1]").message).toContain(
      "'message.output_text.logprobs'",
    );
  });

  it("refuses built-in tools, naming the tool", () => {
    for (const tool of ["web_search", "file_search", "code_interpreter", "computer_use_preview", "mcp", "image_generation", "custom"]) {
      const err = expectInvalid(base({ tools: [{ type: "function", name: "ok", parameters: {} }, { type: tool }] }), "tools[1].type");
      expect(err.message).toContain(`'${tool}'`);
    }
  });

  it("refuses unknown parameters by name, at the top level and inside objects", () => {
    expect(expectInvalid(base({ top_logprobs: 2 }), "top_logprobs").message).toBe("Unrecognized request argument supplied: top_logprobs");
    expectInvalid(base({ prompt_cache_options: { mode: "explicit" } }), "prompt_cache_options");
    expectInvalid(base({ seed: 1 }), "seed");
    expectInvalid(base({ tools: [{ type: "function", name: "f", parameters: {}, defer_loading: true }] }), "tools[0].defer_loading");
    expectInvalid(base({ input: [{ role: "user", content: "x", name: "alice" }] }), "input[0].name");
    expectInvalid(base({ text: { format: { type: "text" }, extra: 1 } }), "text.extra");
  });

  it("refuses file_id images, files and audio, and parts in the wrong role", () => {
    const err = expectInvalid(base({ input: [{ role: "user", content: [{ type: "input_image", file_id: "file-abc", detail: "auto" }] }] }), "input[0].content[0].file_id");
    expect(err.message).toContain("file_id images are not supported");
    expect(expectInvalid(base({ input: [{ role: "user", content: [{ type: "input_file", file_id: "file-abc" }] }] }), "input[0].content[0].type").message).toContain("input_file");
    expectInvalid(base({ input: [{ role: "user", content: [{ type: "input_audio", input_audio: {} }] }] }), "input[0].content[0].type");
    expectInvalid(base({ input: [{ role: "assistant", content: [{ type: "input_text", text: "x" }] }] }), "input[0].content[0].type");
    expectInvalid(base({ input: [{ role: "system", content: [{ type: "input_image", image_url: "https://x/y.png" }] }] }), "input[0].content[0].type");
  });

  it("refuses stored item references and unsupported item types", () => {
    expect(expectInvalid(base({ input: [{ type: "item_reference", id: "msg_1" }] }), "input[0].type").message).toContain("stored items cannot be referenced");
    expect(expectInvalid(base({ input: [{ role: "user", content: "x" }, { type: "web_search_call", id: "ws_1" }] }), "input[1].type").message).toContain("'web_search_call'");
    expectInvalid(base({ input: [{ role: "tool", content: "x" }] }), "input[0].role");
  });

  it("refuses missing or malformed required parameters", () => {
    expect(expectInvalid({ input: "hi" }, "model").message).toBe("Missing required parameter: 'model'.");
    expect(expectInvalid({ model: "m" }, "input").message).toBe("Missing required parameter: 'input'.");
    expectInvalid(base({ input: [] }), "input");
    expectInvalid(base({ input: 42 }), "input");
    expectInvalid(base({ input: [{ type: "function_call", call_id: "c", name: "f" }] }), "input[0].arguments");
    expectInvalid(base({ input: [{ type: "function_call_output", output: "x" }] }), "input[0].call_id");
    expectInvalid(base({ tools: [{ type: "function", name: "bad name!" }] }), "tools[0].name");
  });

  it("refuses values the neutral model cannot carry", () => {
    expect(expectInvalid(base({ reasoning: { effort: "extreme" } }), "reasoning.effort").message).toContain("'none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max'");
    expectInvalid(base({ text: { verbosity: "terse" } }), "text.verbosity");
    expectInvalid(base({ service_tier: "gold" }), "service_tier");
    expectInvalid(base({ tool_choice: { type: "web_search_preview" } }), "tool_choice");
    expectInvalid(base({ temperature: 2.5 }), "temperature");
    expectInvalid(base({ max_output_tokens: 0 }), "max_output_tokens");
    expectInvalid(base({ input: [{ role: "user", content: [{ type: "input_image", image_url: "https://x/y.png", detail: "original" }] }] }), "input[0].content[0].detail");
  });

  it("refuses a tool_choice naming an unknown tool, and stream_options without stream", () => {
    expectInvalid(base({ tools: [{ type: "function", name: "f", parameters: {} }], tool_choice: { type: "function", name: "g" } }), "tool_choice");
    expectInvalid(base({ stream_options: { include_obfuscation: true } }), "stream_options");
  });
});

describe("openai-responses encodeRequest", () => {
  it("always sends store: false, the upstream model, and stream only when streaming", () => {
    expect(encode(neutral())).toEqual({ model: "gpt-upstream-2025", input: [{ type: "message", role: "user", content: "hi" }], store: false });
    const streamed = encode(neutral({ stream: true, streamUsage: false }));
    expect(streamed.stream).toBe(true);
    expect(streamed.store).toBe(false);
    // Usage always comes in response.completed: no stream option exists or is sent.
    expect(streamed).not.toHaveProperty("stream_options");
  });

  it("keeps system and developer messages as input items in their place and order", () => {
    const body = encode(
      neutral({
        messages: [
          { role: "system", content: [{ type: "text", text: "sys one" }, { type: "text", text: "sys two" }] },
          { role: "user", content: [{ type: "text", text: "q" }] },
          { role: "developer", content: [{ type: "text", text: "dev" }] },
        ],
      }),
    );
    expect(body).not.toHaveProperty("instructions");
    expect(body.input).toEqual([
      { type: "message", role: "system", content: [{ type: "input_text", text: "sys one" }, { type: "input_text", text: "sys two" }] },
      { type: "message", role: "user", content: "q" },
      { type: "message", role: "developer", content: "dev" },
    ]);
  });

  it("encodes assistant tool calls as function_call items and tool results as function_call_output items", () => {
    const body = encode(
      neutral({
        messages: [
          { role: "user", content: [{ type: "text", text: "weather?" }] },
          {
            role: "assistant",
            content: [{ type: "reasoning", text: "thinking", signature: "sig" }, { type: "text", text: "Checking." }],
            toolCalls: [
              { id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' },
              { id: "toolu_2", name: "get_time", arguments: "{}" },
            ],
          },
          { role: "tool", toolCallId: "call_1", content: [{ type: "text", text: "sunny" }] },
          { role: "tool", toolCallId: "toolu_2", content: [{ type: "text", text: "noon" }, { type: "image", url: "data:image/png;base64,QQ==" }] },
          { role: "assistant", content: [], toolCalls: [{ id: "call_3", name: "f", arguments: "" }] },
          { role: "assistant", content: [] },
        ],
      }),
    );
    expect(body.input).toEqual([
      { type: "message", role: "user", content: "weather?" },
      // Replayed reasoning is dropped: a Responses server only takes back its own reasoning items.
      { type: "message", role: "assistant", content: "Checking." },
      { type: "function_call", call_id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' },
      { type: "function_call", call_id: "toolu_2", name: "get_time", arguments: "{}" },
      { type: "function_call_output", call_id: "call_1", output: "sunny" },
      {
        type: "function_call_output",
        call_id: "toolu_2",
        output: [
          { type: "input_text", text: "noon" },
          { type: "input_image", image_url: "data:image/png;base64,QQ==", detail: "auto" },
        ],
      },
      { type: "function_call", call_id: "call_3", name: "f", arguments: "" },
      { type: "message", role: "assistant", content: "" },
    ]);
  });

  it("encodes images as input_image parts with their URL (data URLs included) and detail", () => {
    const body = encode(
      neutral({
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "compare" },
              { type: "image", url: "https://example.com/a.png", detail: "low" },
              { type: "image", url: "data:image/jpeg;base64,/9j/", cacheControl: { type: "ephemeral" } },
            ],
          },
        ],
      }),
    );
    expect(body.input).toEqual([
      {
        type: "message",
        role: "user",
        content: [
          { type: "input_text", text: "compare" },
          { type: "input_image", image_url: "https://example.com/a.png", detail: "low" },
          { type: "input_image", image_url: "data:image/jpeg;base64,/9j/", detail: "auto" },
        ],
      },
    ]);
  });

  it("encodes every carried parameter under its Responses name", () => {
    const body = encode(
      neutral({
        maxOutputTokens: 100,
        temperature: 1.2,
        topP: 0.5,
        tools: [
          { name: "get_weather", description: "Weather", parameters: { type: "object" }, strict: true },
          { name: "loose", parameters: { type: "object" } },
          { name: "bare" },
        ],
        toolChoice: { type: "tool", name: "get_weather" },
        parallelToolCalls: true,
        responseFormat: { type: "json_schema", name: "answer", schema: { type: "object" }, strict: true },
        reasoningEffort: "high",
        metadata: { k: "v" },
        user: "u-1",
      }),
    );
    expect(json(body)).toEqual({
      model: "gpt-upstream-2025",
      input: [{ type: "message", role: "user", content: "hi" }],
      store: false,
      max_output_tokens: 100,
      temperature: 1.2,
      top_p: 0.5,
      tools: [
        { type: "function", name: "get_weather", description: "Weather", parameters: { type: "object" }, strict: true },
        // The Responses default would make these strict; the neutral default is not.
        { type: "function", name: "loose", parameters: { type: "object" }, strict: false },
        { type: "function", name: "bare", parameters: null, strict: false },
      ],
      tool_choice: { type: "function", name: "get_weather" },
      parallel_tool_calls: true,
      text: { format: { type: "json_schema", name: "answer", schema: { type: "object" }, strict: true } },
      reasoning: { effort: "high" },
      metadata: { k: "v" },
      user: "u-1",
    });
    expect(encode(neutral({ responseFormat: { type: "json_object" }, toolChoice: { type: "required" } }))).toMatchObject({
      text: { format: { type: "json_object" } },
      tool_choice: "required",
    });
  });

  it("drops what the Responses API has no field for: stop sequences and message names", () => {
    const body = encode(neutral({ stop: ["END"], messages: [{ role: "user", name: "alice", content: [{ type: "text", text: "hi" }] }] }));
    expect(body).toEqual({ model: "gpt-upstream-2025", input: [{ type: "message", role: "user", content: "hi" }], store: false });
  });

  it("round-trips a decoded Responses conversation back into the same items", () => {
    const input = [
      { type: "message", role: "user", content: "weather?" },
      { type: "message", role: "assistant", content: "Checking." },
      { type: "function_call", call_id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' },
      { type: "function_call_output", call_id: "call_1", output: "sunny" },
      { type: "message", role: "assistant", content: "Sunny." },
    ];
    expect(encode(decode(base({ input }))).input).toEqual(input);
  });
});

describe("openai-responses codec: features", () => {
  it("carries exactly what the Responses API has fields for", () => {
    expect([...openAiResponsesCodec.carries].sort()).toEqual([
      "json_object",
      "json_schema",
      "metadata",
      "openai_service_tier",
      "parallel_tool_calls",
      "reasoning_effort",
      "temperature_above_1",
      "verbosity",
    ]);
    for (const f of ["top_k", "reasoning_budget", "seed", "presence_penalty", "frequency_penalty", "tool_result_error", "anthropic_service_tier", "speed", "inference_geo"] as const) {
      expect(openAiResponsesCodec.carries.has(f)).toBe(false);
    }
  });

  it("names each feature by its Responses field", () => {
    const names = Object.fromEntries(REQUEST_FEATURES.map((f) => [f, openAiResponsesCodec.paramName(f)]));
    expect(names).toMatchObject({
      reasoning_effort: "reasoning.effort",
      json_object: "text.format",
      json_schema: "text.format",
      temperature_above_1: "temperature",
      parallel_tool_calls: "parallel_tool_calls",
      metadata: "metadata",
      verbosity: "text.verbosity",
      openai_service_tier: "service_tier",
    });
    expect(openAiResponsesCodec.id).toBe("openai-responses");
    expect(openAiResponsesCodec.upstreamPath).toBe("/responses");
  });
});
