import { describe, expect, it } from "vitest";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import type { ResponseStamp } from "../../../src/protocol/codec.ts";
import type { NeutralResponse } from "../../../src/protocol/neutral.ts";
import { openAiChatCodec } from "../../../src/protocol/openai-chat/index.ts";

const stamp: ResponseStamp = { id: "gw-req123", created: 1_760_000_000, model: "public-model" };

/** A realistic provider body; `over` replaces top-level keys, `choice` the first choice. */
function providerBody(choice: Record<string, unknown>, over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: "chatcmpl-PROVIDER-abc",
    object: "chat.completion",
    created: 1_111_111_111,
    model: "provider-model-2025-01-01",
    system_fingerprint: "fp_123",
    service_tier: "default",
    choices: [{ index: 0, logprobs: null, ...choice }],
    usage: { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17 },
    ...over,
  };
}

const textChoice = (content: string | null, finish_reason: string | null = "stop") => ({
  message: { role: "assistant", content, refusal: null, annotations: [] },
  finish_reason,
});

const decode = (body: unknown) => openAiChatCodec.decodeResponse(body);
const encode = (res: NeutralResponse) => openAiChatCodec.encodeResponse(res, stamp) as Record<string, unknown>;

describe("openai-chat decodeResponse", () => {
  it("reads logprobs.content when it has the documented shape, and leaves an answer without any otherwise", () => {
    const withLogprobs = (logprobs: unknown) => decode(providerBody({ ...textChoice("a b"), logprobs })).logprobs;
    expect(withLogprobs({ content: [{ token: "a", logprob: -0.5, bytes: [97], top_logprobs: [{ token: "a", logprob: -0.5 }, { token: "c", logprob: -1.5 }] }, { token: "b", logprob: -0.25 }] })).toEqual([
      { token: "a", logprob: -0.5, top: [{ token: "a", logprob: -0.5 }, { token: "c", logprob: -1.5 }] },
      { token: "b", logprob: -0.25, top: [] },
    ]);
    // Anything else is no log-probabilities at all (a confidence score then reads unknown), never a partial list.
    for (const bad of [null, "x", { content: null }, { content: [{ token: "a", logprob: "-0.5" }] }, { content: [{ token: "a", logprob: -1, top_logprobs: null }] }, { content: [{ token: "a", logprob: -1, top_logprobs: [{ token: 1, logprob: 0 }] }] }]) {
      expect(withLogprobs(bad)).toBeUndefined();
    }
  });

  it("decodes a plain text answer with usage", () => {
    expect(decode(providerBody(textChoice("Hello there.")))).toEqual({
      providerId: "chatcmpl-PROVIDER-abc",
      text: "Hello there.",
      toolCalls: [],
      stopReason: "end_turn",
      usage: { inputTokens: 12, outputTokens: 5, cachedInputTokens: undefined, reasoningTokens: undefined, source: "provider" },
    });
  });

  it("decodes tool calls with null content", () => {
    const res = decode(
      providerBody({
        message: {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "call_a", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } },
            { id: "call_b", type: "function", function: { name: "get_time", arguments: "{}" } },
          ],
        },
        finish_reason: "tool_calls",
      }),
    );
    expect(res.text).toBe("");
    expect(res.toolCalls).toEqual([
      { id: "call_a", name: "get_weather", arguments: '{"city":"Oslo"}' },
      { id: "call_b", name: "get_time", arguments: "{}" },
    ]);
    expect(res.stopReason).toBe("tool_use");
  });

  it("maps every finish_reason", () => {
    const cases: [string | null, NeutralResponse["stopReason"]][] = [
      ["stop", "end_turn"],
      ["length", "max_tokens"],
      ["tool_calls", "tool_use"],
      ["function_call", "tool_use"],
      ["content_filter", "content_filter"],
      ["something_new", "other"],
      [null, "other"],
    ];
    for (const [finish, stop] of cases) {
      expect(decode(providerBody(textChoice("x", finish))).stopReason, String(finish)).toBe(stop);
    }
  });

  it("reads cached and reasoning token details", () => {
    const res = decode(
      providerBody(textChoice("x"), {
        usage: {
          prompt_tokens: 2000,
          completion_tokens: 300,
          total_tokens: 2300,
          prompt_tokens_details: { cached_tokens: 1536, audio_tokens: 0 },
          completion_tokens_details: { reasoning_tokens: 256, audio_tokens: 0, accepted_prediction_tokens: 0 },
        },
      }),
    );
    expect(res.usage).toEqual({ inputTokens: 2000, outputTokens: 300, cachedInputTokens: 1536, reasoningTokens: 256, source: "provider" });
  });

  it("reports missing or null usage as undefined, never zeros", () => {
    const { usage: _drop, ...noUsage } = providerBody(textChoice("x"));
    expect(decode(noUsage).usage).toBeUndefined();
    expect(decode(providerBody(textChoice("x"), { usage: null })).usage).toBeUndefined();
  });

  it("uses a refusal as the text when content is null", () => {
    const res = decode(providerBody({ message: { role: "assistant", content: null, refusal: "I can't help with that." }, finish_reason: "stop" }));
    expect(res.text).toBe("I can't help with that.");
  });

  it("tolerates a missing provider id and extra provider fields", () => {
    const { id: _id, ...noId } = providerBody(textChoice("ok"));
    const res = decode(noId);
    expect(res.providerId).toBeUndefined();
    expect(res.text).toBe("ok");
  });

  it("refuses malformed bodies with upstream_protocol_error", () => {
    const malformed: unknown[] = [
      null,
      "not json",
      42,
      [],
      {},
      { choices: [] },
      { choices: [{ finish_reason: "stop" }] },
      { choices: [{ message: { content: 42 } }] },
      { choices: [{ message: { tool_calls: [{ id: "c", function: { name: "f" } }] } }] },
      providerBody(textChoice("x"), { usage: { prompt_tokens: -1, completion_tokens: 2 } }),
      providerBody(textChoice("x"), { usage: { prompt_tokens: "12", completion_tokens: 2 } }),
    ];
    for (const body of malformed) {
      let caught: unknown;
      try {
        decode(body);
      } catch (err) {
        caught = err;
      }
      expect(caught, JSON.stringify(body)).toBeInstanceOf(GatewayError);
      const err = caught as GatewayError;
      expect(err.code).toBe("upstream_protocol_error");
      expect(err.status).toBe(502);
      expect(err.source).toBe("upstream");
      // Public text never echoes the provider's body.
      expect(err.message).not.toContain("choices");
    }
  });
});

