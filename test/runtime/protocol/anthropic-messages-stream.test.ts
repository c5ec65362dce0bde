import Anthropic from "@anthropic-ai/sdk";
import { describe, expect, it } from "vitest";
import { anthropicMessagesCodec } from "../../../src/protocol/anthropic-messages/index.ts";
import type { ResponseStamp } from "../../../src/protocol/codec.ts";
import type { NeutralEvent, NeutralRequest, Usage } from "../../../src/protocol/neutral.ts";
import { openAiChatCodec } from "../../../src/protocol/openai-chat/index.ts";
import { deltaChunk, usageChunk } from "./sse-helpers.ts";

const codec = anthropicMessagesCodec;
const stamp: ResponseStamp = { id: "chatcmpl-gw-stream1", created: 1_760_000_000, model: "public-model" };
const request: NeutralRequest = { model: "public-model", messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }], stream: true, streamUsage: true };

/** One Anthropic SSE event as written: its `event:` name and its JSON payload. */
type NamedEvent = { readonly event: string; readonly data: Record<string, unknown> };

/**
 * Strictly parses Anthropic SSE text as the gateway writes it: LF line endings, every block exactly
 * `event: <name>` then one `data: <json>` line then a blank line, and the payload's `type` equal to
 * the event name (the Anthropic SDK skips events without a name). Fails the test on anything else.
 */
function parseAnthropicSse(text: string): NamedEvent[] {
  if (text === "") return [];
  expect(text.endsWith("\n\n"), `SSE text must end with a blank line: ${JSON.stringify(text.slice(-40))}`).toBe(true);
  expect(text).not.toContain("\r");
  return text
    .slice(0, -2)
    .split("\n\n")
    .map((block) => {
      const lines = block.split("\n");
      expect(lines, `block: ${JSON.stringify(block)}`).toHaveLength(2);
      const [head, body] = lines as [string, string];
      expect(head, `event line: ${JSON.stringify(head)}`).toMatch(/^event: [a-z_]+$/);
      expect(body.startsWith("data: "), `data line: ${JSON.stringify(body)}`).toBe(true);
      let data: unknown;
      expect(() => (data = JSON.parse(body.slice("data: ".length))), `JSON payload: ${body}`).not.toThrow();
      expect(typeof data === "object" && data !== null && !Array.isArray(data)).toBe(true);
      const event = head.slice("event: ".length);
      expect((data as { type?: unknown }).type, `type of ${event}`).toBe(event);
      return { event, data: data as Record<string, unknown> };
    });
}

/**
 * Checks the ordering rules the Anthropic SDKs rely on: message_start first; content blocks
 * indexed 0,1,2… with each started, filled with deltas of its own kind and stopped before the next
 * starts; no block open at message_delta; one message_delta; message_stop last. A failed stream
 * ends with an error event and has neither message_stop nor anything after the error.
 */
function checkInvariants(events: readonly NamedEvent[], outcome: "complete" | "failed"): void {
  const names = events.map((e) => e.event).filter((n) => n !== "ping");
  expect(names[0]).toBe("message_start");
  expect(names.filter((n) => n === "message_start")).toHaveLength(1);
  const deltaKinds: Record<string, string> = { text_delta: "text", input_json_delta: "tool_use", thinking_delta: "thinking", signature_delta: "thinking" };
  let open: { index: number; type: string } | undefined;
  let next = 0;
  let sawDelta = false;
  for (const { event, data } of events) {
    switch (event) {
      case "content_block_start": {
        expect(open, "a block starts while another is open").toBeUndefined();
        expect(data.index).toBe(next++);
        open = { index: data.index as number, type: (data.content_block as { type: string }).type };
        break;
      }
      case "content_block_delta": {
        expect(open, "delta outside a block").toBeDefined();
        expect(data.index).toBe(open!.index);
        expect(deltaKinds[(data.delta as { type: string }).type]).toBe(open!.type);
        break;
      }
      case "content_block_stop":
        expect(data.index).toBe(open?.index);
        open = undefined;
        break;
      case "message_delta":
        expect(open, "a block is still open at message_delta").toBeUndefined();
        expect(sawDelta).toBe(false);
        sawDelta = true;
        expect(data.usage).toBeTypeOf("object");
        break;
    }
  }
  if (outcome === "complete") {
    expect(names.at(-1)).toBe("message_stop");
    expect(names.at(-2)).toBe("message_delta");
  } else {
    expect(names.at(-1)).toBe("error");
    expect(names).not.toContain("message_stop");
  }
}

