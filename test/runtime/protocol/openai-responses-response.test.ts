import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import type { ResponseStamp } from "../../../src/protocol/codec.ts";
import type { NeutralResponse } from "../../../src/protocol/neutral.ts";
import { openAiResponsesCodec } from "../../../src/protocol/openai-responses/index.ts";
import { rejectOf } from "./error-helpers.ts";

const stamp: ResponseStamp = { id: "0123456789abcdef0123456789abcdef", created: 1_760_000_000, model: "public-model" };

const usage = {
  input_tokens: 30,
  input_tokens_details: { cached_tokens: 12 },
  output_tokens: 9,
  output_tokens_details: { reasoning_tokens: 4 },
  total_tokens: 39,
};

/** A realistic provider Response body; `over` replaces top-level keys. */
function providerBody(output: unknown[], over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: "resp_PROVIDER_abc",
    object: "response",
    created_at: 1_111_111_111,
    status: "completed",
    background: false,
    error: null,
    incomplete_details: null,
    instructions: null,
    max_output_tokens: null,
    model: "provider-model-2025-01-01",
    output,
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: { effort: null, summary: null },
    service_tier: "default",
    store: false,
    temperature: 1,
    text: { format: { type: "text" }, verbosity: "medium" },
    tool_choice: "auto",
    tools: [],
    top_p: 1,
    truncation: "disabled",
    usage,
    user: null,
    metadata: {},
    ...over,
  };
}

const message = (text: string, extra: Record<string, unknown> = {}) => ({
  id: "msg_PROVIDER_1",
  type: "message",
  status: "completed",
  role: "assistant",
  content: [{ type: "output_text", text, annotations: [], logprobs: [] }],
  ...extra,
});
const call = (call_id: string, name: string, args: string) => ({ id: `fc_${call_id}`, type: "function_call", status: "completed", arguments: args, call_id, name });

const decode = (body: unknown) => openAiResponsesCodec.decodeResponse(body);
const encode = (res: NeutralResponse) => openAiResponsesCodec.encodeResponse(res, stamp) as Record<string, unknown>;


const neutralUsage = { inputTokens: 30, outputTokens: 9, cachedInputTokens: 12, cacheWriteInputTokens: undefined, reasoningTokens: 4, source: "provider" } as const;

