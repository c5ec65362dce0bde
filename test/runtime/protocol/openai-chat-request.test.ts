import { describe, expect, it } from "vitest";
import { openAiChatCodec } from "../../../src/protocol/openai-chat/index.ts";
import type { NeutralRequest } from "../../../src/protocol/neutral.ts";
import { invalidRequestOf, json, rejectOf } from "./error-helpers.ts";

const decode = (body: unknown): NeutralRequest => openAiChatCodec.decodeRequest(body);
const encode = (req: NeutralRequest, model = "gpt-upstream-2025", streamUsage = true) =>
  openAiChatCodec.encodeRequest(req, model, { streamUsage }) as Record<string, unknown>;

const user = (content: unknown) => ({ role: "user", content });
const base = (extra: Record<string, unknown> = {}) => ({ model: "public-model", messages: [user("hi")], ...extra });


const expectInvalid = invalidRequestOf(decode);

describe("openai-chat decodeRequest: messages", () => {
  it("decodes string content into one text part and keeps the public model name", () => {
    const req = decode(base());
    expect(req.model).toBe("public-model");
    expect(req.messages).toEqual([{ role: "user", content: [{ type: "text", text: "hi" }], name: undefined }]);
    expect(req.stream).toBe(false);
    expect(req.streamUsage).toBe(false);
  });

  it("decodes array content with text and image_url parts, keeping order and detail", () => {
    const req = decode(
      base({
        messages: [
          user([
            { type: "text", text: "what is this?" },
            { type: "image_url", image_url: { url: "https://example.com/cat.png", detail: "high" } },
            { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
            { type: "text", text: "and this?" },
          ]),
        ],
      }),
    );
    expect(req.messages[0]).toEqual({
      role: "user",
      name: undefined,
      content: [
        { type: "text", text: "what is this?" },
        { type: "image", url: "https://example.com/cat.png", detail: "high" },
        { type: "image", url: "data:image/png;base64,AAAA", detail: undefined },
        { type: "text", text: "and this?" },
      ],
    });
  });

  it("decodes system, developer, user name, assistant, and tool roles", () => {
    const req = decode(
      base({
        messages: [
          { role: "system", content: "be terse" },
          { role: "developer", content: [{ type: "text", text: "dev note" }] },
          { role: "user", content: "weather?", name: "alice" },
          {
            role: "assistant",
            content: null,
            tool_calls: [
              { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
              { id: "call_2", type: "function", function: { name: "get_time", arguments: "{}" } },
            ],
          },
          { role: "tool", tool_call_id: "call_1", content: "sunny" },
          { role: "tool", tool_call_id: "call_2", content: [{ type: "text", text: "noon" }] },
          { role: "assistant", content: "Sunny at noon.", name: "bot" },
        ],
      }),
    );
    expect(req.messages).toEqual([
      { role: "system", content: [{ type: "text", text: "be terse" }] },
      { role: "developer", content: [{ type: "text", text: "dev note" }] },
      { role: "user", content: [{ type: "text", text: "weather?" }], name: "alice" },
      {
        role: "assistant",
        content: [],
        name: undefined,
        toolCalls: [
          { id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' },
          { id: "call_2", name: "get_time", arguments: "{}" },
        ],
      },
      { role: "tool", toolCallId: "call_1", content: [{ type: "text", text: "sunny" }] },
      { role: "tool", toolCallId: "call_2", content: [{ type: "text", text: "noon" }] },
      { role: "assistant", content: [{ type: "text", text: "Sunny at noon." }], name: "bot", toolCalls: undefined },
    ]);
  });

  it("accepts assistant tool_calls with the content key absent", () => {
    const req = decode(
      base({
        messages: [
          user("x"),
          { role: "assistant", tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "" } }] },
          { role: "tool", tool_call_id: "c", content: "ok" },
        ],
      }),
    );
    expect(req.messages[1]).toMatchObject({ role: "assistant", content: [], toolCalls: [{ id: "c", name: "f", arguments: "" }] });
  });

  it("maps an assistant refusal part to text", () => {
    const req = decode(base({ messages: [user("x"), { role: "assistant", content: [{ type: "refusal", refusal: "I can't." }] }] }));
    expect(req.messages[1]).toMatchObject({ role: "assistant", content: [{ type: "text", text: "I can't." }] });
  });

  it("rejects an assistant message with neither content nor tool_calls, naming the message", () => {
    const err = expectInvalid(base({ messages: [user("x"), { role: "assistant", content: null }] }), "messages[1]");
    expect(err.message).toContain("messages[1]");
    expectInvalid(base({ messages: [user("x"), { role: "assistant", content: null, tool_calls: [] }] }), "messages[1]");
  });

  it("rejects an image part outside a user message and an unknown role", () => {
    expectInvalid(
      base({ messages: [{ role: "system", content: [{ type: "image_url", image_url: { url: "https://x/y.png" } }] }] }),
      "messages[0].content",
    );
    const err = expectInvalid(base({ messages: [{ role: "wizard", content: "x" }] }), "messages[0].role");
    expect(err.message).toContain("messages[0]");
  });

  it("rejects a tool message without tool_call_id, naming the field", () => {
    expectInvalid(base({ messages: [user("x"), { role: "tool", content: "ok" }] }), "messages[1].tool_call_id");
  });

  it("rejects an unknown key inside a message with its full path", () => {
    const err = expectInvalid(base({ messages: [{ role: "user", content: "x", foo: 1 }] }), "messages[0].foo");
    expect(err.message).toContain("messages[0].foo");
  });

  it("rejects an empty messages array", () => {
    expectInvalid(base({ messages: [] }), "messages");
  });
});