/** Feeds provider events (objects are JSON-encoded, named by their type) to a fresh decoder. */
function decodeAll(events: readonly unknown[], finish = true): NeutralEvent[] {
  const d = codec.createStreamDecoder();
  const out: NeutralEvent[] = [];
  for (const e of events) {
    const data = typeof e === "string" ? e : JSON.stringify(e);
    const name = typeof e === "object" && e !== null ? String((e as { type?: unknown }).type) : undefined;
    out.push(...d.decode({ event: name, data }));
  }
  if (finish) out.push(...d.finish());
  return out;
}

function encodeAll(events: readonly NeutralEvent[]): string {
  const encoder = codec.createStreamEncoder(stamp, request);
  let text = "";
  for (const ev of events) text += encoder.encode(ev);
  return text + encoder.end();
}

// A recorded-style Anthropic stream: text, a ping, then a tool_use whose input arrives in pieces.
const messageStart = {
  type: "message_start",
  message: {
    id: "msg_01PROVIDER",
    type: "message",
    role: "assistant",
    model: "claude-provider-2025",
    content: [],
    stop_reason: null,
    stop_sequence: null,
    usage: { input_tokens: 472, cache_creation_input_tokens: 100, cache_read_input_tokens: 2000, output_tokens: 2, service_tier: "standard" },
  },
};
const recorded = [
  messageStart,
  { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
  { type: "ping" },
  { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Okay, let me check " } },
  { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "the weather." } },
  { type: "content_block_stop", index: 0 },
  { type: "content_block_start", index: 1, content_block: { type: "tool_use", id: "toolu_01T1x", name: "get_weather", input: {} } },
  { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: "" } },
  { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: '{"location": "San Fra' } },
  { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: 'ncisco, CA", "unit": "fahrenheit"}' } },
  { type: "content_block_stop", index: 1 },
  { type: "message_delta", delta: { stop_reason: "tool_use", stop_sequence: null }, usage: { output_tokens: 89 } },
  { type: "message_stop" },
];
const recordedUsage: Usage = { inputTokens: 2572, outputTokens: 89, cachedInputTokens: 2000, cacheWriteInputTokens: 100, reasoningTokens: undefined, source: "provider" };