describe("openai-responses decodeResponse", () => {
  it("decodes a text answer with usage (input tokens include cached ones)", () => {
    expect(decode(providerBody([message("Hello there.")]))).toEqual({
      providerId: "resp_PROVIDER_abc",
      text: "Hello there.",
      reasoning: undefined,
      toolCalls: [],
      stopReason: "end_turn",
      usage: neutralUsage,
    });
  });

  it("decodes reasoning, text and function calls; call_id is the tool call id; completed with calls is tool_use", () => {
    const res = decode(
      providerBody([
        { id: "rs_1", type: "reasoning", summary: [{ type: "summary_text", text: "Plan." }, { type: "summary_text", text: "Act." }], encrypted_content: "gAAAA" },
        message("Checking both."),
        call("call_a", "get_weather", '{"city":"Oslo"}'),
        call("call_b", "get_time", "{}"),
      ]),
    );
    expect(res.reasoning).toEqual([{ text: "Plan.\n\nAct." }]);
    expect(res.text).toBe("Checking both.");
    expect(res.toolCalls).toEqual([
      { id: "call_a", name: "get_weather", arguments: '{"city":"Oslo"}' },
      { id: "call_b", name: "get_time", arguments: "{}" },
    ]);
    expect(res.stopReason).toBe("tool_use");
  });

  it("joins text across parts and messages, keeps refusals as text, skips empty reasoning and unknown items", () => {
    const res = decode(
      providerBody([
        { id: "rs_1", type: "reasoning", summary: [] },
        { type: "web_search_call", id: "ws_1", status: "completed" },
        message("A", { content: [{ type: "output_text", text: "A", annotations: [] }, { type: "output_text", text: "B", annotations: [] }] }),
        message("", { id: "msg_2", content: [{ type: "refusal", refusal: "I can't help with that." }] }),
      ]),
    );
    expect(res.text).toBe("ABI can't help with that.");
    expect(res.reasoning).toBeUndefined();
    expect(res.stopReason).toBe("end_turn");
  });

  it("maps incomplete responses: max_output_tokens, content_filter, anything else", () => {
    const incomplete = (reason: string | null) => decode(providerBody([message("Hal")], { status: "incomplete", incomplete_details: reason === null ? null : { reason } }));
    expect(incomplete("max_output_tokens").stopReason).toBe("max_tokens");
    expect(incomplete("content_filter").stopReason).toBe("content_filter");
    expect(incomplete("max_messages").stopReason).toBe("other");
    expect(incomplete(null).stopReason).toBe("other");
    // A token limit mid tool call is still a token limit.
    expect(decode(providerBody([call("c", "f", '{"a"')], { status: "incomplete", incomplete_details: { reason: "max_output_tokens" } })).stopReason).toBe("max_tokens");
  });

  it("reads cache writes when reported, and leaves usage undefined when there is none (never zero)", () => {
    const withWrites = decode(providerBody([message("x")], { usage: { ...usage, input_tokens_details: { cached_tokens: 0, cache_write_tokens: 8 } } }));
    expect(withWrites.usage).toMatchObject({ cachedInputTokens: 0, cacheWriteInputTokens: 8 });
    expect(decode(providerBody([message("x")], { usage: null })).usage).toBeUndefined();
    const { usage: _u, ...noUsage } = providerBody([message("x")]);
    expect(decode(noUsage).usage).toBeUndefined();
    expect(decode(providerBody([message("x")], { usage: { input_tokens: 3, output_tokens: 1 } })).usage).toEqual({
      inputTokens: 3,
      outputTokens: 1,
      cachedInputTokens: undefined,
      cacheWriteInputTokens: undefined,
      reasoningTokens: undefined,
      source: "provider",
    });
  });

  it("reports a failed or cancelled response as the provider's error", () => {
    for (const status of ["failed", "cancelled"]) {
      const err = rejectOf(() => decode(providerBody([], { status, error: { code: "server_error", message: "boom" } })));
      expect(err.code).toBe("upstream_error");
      expect(err.message).not.toContain("boom");
    }
  });

  it("refuses malformed bodies as upstream_protocol_error", () => {
    for (const body of [
      null,
      "text",
      {},
      providerBody([], { output: "nope" }),
      providerBody([{ type: "message", role: "assistant" }]),
      providerBody([{ type: "function_call", name: "f", arguments: "{}" }]),
      providerBody([{ type: "reasoning", summary: "x" }]),
      providerBody([message("x")], { usage: { input_tokens: -1, output_tokens: 1 } }),
      providerBody([message("x")], { status: "in_progress" }),
    ]) {
      const err = rejectOf(() => decode(body));
      expect(err.code).toBe("upstream_protocol_error");
      expect(err.status).toBe(502);
    }
  });
});

const baseNeutral: NeutralResponse = { text: "Hello.", toolCalls: [], stopReason: "end_turn", usage: { inputTokens: 10, outputTokens: 3, source: "provider" } };