describe("openai-chat decodeRequest: parameters", () => {
  it("decodes tools, every tool_choice form and parallel_tool_calls", () => {
    const tools = [
      {
        type: "function",
        function: {
          name: "get_weather",
          description: "Weather for a city",
          parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
          strict: true,
        },
      },
      { type: "function", function: { name: "noop" } },
    ];
    const withChoice = (tool_choice: unknown) => decode(base({ tools, tool_choice, parallel_tool_calls: false }));

    const req = withChoice("auto");
    expect(req.tools).toEqual([
      {
        name: "get_weather",
        description: "Weather for a city",
        parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
        strict: true,
      },
      { name: "noop", description: undefined, parameters: undefined, strict: undefined },
    ]);
    expect(req.parallelToolCalls).toBe(false);
    expect(req.toolChoice).toEqual({ type: "auto" });
    expect(withChoice("none").toolChoice).toEqual({ type: "none" });
    expect(withChoice("required").toolChoice).toEqual({ type: "required" });
    expect(withChoice({ type: "function", function: { name: "noop" } }).toolChoice).toEqual({ type: "tool", name: "noop" });
    expect(decode(base({ tools })).toolChoice).toBeUndefined();
  });

  it("rejects a tool_choice naming a tool that is not in tools (or with no tools)", () => {
    const tools = [{ type: "function", function: { name: "a" } }];
    const err = expectInvalid(base({ tools, tool_choice: { type: "function", function: { name: "b" } } }), "tool_choice");
    expect(err.message).toContain("'b'");
    expectInvalid(base({ tool_choice: { type: "function", function: { name: "a" } } }), "tool_choice");
    expectInvalid(base({ tools, tool_choice: "sometimes" }), "tool_choice");
  });

  it("rejects an invalid tool name", () => {
    expectInvalid(base({ tools: [{ type: "function", function: { name: "has space" } }] }), "tools[0].function.name");
  });

  it("decodes every response_format", () => {
    expect(decode(base({ response_format: { type: "text" } })).responseFormat).toEqual({ type: "text" });
    expect(decode(base({ response_format: { type: "json_object" } })).responseFormat).toEqual({ type: "json_object" });
    const schema = { type: "object", properties: { answer: { type: "string" } }, required: ["answer"], additionalProperties: false };
    expect(
      decode(base({ response_format: { type: "json_schema", json_schema: { name: "answer", description: "d", schema, strict: true } } }))
        .responseFormat,
    ).toEqual({ type: "json_schema", name: "answer", description: "d", schema, strict: true });
    expect(
      decode(base({ response_format: { type: "json_schema", json_schema: { name: "n", strict: null } } })).responseFormat,
    ).toEqual({ type: "json_schema", name: "n", description: undefined, schema: undefined, strict: undefined });
    expectInvalid(base({ response_format: { type: "json_schema" } }), "response_format.json_schema");
  });

  it("normalizes stop: string → one-element list, array kept, null → absent", () => {
    expect(decode(base({ stop: "END" })).stop).toEqual(["END"]);
    expect(decode(base({ stop: ["a", "b"] })).stop).toEqual(["a", "b"]);
    expect(decode(base({ stop: null })).stop).toBeUndefined();
    expect(decode(base()).stop).toBeUndefined();
    expectInvalid(base({ stop: ["1", "2", "3", "4", "5"] }), "stop");
  });

  it("takes max_tokens or max_completion_tokens as maxOutputTokens, and refuses a conflict", () => {
    expect(decode(base({ max_tokens: 100 })).maxOutputTokens).toBe(100);
    expect(decode(base({ max_completion_tokens: 200 })).maxOutputTokens).toBe(200);
    expect(decode(base({ max_tokens: 300, max_completion_tokens: 300 })).maxOutputTokens).toBe(300);
    expect(decode(base({ max_tokens: null, max_completion_tokens: 50 })).maxOutputTokens).toBe(50);
    expect(decode(base()).maxOutputTokens).toBeUndefined();
    const err = expectInvalid(base({ max_tokens: 100, max_completion_tokens: 200 }), "max_tokens");
    expect(err.message).toContain("max_completion_tokens");
    expectInvalid(base({ max_tokens: 0 }), "max_tokens");
    expectInvalid(base({ max_completion_tokens: 1.5 }), "max_completion_tokens");
  });

  it("sets streamUsage only for a stream that asked for usage", () => {
    const s1 = decode(base({ stream: true, stream_options: { include_usage: true } }));
    expect([s1.stream, s1.streamUsage]).toEqual([true, true]);
    const s2 = decode(base({ stream: true }));
    expect([s2.stream, s2.streamUsage]).toEqual([true, false]);
    const s3 = decode(base({ stream: true, stream_options: { include_usage: false } }));
    expect([s3.stream, s3.streamUsage]).toEqual([true, false]);
    // OpenAI refuses stream_options on a request that does not stream.
    expectInvalid(base({ stream: false, stream_options: { include_usage: true } }), "stream_options");
    const s5 = decode(base({ stream: null }));
    expect([s5.stream, s5.streamUsage]).toEqual([false, false]);
    expectInvalid(base({ stream: true, stream_options: { include_usage: true, extra: 1 } }), "stream_options.extra");
  });

  it("carries sampling, reasoning, metadata and user fields", () => {
    const req = decode(
      base({
        temperature: 0.2,
        top_p: 0.9,
        presence_penalty: -0.5,
        frequency_penalty: 1.5,
        seed: 42,
        reasoning_effort: "low",
        metadata: { team: "search" },
        user: "user-123",
      }),
    );
    expect(req).toMatchObject({
      temperature: 0.2,
      topP: 0.9,
      presencePenalty: -0.5,
      frequencyPenalty: 1.5,
      seed: 42,
      reasoningEffort: "low",
      metadata: { team: "search" },
      user: "user-123",
    });
    const nulls = decode(base({ temperature: null, top_p: null, seed: null, reasoning_effort: null, metadata: null }));
    expect([nulls.temperature, nulls.topP, nulls.seed, nulls.reasoningEffort, nulls.metadata]).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
    expectInvalid(base({ temperature: 2.5 }), "temperature");
    expectInvalid(base({ reasoning_effort: "extreme" }), "reasoning_effort");
  });

  it("accepts n=1, logprobs=false, store=false (and null) as defaults", () => {
    expect(() => decode(base({ n: 1, logprobs: false, store: false }))).not.toThrow();
    expect(() => decode(base({ n: null, logprobs: null, store: null }))).not.toThrow();
  });

  it("rejects n=2, logprobs=true, store=true, naming each", () => {
    expect(expectInvalid(base({ n: 2 }), "n").message).toContain("n=1");
    expect(expectInvalid(base({ logprobs: true }), "logprobs").message).toContain("logprobs");
    expect(expectInvalid(base({ store: true }), "store").message).toContain("stored");
  });
});