describe("anthropic-messages stream decoder", () => {
  it("decodes a recorded text + tool_use stream, with usage from message_start and message_delta after the stop", () => {
    expect(decodeAll(recorded)).toEqual([
      { type: "start" },
      { type: "heartbeat" },
      { type: "text", text: "Okay, let me check " },
      { type: "text", text: "the weather." },
      { type: "tool_call_start", index: 0, id: "toolu_01T1x", name: "get_weather" },
      { type: "tool_call_args", index: 0, delta: '{"location": "San Fra' },
      { type: "tool_call_args", index: 0, delta: 'ncisco, CA", "unit": "fahrenheit"}' },
      { type: "stop", reason: "tool_use" },
      { type: "usage", usage: recordedUsage },
    ]);
  });

  it("numbers tool calls from 0 whatever their block index, and gives an argument-less call '{}'", () => {
    const events = decodeAll([
      messageStart,
      { type: "content_block_start", index: 0, content_block: { type: "thinking", thinking: "", signature: "" } },
      { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "Two tools." } },
      { type: "content_block_delta", index: 0, delta: { type: "signature_delta", signature: "EqQBSig" } },
      { type: "content_block_stop", index: 0 },
      { type: "content_block_start", index: 1, content_block: { type: "tool_use", id: "toolu_a", name: "get_time", input: {} } },
      { type: "content_block_stop", index: 1 },
      { type: "content_block_start", index: 2, content_block: { type: "tool_use", id: "toolu_b", name: "get_weather", input: {} } },
      { type: "content_block_delta", index: 2, delta: { type: "input_json_delta", partial_json: '{"city":"Oslo"}' } },
      { type: "content_block_stop", index: 2 },
      { type: "message_delta", delta: { stop_reason: "tool_use", stop_sequence: null }, usage: { output_tokens: 30 } },
      { type: "message_stop" },
    ]);
    expect(events.slice(1, -2)).toEqual([
      { type: "reasoning", text: "Two tools." },
      { type: "reasoning_signature", signature: "EqQBSig" },
      { type: "tool_call_start", index: 0, id: "toolu_a", name: "get_time" },
      { type: "tool_call_args", index: 0, delta: "{}" },
      { type: "tool_call_start", index: 1, id: "toolu_b", name: "get_weather" },
      { type: "tool_call_args", index: 1, delta: '{"city":"Oslo"}' },
    ]);
  });

  it("decodes a redacted_thinking block as a marked signature, and skips server-tool blocks and citation deltas", () => {
    const events = decodeAll([
      messageStart,
      { type: "content_block_start", index: 0, content_block: { type: "redacted_thinking", data: "EmwRedacted" } },
      { type: "content_block_stop", index: 0 },
      { type: "content_block_start", index: 1, content_block: { type: "server_tool_use", id: "srvtoolu_1", name: "web_search", input: {} } },
      { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: '{"q":"x"}' } },
      { type: "content_block_stop", index: 1 },
      { type: "content_block_start", index: 2, content_block: { type: "text", text: "" } },
      { type: "content_block_delta", index: 2, delta: { type: "citations_delta", citation: { type: "char_location" } } },
      { type: "content_block_delta", index: 2, delta: { type: "text_delta", text: "done" } },
      { type: "content_block_stop", index: 2 },
      { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 3 } },
      { type: "message_stop" },
    ]);
    expect(events.slice(1, -2)).toEqual([
      { type: "reasoning_signature", signature: "anthropic-redacted-thinking:EmwRedacted" },
      { type: "text", text: "done" },
    ]);
  });

  it("maps the stop reason and stop sequence, and prefers message_delta's cumulative input figures", () => {
    const events = decodeAll([
      messageStart,
      { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
      { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "a" } },
      { type: "content_block_stop", index: 0 },
      {
        type: "message_delta",
        delta: { stop_reason: "stop_sequence", stop_sequence: "END" },
        usage: { input_tokens: 500, cache_read_input_tokens: 2000, cache_creation_input_tokens: null, output_tokens: 12, output_tokens_details: { thinking_tokens: 4 } },
      },
      { type: "message_stop" },
    ]);
    expect(events.slice(-2)).toEqual([
      { type: "stop", reason: "stop_sequence", stopSequence: "END" },
      { type: "usage", usage: { inputTokens: 2600, outputTokens: 12, cachedInputTokens: 2000, cacheWriteInputTokens: 100, reasoningTokens: 4, source: "provider" } },
    ]);
    for (const [reason, stop] of [["max_tokens", "max_tokens"], ["refusal", "content_filter"], ["pause_turn", "other"], ["end_turn", "end_turn"]] as const) {
      const evs = decodeAll([messageStart, { type: "message_delta", delta: { stop_reason: reason, stop_sequence: null }, usage: { output_tokens: 1 } }, { type: "message_stop" }]);
      expect(evs.find((e) => e.type === "stop"), reason).toEqual({ type: "stop", reason: stop });
    }
  });

  it("never invents usage: no usage event when message_delta or message_start lacks its side", () => {
    const noDeltaUsage = decodeAll([messageStart, { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null } }, { type: "message_stop" }]);
    expect(noDeltaUsage.some((e) => e.type === "usage")).toBe(false);
    const noStartUsage = decodeAll([
      { type: "message_start", message: { id: "m", content: [] } },
      { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 4 } },
      { type: "message_stop" },
    ]);
    expect(noStartUsage.some((e) => e.type === "usage")).toBe(false);
  });

  it("gives a stream that ends properly without a stop reason a stop, then its usage", () => {
    const events = decodeAll([messageStart, { type: "message_delta", delta: { stop_reason: null, stop_sequence: null }, usage: { output_tokens: 2 } }, { type: "message_stop" }]);
    expect(events.slice(1)).toEqual([
      { type: "stop", reason: "other" },
      { type: "usage", usage: { ...recordedUsage, outputTokens: 2 } },
    ]);
  });

  it("reports a stream cut before message_stop as upstream_stream_cut, even after message_delta", () => {
    const cut = decodeAll(recorded.slice(0, 5));
    expect(cut.at(-1)).toEqual({ type: "error", code: "upstream_stream_cut", message: expect.any(String) });
    const afterDelta = decodeAll(recorded.slice(0, -1));
    expect(afterDelta.at(-1)).toMatchObject({ type: "error", code: "upstream_stream_cut" });
    expect(decodeAll([])).toEqual([{ type: "error", code: "upstream_stream_cut", message: expect.any(String) }]);
  });

  it("yields nothing from finish() after message_stop, and ignores events after it", () => {
    const d = codec.createStreamDecoder();
    for (const e of recorded) d.decode({ event: e.type, data: JSON.stringify(e) });
    expect(d.decode({ event: "content_block_delta", data: JSON.stringify(recorded[3]) })).toEqual([]);
    expect(d.finish()).toEqual([]);
  });

  it("turns an error event into one upstream_error without the provider's text, then goes quiet", () => {
    const d = codec.createStreamDecoder();
    expect(d.decode({ event: "message_start", data: JSON.stringify(messageStart) })).toEqual([{ type: "start" }]);
    const err = d.decode({ event: "error", data: JSON.stringify({ type: "error", error: { type: "overloaded_error", message: "Overloaded on host-10.0.0.3" } }) });
    expect(err).toEqual([{ type: "error", code: "upstream_error", message: expect.stringContaining("overloaded") }]);
    expect((err[0] as { message: string }).message).not.toContain("host-10");
    expect(d.decode({ event: "ping", data: '{"type":"ping"}' })).toEqual([]);
    expect(d.finish()).toEqual([]);
    const api = decodeAll([{ type: "error", error: { type: "api_error", message: "Internal server error" } }]);
    expect(api).toEqual([{ type: "error", code: "upstream_error", message: "The provider reported an error mid-stream." }]);
  });

  it("turns unparseable or malformed events into upstream_protocol_error", () => {
    const bad = [
      "{not json",
      "null",
      '"text"',
      '{"no_type":1}',
      '{"type":"message_start"}',
      '{"type":"content_block_start","index":-1,"content_block":{"type":"text","text":""}}',
      '{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","name":"f","input":{}}}',
      '{"type":"content_block_delta","index":7,"delta":{"type":"text_delta","text":"x"}}',
      '{"type":"content_block_stop","index":3}',
      '{"type":"message_delta","delta":{"stop_reason":5}}',
    ];
    for (const data of bad) {
      const d = codec.createStreamDecoder();
      const out = d.decode({ data });
      expect(out.at(-1), data).toEqual({ type: "error", code: "upstream_protocol_error", message: expect.any(String) });
      expect(d.finish()).toEqual([]);
    }
    // A delta of the wrong kind for its block, and a block index reused.
    const wrongKind = decodeAll([messageStart, recorded[1], { type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json: "{}" } }], false);
    expect(wrongKind.at(-1)).toMatchObject({ type: "error", code: "upstream_protocol_error" });
    const reused = decodeAll([messageStart, recorded[1], recorded[1]], false);
    expect(reused.at(-1)).toMatchObject({ type: "error", code: "upstream_protocol_error" });
  });

  it("emits start exactly once, and skips unknown event types", () => {
    const events = decodeAll([{ type: "ping" }, messageStart, { type: "future_event", x: 1 }, ...recorded.slice(1)]);
    expect(events.filter((e) => e.type === "start")).toHaveLength(1);
    expect(events[0]).toEqual({ type: "start" });
    expect(events.at(-1)).toEqual({ type: "usage", usage: recordedUsage });
  });
});