describe("openai-chat encodeResponse", () => {
  const usage = { inputTokens: 10, outputTokens: 4, source: "provider" } as const;

  it("stamps the gateway id, created and public model; the provider's never appear", () => {
    const res = decode(providerBody(textChoice("Hi!")));
    const body = encode(res);
    expect(body).toEqual({
      id: "chatcmpl-gw-req123",
      object: "chat.completion",
      created: 1_760_000_000,
      model: "public-model",
      choices: [{ index: 0, message: { role: "assistant", content: "Hi!", refusal: null }, logprobs: null, finish_reason: "stop" }],
      usage: { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17 },
    });
    const text = JSON.stringify(body);
    expect(text).not.toContain("PROVIDER");
    expect(text).not.toContain("provider-model");
    expect(text).not.toContain("1111111111");
    expect(text).not.toContain("fp_123");
  });

  it("writes content null when the answer is only tool calls", () => {
    const body = encode({
      text: "",
      toolCalls: [{ id: "call_1", name: "lookup", arguments: '{"q":"x"}' }],
      stopReason: "tool_use",
      usage,
    });
    expect(body.choices).toEqual([
      {
        index: 0,
        message: {
          role: "assistant",
          content: null,
          refusal: null,
          tool_calls: [{ id: "call_1", type: "function", function: { name: "lookup", arguments: '{"q":"x"}' } }],
        },
        logprobs: null,
        finish_reason: "tool_calls",
      },
    ]);
  });

  it("keeps text beside tool calls, and an empty text answer as an empty string", () => {
    const both = encode({ text: "Let me check.", toolCalls: [{ id: "c", name: "f", arguments: "{}" }], stopReason: "tool_use", usage });
    expect((both.choices as { message: { content: unknown } }[])[0]!.message.content).toBe("Let me check.");
    const empty = encode({ text: "", toolCalls: [], stopReason: "end_turn", usage });
    const msg = (empty.choices as { message: Record<string, unknown> }[])[0]!.message;
    expect(msg.content).toBe("");
    expect(msg).not.toHaveProperty("tool_calls");
  });

  it("maps every stop reason back to a finish_reason", () => {
    const cases: [NeutralResponse["stopReason"], string][] = [
      ["end_turn", "stop"],
      ["stop_sequence", "stop"],
      ["other", "stop"],
      ["max_tokens", "length"],
      ["tool_use", "tool_calls"],
      ["content_filter", "content_filter"],
    ];
    for (const [stopReason, finish] of cases) {
      const body = encode({ text: "x", toolCalls: [], stopReason, usage });
      expect((body.choices as { finish_reason: string }[])[0]!.finish_reason, stopReason).toBe(finish);
    }
  });

  it("has no usage key when usage is unknown", () => {
    const body = encode({ text: "x", toolCalls: [], stopReason: "end_turn", usage: undefined });
    expect(body).not.toHaveProperty("usage");
    expect(JSON.stringify(body)).not.toContain("usage");
  });

  it("writes cached and reasoning details only when known, with total = input + output", () => {
    const full = encode({
      text: "x",
      toolCalls: [],
      stopReason: "end_turn",
      usage: { inputTokens: 100, outputTokens: 50, cachedInputTokens: 64, reasoningTokens: 20, source: "provider" },
    });
    expect(full.usage).toEqual({
      prompt_tokens: 100,
      completion_tokens: 50,
      total_tokens: 150,
      prompt_tokens_details: { cached_tokens: 64 },
      completion_tokens_details: { reasoning_tokens: 20 },
    });
    const bare = encode({ text: "x", toolCalls: [], stopReason: "end_turn", usage });
    expect(bare.usage).toEqual({ prompt_tokens: 10, completion_tokens: 4, total_tokens: 14 });
  });

  it("decode → encode → decode keeps text, tool calls, stop reason and usage", () => {
    const original = decode(
      providerBody(
        {
          message: { role: "assistant", content: "Checking.", tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: '{"a":1}' } }] },
          finish_reason: "tool_calls",
        },
        { usage: { prompt_tokens: 9, completion_tokens: 3, prompt_tokens_details: { cached_tokens: 8 }, completion_tokens_details: null } },
      ),
    );
    const again = decode(JSON.parse(JSON.stringify(encode(original))));
    expect(again).toEqual({ ...original, providerId: "chatcmpl-gw-req123" });
  });
});