describe("openai-responses encodeResponse", () => {
  it("writes a complete Response object stamped with the gateway's id and public model", () => {
    expect(encode(baseNeutral)).toEqual({
      id: "resp_0123456789abcdef0123456789abcdef",
      object: "response",
      created_at: 1_760_000_000,
      status: "completed",
      background: false,
      error: null,
      incomplete_details: null,
      instructions: null,
      max_output_tokens: null,
      model: "public-model",
      output: [
        {
          id: "msg_0123456789abcdef0123456789abcdef_0",
          type: "message",
          status: "completed",
          role: "assistant",
          content: [{ type: "output_text", text: "Hello.", annotations: [] }],
        },
      ],
      parallel_tool_calls: true,
      previous_response_id: null,
      reasoning: { effort: null, summary: null },
      store: false,
      temperature: null,
      text: { format: { type: "text" } },
      tool_choice: "auto",
      tools: [],
      top_p: null,
      truncation: "disabled",
      metadata: {},
      access_programs: null,
      usage: {
        input_tokens: 10,
        input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
        output_tokens: 3,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 13,
      },
    });
  });

  it("orders reasoning, message, function calls; omits the empty message beside tool calls; ids are unique", () => {
    const body = encode({
      text: "",
      reasoning: [{ text: "Think.", signature: "anthropic-sig" }, { text: "" }],
      toolCalls: [
        { id: "call_a", name: "get_weather", arguments: '{"city":"Oslo"}' },
        { id: "toolu_b", name: "get_time", arguments: "{}" },
      ],
      stopReason: "tool_use",
      usage: undefined,
    });
    expect(body.status).toBe("completed");
    expect(body.output).toEqual([
      { id: "rs_0123456789abcdef0123456789abcdef_0", type: "reasoning", summary: [{ type: "summary_text", text: "Think." }] },
      { id: "fc_0123456789abcdef0123456789abcdef_1", type: "function_call", status: "completed", arguments: '{"city":"Oslo"}', call_id: "call_a", name: "get_weather" },
      { id: "fc_0123456789abcdef0123456789abcdef_2", type: "function_call", status: "completed", arguments: "{}", call_id: "toolu_b", name: "get_time" },
    ]);
    expect(JSON.stringify(body)).not.toContain("anthropic-sig");
    // Unknown usage is left out, never zeros.
    expect(body).not.toHaveProperty("usage");
  });

  it("keeps text next to tool calls, and an empty message when there is nothing else", () => {
    const both = encode({ ...baseNeutral, text: "Let me check.", toolCalls: [{ id: "c", name: "f", arguments: "{}" }], stopReason: "tool_use" });
    expect((both.output as { type: string }[]).map((o) => o.type)).toEqual(["message", "function_call"]);
    const empty = encode({ ...baseNeutral, text: "" });
    expect(empty.output).toEqual([expect.objectContaining({ type: "message", content: [{ type: "output_text", text: "", annotations: [] }] })]);
  });

  it("maps a token limit and a content filter to incomplete, with the reason and incomplete items", () => {
    const limited = encode({ ...baseNeutral, stopReason: "max_tokens" });
    expect(limited.status).toBe("incomplete");
    expect(limited.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(limited.output).toEqual([expect.objectContaining({ type: "message", status: "incomplete" })]);
    const filtered = encode({ ...baseNeutral, stopReason: "content_filter" });
    expect(filtered.status).toBe("incomplete");
    expect(filtered.incomplete_details).toEqual({ reason: "content_filter" });
    for (const reason of ["end_turn", "stop_sequence", "other", "tool_use"] as const) {
      const b = encode({ ...baseNeutral, stopReason: reason });
      expect(b.status).toBe("completed");
      expect(b.incomplete_details).toBeNull();
    }
  });

  it("reports every usage figure", () => {
    const body = encode({
      ...baseNeutral,
      usage: { inputTokens: 100, outputTokens: 40, cachedInputTokens: 64, cacheWriteInputTokens: 20, reasoningTokens: 25, source: "provider" },
    });
    expect(body.usage).toEqual({
      input_tokens: 100,
      input_tokens_details: { cached_tokens: 64, cache_write_tokens: 20 },
      output_tokens: 40,
      output_tokens_details: { reasoning_tokens: 25 },
      total_tokens: 140,
    });
  });

  it("round-trips through decodeResponse", () => {
    const res: NeutralResponse = {
      text: "Answer.",
      reasoning: [{ text: "Because." }],
      toolCalls: [{ id: "call_1", name: "f", arguments: '{"x":1}' }],
      stopReason: "tool_use",
      usage: { inputTokens: 5, outputTokens: 6, cachedInputTokens: 1, cacheWriteInputTokens: 0, reasoningTokens: 2, source: "provider" },
    };
    expect(decode(encode(res))).toEqual({ ...res, providerId: "resp_0123456789abcdef0123456789abcdef" });
  });

  it("is what the official SDK's responses.create() reads, output_text included", async () => {
    const body = encode({ ...baseNeutral, text: "Hi from Sluice.", reasoning: [{ text: "hm" }], toolCalls: [{ id: "call_1", name: "f", arguments: "{}" }], stopReason: "tool_use" });
    const client = new OpenAI({
      apiKey: "test",
      baseURL: "http://gateway.test/v1",
      maxRetries: 0,
      fetch: async () => new Response(JSON.stringify(body), { headers: { "content-type": "application/json" } }),
    });
    const res = await client.responses.create({ model: "public-model", input: "hi", store: false });
    expect(res.id).toBe("resp_0123456789abcdef0123456789abcdef");
    expect(res.output_text).toBe("Hi from Sluice.");
    expect(res.status).toBe("completed");
    expect(res.usage?.input_tokens).toBe(10);
    expect(res.output.map((o) => o.type)).toEqual(["reasoning", "message", "function_call"]);
  });
});