/** The OpenAI-protocol provider's order: a finish chunk (stop), then a usage chunk, then [DONE]. */
function openAiToolCallEvents(withUsage: boolean): NeutralEvent[] {
  const d = openAiChatCodec.createStreamDecoder();
  const chunks: unknown[] = [
    deltaChunk({ role: "assistant", content: "" }),
    deltaChunk({ content: "Checking." }),
    deltaChunk({ tool_calls: [{ index: 0, id: "call_a", type: "function", function: { name: "get_weather", arguments: "" } }] }),
    deltaChunk({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }),
    deltaChunk({ tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] }),
    deltaChunk({ tool_calls: [{ index: 1, id: "call_b", type: "function", function: { name: "get_time", arguments: "{}" } }] }),
    deltaChunk({}, "tool_calls"),
  ];
  if (withUsage) chunks.push(usageChunk({ prompt_tokens: 120, completion_tokens: 30, total_tokens: 150, prompt_tokens_details: { cached_tokens: 100 } }));
  const out: NeutralEvent[] = [];
  for (const c of chunks) out.push(...d.decode({ data: JSON.stringify(c) }));
  out.push(...d.decode({ data: "[DONE]" }), ...d.finish());
  return out;
}

describe("anthropic-messages stream encoder", () => {
  const textAnswer: NeutralEvent[] = [
    { type: "start" },
    { type: "text", text: "Hel" },
    { type: "text", text: "lo \"quoted\"\n日本 🙂" },
    { type: "stop", reason: "end_turn" },
    { type: "usage", usage: { inputTokens: 2050, outputTokens: 7, cachedInputTokens: 2000, cacheWriteInputTokens: 0, source: "provider" } },
  ];

  it("writes a text answer as Anthropic events: placeholder usage at start, real usage in message_delta", () => {
    const events = parseAnthropicSse(encodeAll(textAnswer));
    checkInvariants(events, "complete");
    expect(events).toEqual([
      {
        event: "message_start",
        data: {
          type: "message_start",
          message: {
            id: "msg_gw-stream1",
            type: "message",
            role: "assistant",
            model: "public-model",
            content: [],
            stop_reason: null,
            stop_sequence: null,
            usage: { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: null, cache_read_input_tokens: null },
          },
        },
      },
      { event: "content_block_start", data: { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } } },
      { event: "content_block_delta", data: { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Hel" } } },
      { event: "content_block_delta", data: { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "lo \"quoted\"\n日本 🙂" } } },
      { event: "content_block_stop", data: { type: "content_block_stop", index: 0 } },
      {
        event: "message_delta",
        data: {
          type: "message_delta",
          delta: { stop_reason: "end_turn", stop_sequence: null },
          usage: { input_tokens: 50, cache_creation_input_tokens: 0, cache_read_input_tokens: 2000, output_tokens: 7 },
        },
      },
      { event: "message_stop", data: { type: "message_stop" } },
    ]);
  });

  it("writes an OpenAI provider's tool-call answer (stop before usage) with message_delta after the usage", () => {
    const neutral = openAiToolCallEvents(true);
    expect(neutral.map((e) => e.type).slice(-2)).toEqual(["stop", "usage"]);
    const events = parseAnthropicSse(encodeAll(neutral));
    checkInvariants(events, "complete");
    expect(events.map((e) => e.event)).toEqual([
      "message_start",
      "content_block_start",
      "content_block_delta",
      "content_block_stop",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "content_block_start",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    expect(events[4]!.data).toEqual({ type: "content_block_start", index: 1, content_block: { type: "tool_use", id: "call_a", name: "get_weather", input: {} } });
    expect(events.filter((e) => e.event === "content_block_delta").map((e) => e.data.delta)).toEqual([
      { type: "text_delta", text: "Checking." },
      { type: "input_json_delta", partial_json: '{"city":' },
      { type: "input_json_delta", partial_json: '"Oslo"}' },
      { type: "input_json_delta", partial_json: "{}" },
    ]);
    expect(events.at(-2)!.data).toEqual({
      type: "message_delta",
      delta: { stop_reason: "tool_use", stop_sequence: null },
      usage: { input_tokens: 20, cache_creation_input_tokens: null, cache_read_input_tokens: 100, output_tokens: 30 },
    });
  });

  it("writes message_delta at end() with unknown usage as null when the provider sent none", () => {
    const events = parseAnthropicSse(encodeAll(openAiToolCallEvents(false)));
    checkInvariants(events, "complete");
    expect(events.at(-2)!.data).toEqual({ type: "message_delta", delta: { stop_reason: "tool_use", stop_sequence: null }, usage: { output_tokens: null } });
  });

  it("ends a cut stream with an error event and no message_stop", () => {
    const text = encodeAll([
      { type: "start" },
      { type: "text", text: "partial" },
      { type: "error", code: "upstream_stream_cut", message: "The provider's stream ended before it was complete." },
    ]);
    const events = parseAnthropicSse(text);
    checkInvariants(events, "failed");
    expect(events.at(-1)).toEqual({
      event: "error",
      data: { type: "error", error: { type: "api_error", message: "The provider's stream ended before it was complete." } },
    });
  });

  it("writes no message_delta or message_stop when the error comes after the stop, and nothing after an error", () => {
    for (const code of ["upstream_stream_cut", "upstream_protocol_error", "upstream_error", "deadline_exceeded"] as const) {
      const encoder = codec.createStreamEncoder(stamp, request);
      let text = "";
      for (const ev of [{ type: "start" }, { type: "text", text: "x" }, { type: "stop", reason: "end_turn" }, { type: "error", code, message: "failed" }] as NeutralEvent[]) {
        text += encoder.encode(ev);
      }
      expect(encoder.encode({ type: "usage", usage: { inputTokens: 1, outputTokens: 1, source: "provider" } })).toBe("");
      text += encoder.end();
      const events = parseAnthropicSse(text);
      checkInvariants(events, "failed");
      expect(events.map((e) => e.event)).not.toContain("message_delta");
      expect(events.at(-1)!.data).toEqual({ type: "error", error: { type: "api_error", message: "failed" } });
    }
  });

  it("writes message_stop only after a stop", () => {
    expect(encodeAll([{ type: "start" }, { type: "text", text: "no stop" }])).not.toContain("message_stop");
    expect(codec.createStreamEncoder(stamp, request).end()).toBe("");
  });

  it("writes a heartbeat as a ping event that neither completes nor fails the stream", () => {
    const encoder = codec.createStreamEncoder(stamp, request);
    const ping = encoder.encode({ type: "heartbeat" });
    expect(parseAnthropicSse(ping)).toEqual([{ event: "ping", data: { type: "ping" } }]);
    expect(encoder.end()).toBe("");
  });

  it("writes thinking blocks with signatures, a redacted block, and a new block for reasoning after a signature", () => {
    const events = parseAnthropicSse(
      encodeAll([
        { type: "start" },
        { type: "reasoning", text: "First, " },
        { type: "reasoning", text: "think." },
        { type: "reasoning_signature", signature: "EqSig1" },
        { type: "reasoning_signature", signature: "anthropic-redacted-thinking:EmwR" },
        { type: "reasoning", text: "More." },
        { type: "text", text: "Answer." },
        { type: "stop", reason: "end_turn" },
        { type: "usage", usage: { inputTokens: 5, outputTokens: 9, reasoningTokens: 6, source: "provider" } },
      ]),
    );
    checkInvariants(events, "complete");
    const blocks = events.filter((e) => e.event === "content_block_start").map((e) => e.data.content_block);
    expect(blocks).toEqual([
      { type: "thinking", thinking: "", signature: "" },
      { type: "redacted_thinking", data: "EmwR" },
      { type: "thinking", thinking: "", signature: "" },
      { type: "text", text: "" },
    ]);
    expect(events.filter((e) => e.event === "content_block_delta").map((e) => [e.data.index, e.data.delta])).toEqual([
      [0, { type: "thinking_delta", thinking: "First, " }],
      [0, { type: "thinking_delta", thinking: "think." }],
      [0, { type: "signature_delta", signature: "EqSig1" }],
      [2, { type: "thinking_delta", thinking: "More." }],
      [3, { type: "text_delta", text: "Answer." }],
    ]);
    expect(events.at(-2)!.data.usage).toMatchObject({ output_tokens: 9, output_tokens_details: { thinking_tokens: 6 } });
  });

  it("maps stop reasons, the stop sequence, and reports tool_use when tool blocks were written", () => {
    const stopOf = (evs: NeutralEvent[]) => parseAnthropicSse(encodeAll(evs)).find((e) => e.event === "message_delta")!.data.delta;
    expect(stopOf([{ type: "start" }, { type: "text", text: "x" }, { type: "stop", reason: "stop_sequence", stopSequence: "END" }])).toEqual({
      stop_reason: "stop_sequence",
      stop_sequence: "END",
    });
    expect(stopOf([{ type: "start" }, { type: "stop", reason: "content_filter" }])).toEqual({ stop_reason: "refusal", stop_sequence: null });
    expect(stopOf([{ type: "start" }, { type: "stop", reason: "max_tokens" }])).toEqual({ stop_reason: "max_tokens", stop_sequence: null });
    expect(stopOf([{ type: "start" }, { type: "stop", reason: "other" }])).toEqual({ stop_reason: "end_turn", stop_sequence: null });
    expect(stopOf([{ type: "start" }, { type: "tool_call_start", index: 0, id: "c", name: "f" }, { type: "stop", reason: "end_turn" }])).toEqual({
      stop_reason: "tool_use",
      stop_sequence: null,
    });
  });

  it("skips empty text and arguments, ignores a repeated tool start, keeps a closed call's index for late arguments", () => {
    const events = parseAnthropicSse(
      encodeAll([
        { type: "start" },
        { type: "text", text: "" },
        { type: "reasoning", text: "" },
        { type: "tool_call_start", index: 0, id: "call_a", name: "f" },
        { type: "tool_call_start", index: 0, id: "call_a", name: "f" },
        { type: "tool_call_args", index: 0, delta: "" },
        { type: "tool_call_args", index: 0, delta: '{"a":' },
        { type: "tool_call_start", index: 1, id: "call_b", name: "g" },
        // A provider interleaving parallel calls: call 0's block is closed, its index is kept.
        { type: "tool_call_args", index: 0, delta: "1}" },
        { type: "tool_call_args", index: 1, delta: "{}" },
        // Arguments for a call that never started have no block to go to.
        { type: "tool_call_args", index: 5, delta: '{"lost":true}' },
        { type: "stop", reason: "tool_use" },
      ]),
    );
    expect(events.filter((e) => e.event === "content_block_start").map((e) => e.data.index)).toEqual([0, 1]);
    expect(events.filter((e) => e.event === "content_block_delta").map((e) => [e.data.index, (e.data.delta as { partial_json: string }).partial_json])).toEqual([
      [0, '{"a":'],
      [0, "1}"],
      [1, "{}"],
    ]);
    expect(events.at(-1)!.event).toBe("message_stop");
  });

  it("writes message_start before anything else even when the first event is not start", () => {
    const events = parseAnthropicSse(encodeAll([{ type: "text", text: "x" }, { type: "stop", reason: "end_turn" }]));
    checkInvariants(events, "complete");
  });

  it("round-trips: decoder output → encoder → decoder yields the same events", () => {
    const providerEvents = decodeAll(recorded);
    const client = parseAnthropicSse(encodeAll(providerEvents)).map((e) => e.data);
    expect(decodeAll(client)).toEqual(providerEvents);
  });
});

/** An Anthropic SDK client whose every request is answered with `sse` as an event stream. */
function sdkOver(sse: string): Anthropic {
  return new Anthropic({
    apiKey: "test-key",
    baseURL: "http://sluice.test",
    maxRetries: 0,
    fetch: async () => new Response(sse, { headers: { "content-type": "text/event-stream" } }),
  });
}

const sdkParams = { model: "public-model", max_tokens: 100, messages: [{ role: "user" as const, content: "hi" }] };

describe("anthropic-messages stream encoder, read by the Anthropic SDK", () => {
  it("accumulates an OpenAI provider's tool-call answer into the final message, with the real usage", async () => {
    const message = await sdkOver(encodeAll(openAiToolCallEvents(true))).messages.stream(sdkParams).finalMessage();
    expect(message.id).toBe("msg_gw-stream1");
    expect(message.model).toBe("public-model");
    expect(message.stop_reason).toBe("tool_use");
    expect(message.content).toEqual([
      { type: "text", text: "Checking." },
      { type: "tool_use", id: "call_a", name: "get_weather", input: { city: "Oslo" } },
      { type: "tool_use", id: "call_b", name: "get_time", input: {} },
    ]);
    expect(message.usage).toMatchObject({ input_tokens: 20, cache_read_input_tokens: 100, output_tokens: 30 });
  });

  it("accumulates a decoded Anthropic stream with thinking unchanged", async () => {
    const provider = decodeAll([
      messageStart,
      { type: "content_block_start", index: 0, content_block: { type: "thinking", thinking: "", signature: "" } },
      { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "Hmm." } },
      { type: "content_block_delta", index: 0, delta: { type: "signature_delta", signature: "EqSig" } },
      { type: "content_block_stop", index: 0 },
      // The recorded blocks, one index later.
      ...recorded.slice(1).map((e) => ("index" in e && typeof e.index === "number" ? { ...e, index: e.index + 1 } : e)),
    ]);
    const message = await sdkOver(encodeAll(provider)).messages.stream(sdkParams).finalMessage();
    expect(message.content).toEqual([
      { type: "thinking", thinking: "Hmm.", signature: "EqSig" },
      { type: "text", text: "Okay, let me check the weather." },
      { type: "tool_use", id: "toolu_01T1x", name: "get_weather", input: { location: "San Francisco, CA", unit: "fahrenheit" } },
    ]);
    expect(message.usage).toMatchObject({ input_tokens: 472, cache_read_input_tokens: 2000, cache_creation_input_tokens: 100, output_tokens: 89 });
  });

  it("surfaces a cut stream as an APIError of the envelope's type", async () => {
    const sse = encodeAll([{ type: "start" }, { type: "text", text: "partial" }, { type: "error", code: "upstream_stream_cut", message: "cut" }]);
    const err: unknown = await sdkOver(sse)
      .messages.stream(sdkParams)
      .finalMessage()
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect((err as { error?: unknown }).error).toEqual({ type: "error", error: { type: "api_error", message: "cut" } });
  });
});

describe("Anthropic Messages stream decoder: deltas of a learnt shape", () => {
  const ev = (type: string, body: Record<string, unknown> = {}) => JSON.stringify({ type, ...body });
  const opening = [
    ev("message_start", { message: { id: "msg_1", type: "message", role: "assistant", model: "m", content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 3, output_tokens: 1 } } }),
    ev("content_block_start", { index: 0, content_block: { type: "text", text: "" } }),
    ev("content_block_start", { index: 1, content_block: { type: "thinking", thinking: "", signature: "" } }),
    ev("content_block_start", { index: 2, content_block: { type: "server_tool_use", id: "srv_1", name: "web_search", input: {} } }),
  ];
  const text = (index: number, t: unknown) => ev("content_block_delta", { index, delta: { type: "text_delta", text: t } });
  const thinking = (t: string) => ev("content_block_delta", { index: 1, delta: { type: "thinking_delta", thinking: t } });
  const swap = (data: string, from: string, to: string) => data.replace(from, to);

  /** An event decoded by a decoder that saw only the opening events: no shape learnt. */
  function alone(data: string): NeutralEvent[] {
    const d = codec.createStreamDecoder();
    for (const o of opening) d.decode({ data: o });
    return [...d.decode({ data })];
  }

  it("reads each delta as parsing it alone would, whatever its string holds", () => {
    const deltas = [
      text(0, "Hello"),
      text(0, ""),
      text(0, "é 👋 \u2028 \"quoted\" back\\slash\nline"),
      swap(text(0, "é!"), "é", String.raw`\u00e9`),
      swap(text(0, "ab"), "ab", String.raw`\ud83d\udc4b`),
      thinking("think"),
      thinking("more"),
      JSON.stringify({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "cited", citations: [] } }),
      text(0, "again"),
      text(2, "skipped block"),
      text(2, "still skipped"),
      ev("ping"),
      text(0, "after"),
    ];
    const d = codec.createStreamDecoder();
    for (const o of opening) d.decode({ data: o });
    for (const data of deltas) expect(d.decode({ data }), data).toEqual(alone(data));
  });

  it("fails an event of a learnt shape whose string is not a well-formed one, as parsing does", () => {
    for (const bad of [swap(text(0, "xy"), "xy", String.raw`\q`), swap(text(0, "xy"), '"xy"', '"x\ty"'), swap(text(0, "xy"), '"xy"', '"x"y"'), text(0, 5)]) {
      const d = codec.createStreamDecoder();
      for (const o of opening) d.decode({ data: o });
      d.decode({ data: text(0, "learn") });
      d.decode({ data: text(0, "learnt") });
      const events = d.decode({ data: bad });
      expect(events, bad).toEqual(alone(bad));
      expect(events[0]?.type, bad).toBe("error");
    }
  });
});