describe("openai-chat decodeRequest: body-level errors", () => {
  it("refuses an unknown top-level parameter by name", () => {
    const err = expectInvalid(base({ top_logprobs: 3 }), "top_logprobs");
    expect(err.message).toContain("top_logprobs");
    expect(err.retryable).toBe(false);
    expectInvalid(base({ frobnicate: true }), "frobnicate");
  });

  it("names a missing model or messages", () => {
    const m = expectInvalid({ messages: [user("hi")] }, "model");
    expect(m.message).toContain("Missing required parameter: 'model'");
    const msgs = expectInvalid({ model: "x" }, "messages");
    expect(msgs.message).toContain("Missing required parameter: 'messages'");
    expectInvalid({ model: "", messages: [user("x")] }, "model");
  });

  it("does not call a present value of the wrong type 'missing'", () => {
    const m = expectInvalid({ model: 123, messages: [user("hi")] }, "model");
    expect(m.message).not.toContain("Missing");
    expect(m.message).toContain("'model'");
    const t = expectInvalid(base({ temperature: "hot" }), "temperature");
    expect(t.message).not.toContain("Missing");
  });

  it("rejects a body that is not an object", () => {
    for (const body of [null, "hello", 42, [], undefined]) {
      const err = rejectOf(() => decode(body));
      expect(err.code).toBe("invalid_request");
      expect(err.status).toBe(400);
    }
  });
});

describe("openai-chat encodeRequest", () => {
  const full = {
    model: "public-model",
    messages: [
      { role: "system", content: "be terse" },
      { role: "developer", content: "dev note" },
      {
        role: "user",
        name: "alice",
        content: [
          { type: "text", text: "look" },
          { type: "image_url", image_url: { url: "https://example.com/a.png", detail: "low" } },
        ],
      },
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "lookup", arguments: '{"q":1}' } }] },
      { role: "tool", tool_call_id: "call_1", content: "result" },
      { role: "assistant", content: "done", name: "bot" },
      { role: "user", content: "thanks" },
    ],
    tools: [
      { type: "function", function: { name: "lookup", description: "Look up", parameters: { type: "object" }, strict: true } },
    ],
    tool_choice: { type: "function", function: { name: "lookup" } },
    parallel_tool_calls: true,
    max_tokens: 256,
    temperature: 0.7,
    top_p: 0.5,
    presence_penalty: 0.1,
    frequency_penalty: 0.2,
    seed: 7,
    stop: ["\n\n", "END"],
    response_format: { type: "json_schema", json_schema: { name: "out", description: "d", schema: { type: "object" }, strict: true } },
    reasoning_effort: "high",
    metadata: { k: "v" },
    user: "u-1",
    stream: true,
    stream_options: { include_usage: true },
  };

  it("round-trips every carried field, with the upstream model id and max_completion_tokens", () => {
    const req = decode(full);
    const wire = json(encode(req, "provider-model-v3"));
    const { max_tokens, model: _model, ...rest } = full;
    expect(wire).toEqual({ ...rest, model: "provider-model-v3", max_completion_tokens: max_tokens });
    expect(wire).not.toHaveProperty("max_tokens");
    expect(JSON.stringify(wire)).not.toContain("public-model");
  });

  it("decode → encode → decode is a fixed point of the neutral request (except the model)", () => {
    const req = decode(full);
    const again = decode(json(encode(req, "public-model")));
    expect(json(again)).toEqual(json(req));
  });

  it("round-trips the simple forms: tool_choice strings, json_object, single stop, no stream", () => {
    for (const tool_choice of ["auto", "none", "required"]) {
      const wire = json(encode(decode(base({ tools: [{ type: "function", function: { name: "f" } }], tool_choice }))));
      expect(wire.tool_choice).toBe(tool_choice);
      expect(wire.tools).toEqual([{ type: "function", function: { name: "f" } }]);
    }
    const wire = json(encode(decode(base({ response_format: { type: "json_object" }, stop: "X", max_completion_tokens: 9 }))));
    expect(wire).toEqual({
      model: "gpt-upstream-2025",
      messages: [{ role: "user", content: "hi" }],
      response_format: { type: "json_object" },
      stop: ["X"],
      max_completion_tokens: 9,
    });
    expect(wire).not.toHaveProperty("stream");
    expect(wire).not.toHaveProperty("stream_options");
  });

  it("asks upstream for stream usage when streaming on a backend that supports it, whatever the client asked", () => {
    const withUsage = encode(decode(base({ stream: true, stream_options: { include_usage: true } })), "m", true);
    expect(withUsage.stream).toBe(true);
    expect(withUsage.stream_options).toEqual({ include_usage: true });
    const clientDidNotAsk = encode(decode(base({ stream: true })), "m", true);
    expect(clientDidNotAsk.stream_options).toEqual({ include_usage: true });
  });

  it("does not send stream_options to a backend without stream usage, nor for a buffered request", () => {
    const unsupported = encode(decode(base({ stream: true, stream_options: { include_usage: true } })), "m", false);
    expect(unsupported.stream).toBe(true);
    expect(unsupported).not.toHaveProperty("stream_options");
    const buffered = encode(decode(base()), "m", true);
    expect(buffered).not.toHaveProperty("stream");
    expect(buffered).not.toHaveProperty("stream_options");
  });

  it("keeps a single text part as a string and multi-part or image content as an array", () => {
    const wire = json(
      encode(
        decode(
          base({
            messages: [
              user([{ type: "text", text: "solo" }]),
              user([{ type: "image_url", image_url: { url: "https://x/i.png" } }]),
              user([
                { type: "text", text: "a" },
                { type: "text", text: "b" },
              ]),
            ],
          }),
        ),
      ),
    );
    expect(wire.messages).toEqual([
      { role: "user", content: "solo" },
      { role: "user", content: [{ type: "image_url", image_url: { url: "https://x/i.png" } }] },
      {
        role: "user",
        content: [
          { type: "text", text: "a" },
          { type: "text", text: "b" },
        ],
      },
    ]);
  });

  it("sends an assistant message with empty content as a message the provider accepts", () => {
    // `content: ""` is valid input; the upstream body must stay valid (content or tool_calls present).
    const req = decode(base({ messages: [user("a"), { role: "assistant", content: "" }, user("b")] }));
    const wire = json(encode(req));
    const assistant = (wire.messages as Record<string, unknown>[])[1]!;
    expect(assistant.role).toBe("assistant");
    expect(assistant.content).toBe("");
    expect(() => decode({ ...wire, model: "x" })).not.toThrow();
  });
});

describe("openai-chat: system messages keep their shape upstream", () => {
  it("carries a system name and keeps several text parts as parts", () => {
    const req = decode(
      base({
        messages: [
          { role: "system", name: "policy", content: [{ type: "text", text: "Be brief." }, { type: "text", text: "Be kind." }] },
          { role: "user", content: "hi" },
        ],
      }),
    );
    const wire = openAiChatCodec.encodeRequest(req, "up", { streamUsage: true }) as { messages: Record<string, unknown>[] };
    expect(wire.messages[0]).toEqual({
      role: "system",
      name: "policy",
      content: [{ type: "text", text: "Be brief." }, { type: "text", text: "Be kind." }],
    });
  });
});
