import { createParser } from "eventsource-parser";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import type { ResponseStamp, SseEvent } from "../../../src/protocol/codec.ts";
import type { NeutralEvent, NeutralRequest, Usage } from "../../../src/protocol/neutral.ts";
import { openAiResponsesCodec } from "../../../src/protocol/openai-responses/index.ts";
import { parseTypedSse, type TypedClientEvent } from "./sse-helpers.ts";

const stamp: ResponseStamp = { id: "fedcba9876543210fedcba9876543210", created: 1_760_000_000, model: "public-model" };
const RESP = "resp_fedcba9876543210fedcba9876543210";

const request: NeutralRequest = {
  model: "public-model",
  messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
  tools: [{ name: "get_weather", parameters: { type: "object" } }],
  temperature: 0.3,
  stream: true,
  streamUsage: true,
};

// ---- provider side -----------------------------------------------------------------------------

/** Provider events as OpenAI sends them: `event:` name plus a JSON payload numbered in order. */
function providerEvents(events: readonly [string, Record<string, unknown>][]): SseEvent[] {
  return events.map(([type, fields], i) => ({ event: type, data: JSON.stringify({ type, sequence_number: i, ...fields }) }));
}

function decodeAll(events: readonly SseEvent[], finish = true): NeutralEvent[] {
  const d = openAiResponsesCodec.createStreamDecoder();
  const out: NeutralEvent[] = [];
  for (const e of events) out.push(...d.decode(e));
  if (finish) out.push(...d.finish());
  return out;
}

const wireUsage = { input_tokens: 40, input_tokens_details: { cached_tokens: 32 }, output_tokens: 18, output_tokens_details: { reasoning_tokens: 6 }, total_tokens: 58 };
const providerResponse = (status: string, extra: Record<string, unknown> = {}) => ({
  id: "resp_PROVIDER",
  object: "response",
  created_at: 1_111_111_111,
  status,
  model: "provider-model",
  output: [],
  usage: null,
  ...extra,
});

const msg = (status: string, text?: string) => ({
  id: "msg_P",
  type: "message",
  status,
  role: "assistant",
  content: text === undefined ? [] : [{ type: "output_text", text, annotations: [] }],
});
const fc = (id: string, callId: string, name: string, status: string, args: string) => ({ id, type: "function_call", status, arguments: args, call_id: callId, name });

/** A realistic stream: reasoning summary, text, two function calls with arguments in pieces, completed with usage. */
const realistic: [string, Record<string, unknown>][] = [
  ["response.created", { response: providerResponse("in_progress") }],
  ["response.in_progress", { response: providerResponse("in_progress") }],
  ["response.output_item.added", { output_index: 0, item: { id: "rs_P", type: "reasoning", summary: [] } }],
  ["response.reasoning_summary_part.added", { item_id: "rs_P", output_index: 0, summary_index: 0, part: { type: "summary_text", text: "" } }],
  ["response.reasoning_summary_text.delta", { item_id: "rs_P", output_index: 0, summary_index: 0, delta: "Look up " }],
  ["response.reasoning_summary_text.delta", { item_id: "rs_P", output_index: 0, summary_index: 0, delta: "weather." }],
  ["response.reasoning_summary_text.done", { item_id: "rs_P", output_index: 0, summary_index: 0, text: "Look up weather." }],
  ["response.reasoning_summary_part.done", { item_id: "rs_P", output_index: 0, summary_index: 0, part: { type: "summary_text", text: "Look up weather." } }],
  ["response.reasoning_summary_part.added", { item_id: "rs_P", output_index: 0, summary_index: 1, part: { type: "summary_text", text: "" } }],
  ["response.reasoning_summary_text.delta", { item_id: "rs_P", output_index: 0, summary_index: 1, delta: "Then time." }],
  ["response.output_item.done", { output_index: 0, item: { id: "rs_P", type: "reasoning", summary: [{ type: "summary_text", text: "Look up weather." }, { type: "summary_text", text: "Then time." }] } }],
  ["response.output_item.added", { output_index: 1, item: msg("in_progress") }],
  ["response.content_part.added", { item_id: "msg_P", output_index: 1, content_index: 0, part: { type: "output_text", text: "", annotations: [] } }],
  ["response.output_text.delta", { item_id: "msg_P", output_index: 1, content_index: 0, delta: "Let me ", logprobs: [] }],
  ["response.output_text.delta", { item_id: "msg_P", output_index: 1, content_index: 0, delta: "check.", logprobs: [] }],
  ["response.output_text.done", { item_id: "msg_P", output_index: 1, content_index: 0, text: "Let me check.", logprobs: [] }],
  ["response.content_part.done", { item_id: "msg_P", output_index: 1, content_index: 0, part: { type: "output_text", text: "Let me check.", annotations: [] } }],
  ["response.output_item.done", { output_index: 1, item: msg("completed", "Let me check.") }],
  ["response.output_item.added", { output_index: 2, item: fc("fc_P1", "call_w", "get_weather", "in_progress", "") }],
  ["response.function_call_arguments.delta", { item_id: "fc_P1", output_index: 2, delta: '{"ci' }],
  ["response.function_call_arguments.delta", { item_id: "fc_P1", output_index: 2, delta: 'ty":"Oslo"}' }],
  ["response.function_call_arguments.done", { item_id: "fc_P1", output_index: 2, arguments: '{"city":"Oslo"}' }],
  ["response.output_item.done", { output_index: 2, item: fc("fc_P1", "call_w", "get_weather", "completed", '{"city":"Oslo"}') }],
  ["response.output_item.added", { output_index: 3, item: fc("fc_P2", "call_t", "get_time", "in_progress", "") }],
  ["response.function_call_arguments.delta", { item_id: "fc_P2", output_index: 3, delta: "{}" }],
  ["response.function_call_arguments.done", { item_id: "fc_P2", output_index: 3, arguments: "{}" }],
  ["response.output_item.done", { output_index: 3, item: fc("fc_P2", "call_t", "get_time", "completed", "{}") }],
  ["response.completed", { response: providerResponse("completed", { usage: wireUsage }) }],
];

const neutralUsage: Usage = { inputTokens: 40, outputTokens: 18, cachedInputTokens: 32, cacheWriteInputTokens: undefined, reasoningTokens: 6, source: "provider" };

describe("openai-responses stream decoder", () => {
  it("decodes a realistic stream: reasoning paragraphs, text, function-call arguments in pieces, completed with usage", () => {
    expect(decodeAll(providerEvents(realistic))).toEqual([
      { type: "start" },
      { type: "reasoning", text: "Look up " },
      { type: "reasoning", text: "weather." },
      { type: "reasoning", text: "\n\nThen time." },
      { type: "text", text: "Let me " },
      { type: "text", text: "check." },
      { type: "tool_call_start", index: 0, id: "call_w", name: "get_weather" },
      { type: "tool_call_args", index: 0, delta: '{"ci' },
      { type: "tool_call_args", index: 0, delta: 'ty":"Oslo"}' },
      { type: "tool_call_start", index: 1, id: "call_t", name: "get_time" },
      { type: "tool_call_args", index: 1, delta: "{}" },
      { type: "stop", reason: "tool_use" },
      { type: "usage", usage: neutralUsage },
    ]);
  });

  it("takes the event type from the payload, or from the SSE event name when the payload has none", () => {
    const events: SseEvent[] = [
      { data: JSON.stringify({ type: "response.created", response: providerResponse("in_progress") }) },
      { event: "response.output_text.delta", data: JSON.stringify({ item_id: "m", output_index: 0, content_index: 0, delta: "x" }) },
      { event: "response.completed", data: JSON.stringify({ type: "response.completed", response: providerResponse("completed") }) },
    ];
    expect(decodeAll(events)).toEqual([{ type: "start" }, { type: "text", text: "x" }, { type: "stop", reason: "end_turn" }]);
  });

  it("maps response.incomplete to the token-limit or content-filter stop, with usage", () => {
    const incomplete = (reason: string) =>
      decodeAll(
        providerEvents([
          ["response.created", { response: providerResponse("in_progress") }],
          ["response.output_text.delta", { item_id: "m", output_index: 0, content_index: 0, delta: "Hal", logprobs: [] }],
          ["response.incomplete", { response: providerResponse("incomplete", { incomplete_details: { reason }, usage: wireUsage }) }],
        ]),
      );
    expect(incomplete("max_output_tokens")).toEqual([
      { type: "start" },
      { type: "text", text: "Hal" },
      { type: "stop", reason: "max_tokens" },
      { type: "usage", usage: neutralUsage },
    ]);
    expect(incomplete("content_filter")).toContainEqual({ type: "stop", reason: "content_filter" });
  });

  it("reports a stream that ends without a terminal event as a cut, never a success", () => {
    const cut = decodeAll(providerEvents(realistic.slice(0, 15)));
    expect(cut.at(-1)).toEqual({ type: "error", code: "upstream_stream_cut", message: expect.any(String) });
    expect(cut.some((e) => e.type === "stop")).toBe(false);
    expect(decodeAll([])).toEqual([{ type: "error", code: "upstream_stream_cut", message: expect.any(String) }]);
  });

  it("reports response.failed and error events as the provider's error, and reads nothing after", () => {
    const d = openAiResponsesCodec.createStreamDecoder();
    const events = providerEvents([
      ["response.created", { response: providerResponse("in_progress") }],
      ["response.output_text.delta", { item_id: "m", output_index: 0, content_index: 0, delta: "par", logprobs: [] }],
      ["response.failed", { response: providerResponse("failed", { error: { code: "server_error", message: "The model crashed (secret detail)" } }) }],
      ["response.completed", { response: providerResponse("completed") }],
    ]);
    const out = events.flatMap((e) => d.decode(e));
    expect(out).toEqual([
      { type: "start" },
      { type: "text", text: "par" },
      { type: "error", code: "upstream_error", message: "The provider reported an error mid-stream." },
    ]);
    expect(d.finish()).toEqual([]);
    const viaError = decodeAll([{ event: "error", data: JSON.stringify({ type: "error", code: "rate_limit_exceeded", message: "slow down", param: null, sequence_number: 0 }) }]);
    expect(viaError).toEqual([{ type: "start" }, { type: "error", code: "upstream_error", message: expect.any(String) }]);
  });

  it("refuses unreadable events as upstream_protocol_error", () => {
    const protocolError = { type: "error", code: "upstream_protocol_error", message: expect.any(String) };
    expect(decodeAll([{ data: "{not json" }])).toEqual([protocolError]);
    expect(decodeAll([{ data: JSON.stringify({ delta: "x" }) }])).toEqual([protocolError]);
    expect(decodeAll(providerEvents([["response.output_text.delta", { item_id: "m", output_index: 0, delta: 5 }]]))).toEqual([{ type: "start" }, protocolError]);
    // Arguments for a call that was never announced.
    expect(decodeAll(providerEvents([["response.function_call_arguments.delta", { item_id: "fc_x", output_index: 4, delta: "{}" }]]))).toEqual([
      { type: "start" },
      protocolError,
    ]);
    expect(decodeAll(providerEvents([["response.output_item.added", { output_index: 0, item: { type: "function_call", id: "fc", name: "f" } }]]))).toEqual([
      { type: "start" },
      protocolError,
    ]);
    expect(decodeAll(providerEvents([["response.completed", { response: { output: "x" } }]]))).toEqual([{ type: "start" }, protocolError]);
  });

  it("delivers content only given in output_item.done, and only the part the deltas did not carry", () => {
    const events = providerEvents([
      ["response.created", { response: providerResponse("in_progress") }],
      ["response.output_item.added", { output_index: 0, item: msg("in_progress") }],
      ["response.output_text.delta", { item_id: "msg_P", output_index: 0, content_index: 0, delta: "Hel", logprobs: [] }],
      ["response.output_item.done", { output_index: 0, item: msg("completed", "Hello") }],
      ["response.output_item.done", { output_index: 1, item: fc("fc_1", "call_1", "f", "completed", '{"a":1}') }],
      ["response.output_item.done", { output_index: 2, item: { id: "rs_1", type: "reasoning", summary: [{ type: "summary_text", text: "why" }] } }],
      ["response.completed", { response: providerResponse("completed") }],
    ]);
    expect(decodeAll(events)).toEqual([
      { type: "start" },
      { type: "text", text: "Hel" },
      { type: "text", text: "lo" },
      { type: "tool_call_start", index: 0, id: "call_1", name: "f" },
      { type: "tool_call_args", index: 0, delta: '{"a":1}' },
      { type: "reasoning", text: "why" },
      { type: "stop", reason: "tool_use" },
    ]);
  });

  it("reads the answer from response.completed when no item was streamed", () => {
    const events = providerEvents([
      ["response.created", { response: providerResponse("in_progress") }],
      [
        "response.completed",
        {
          response: providerResponse("completed", {
            output: [{ id: "rs", type: "reasoning", summary: [{ type: "summary_text", text: "r" }] }, msg("completed", "All at once."), fc("fc", "call_9", "g", "completed", "{}")],
            usage: wireUsage,
          }),
        },
      ],
    ]);
    expect(decodeAll(events)).toEqual([
      { type: "start" },
      { type: "reasoning", text: "r" },
      { type: "text", text: "All at once." },
      { type: "tool_call_start", index: 0, id: "call_9", name: "g" },
      { type: "tool_call_args", index: 0, delta: "{}" },
      { type: "stop", reason: "tool_use" },
      { type: "usage", usage: neutralUsage },
    ]);
  });

  it("maps refusal deltas to text, keepalive to a heartbeat, and ignores unknown events", () => {
    const events = providerEvents([
      ["response.created", { response: providerResponse("in_progress") }],
      ["keepalive", {}],
      ["response.refusal.delta", { item_id: "m", output_index: 0, content_index: 0, delta: "No." }],
      ["response.output_text.annotation.added", { item_id: "m", output_index: 0, content_index: 0, annotation_index: 0, annotation: {} }],
      ["response.some_future_event", { anything: true }],
      ["response.completed", { response: providerResponse("completed") }],
    ]);
    expect(decodeAll(events)).toEqual([{ type: "start" }, { type: "heartbeat" }, { type: "text", text: "No." }, { type: "stop", reason: "end_turn" }]);
  });
});

// ---- client side -------------------------------------------------------------------------------

function encodeAll(events: readonly NeutralEvent[], req: NeutralRequest = request): string {
  const encoder = openAiResponsesCodec.createStreamEncoder(stamp, req);
  let text = "";
  for (const ev of events) text += encoder.encode(ev);
  return text + encoder.end();
}

type Ev = { event: string; value: Record<string, any> };
const eventsOf = (parsed: TypedClientEvent[]): Ev[] => parsed.flatMap((e) => (e.kind === "event" ? [{ event: e.event, value: e.value }] : []));

/** Checks the invariants of every Responses stream and returns its events. */
function checkStream(text: string): Ev[] {
  const events = eventsOf(parseTypedSse(text));
  expect(events.map((e) => e.value.sequence_number)).toEqual(events.map((_, i) => i));
  expect(events[0]?.event).toBe("response.created");
  expect(events[1]?.event).toBe("response.in_progress");
  for (const e of events) if (e.value.response) expect(e.value.response.id).toBe(RESP);
  // Items are added at the next output index, and every event on an item names it correctly.
  const added = new Map<number, string>();
  for (const e of events) {
    if (e.event === "response.output_item.added") {
      expect(e.value.output_index).toBe(added.size);
      added.set(e.value.output_index, e.value.item.id);
    } else if ("item_id" in e.value) {
      expect(added.get(e.value.output_index)).toBe(e.value.item_id);
    }
  }
  const terminal = events.findIndex((e) => ["response.completed", "response.incomplete"].includes(e.event));
  if (terminal >= 0) {
    expect(terminal).toBe(events.length - 1);
    // Every item added was done before the terminal event, which carries them all.
    const done = new Set(events.slice(0, terminal).filter((e) => e.event === "response.output_item.done").map((e) => e.value.item.id));
    expect([...added.values()].every((id) => done.has(id))).toBe(true);
    expect(events[terminal]!.value.response.output.map((o: { id: string }) => o.id)).toEqual([...added.values()]);
  }
  return events;
}

const usage: Usage = { inputTokens: 20, outputTokens: 7, cachedInputTokens: 16, reasoningTokens: 3, source: "provider" };

describe("openai-responses stream encoder", () => {
  it("encodes a text stream: numbered events, one message item, deltas joining to the full text, completed with usage", () => {
    const text = encodeAll([{ type: "start" }, { type: "text", text: "Hel" }, { type: "text", text: "" }, { type: "text", text: "lo!" }, { type: "stop", reason: "end_turn" }, { type: "usage", usage }]);
    const events = checkStream(text);
    expect(events.map((e) => e.event)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    const created = events[0]!.value.response;
    expect(created).toMatchObject({ object: "response", status: "in_progress", model: "public-model", created_at: 1_760_000_000, output: [], store: false, temperature: 0.3 });
    expect(created).not.toHaveProperty("usage");
    expect(created.tools).toEqual([{ type: "function", name: "get_weather", description: null, parameters: { type: "object" }, strict: null }]);
    const msgId = events[2]!.value.item.id;
    expect(events[2]!.value.item).toEqual({ id: msgId, type: "message", status: "in_progress", role: "assistant", content: [] });
    expect(events[4]!.value).toMatchObject({ item_id: msgId, output_index: 0, content_index: 0, delta: "Hel", logprobs: [] });
    const deltas = events.filter((e) => e.event === "response.output_text.delta").map((e) => e.value.delta).join("");
    expect(deltas).toBe("Hello!");
    expect(events.find((e) => e.event === "response.output_text.done")!.value.text).toBe("Hello!");
    const completed = events.at(-1)!.value.response;
    expect(completed.status).toBe("completed");
    expect(completed.incomplete_details).toBeNull();
    expect(completed.output).toEqual([
      { id: msgId, type: "message", status: "completed", role: "assistant", content: [{ type: "output_text", text: "Hello!", annotations: [] }] },
    ]);
    expect(completed.usage).toEqual({
      input_tokens: 20,
      input_tokens_details: { cached_tokens: 16, cache_write_tokens: 0 },
      output_tokens: 7,
      output_tokens_details: { reasoning_tokens: 3 },
      total_tokens: 27,
    });
  });

  it("writes the terminal event only at end(), so usage that follows the stop (OpenAI order) is in it", () => {
    const encoder = openAiResponsesCodec.createStreamEncoder(stamp, request);
    let text = encoder.encode({ type: "start" }) + encoder.encode({ type: "text", text: "x" }) + encoder.encode({ type: "stop", reason: "end_turn" });
    expect(text).not.toContain("response.completed");
    text += encoder.encode({ type: "usage", usage });
    expect(text).not.toContain("response.completed");
    const tail = encoder.end();
    expect(tail.startsWith("event: response.completed\n")).toBe(true);
    expect(checkStream(text + tail).at(-1)!.value.response.usage.total_tokens).toBe(27);
    expect(encoder.end()).toBe("");
  });

  it("encodes OpenAI-ordered tool calls (stop before usage): function_call items, argument pieces, all done before completed", () => {
    const text = encodeAll([
      { type: "start" },
      { type: "text", text: "Checking." },
      { type: "tool_call_start", index: 0, id: "call_a", name: "get_weather" },
      { type: "tool_call_args", index: 0, delta: '{"ci' },
      { type: "tool_call_args", index: 0, delta: 'ty":"Oslo"}' },
      { type: "tool_call_start", index: 1, id: "call_b", name: "get_time" },
      { type: "tool_call_args", index: 1, delta: "{}" },
      // A late piece for the first call still lands on it.
      { type: "tool_call_args", index: 0, delta: "" },
      { type: "stop", reason: "tool_use" },
      { type: "usage", usage },
    ]);
    const events = checkStream(text);
    const adds = events.filter((e) => e.event === "response.output_item.added").map((e) => e.value.item);
    expect(adds.map((i) => i.type)).toEqual(["message", "function_call", "function_call"]);
    expect(adds[1]).toEqual({ id: adds[1].id, type: "function_call", status: "in_progress", arguments: "", call_id: "call_a", name: "get_weather" });
    expect(new Set(adds.map((i) => i.id)).size).toBe(3);
    const argDeltas = (itemId: string) =>
      events.filter((e) => e.event === "response.function_call_arguments.delta" && e.value.item_id === itemId).map((e) => e.value.delta).join("");
    expect(argDeltas(adds[1].id)).toBe('{"city":"Oslo"}');
    expect(argDeltas(adds[2].id)).toBe("{}");
    const argDone = events.filter((e) => e.event === "response.function_call_arguments.done").map((e) => [e.value.item_id, e.value.arguments]);
    expect(argDone).toEqual([
      [adds[1].id, '{"city":"Oslo"}'],
      [adds[2].id, "{}"],
    ]);
    const completed = events.at(-1)!;
    expect(completed.event).toBe("response.completed");
    expect(completed.value.response.output.map((o: Record<string, unknown>) => [o.type, o.status, o.call_id ?? null, o.arguments ?? null])).toEqual([
      ["message", "completed", null, null],
      ["function_call", "completed", "call_a", '{"city":"Oslo"}'],
      ["function_call", "completed", "call_b", "{}"],
    ]);
    expect(completed.value.response.usage.input_tokens).toBe(20);
  });

  it("keeps function-call items open until the stop, so interleaved argument pieces land on the right call", () => {
    const events = checkStream(
      encodeAll([
        { type: "tool_call_start", index: 0, id: "c0", name: "a" },
        { type: "tool_call_start", index: 1, id: "c1", name: "b" },
        { type: "tool_call_args", index: 1, delta: '{"y":' },
        { type: "tool_call_args", index: 0, delta: '{"x":1}' },
        { type: "tool_call_args", index: 1, delta: "2}" },
        { type: "stop", reason: "tool_use" },
      ]),
    );
    const output = events.at(-1)!.value.response.output;
    expect(output.map((o: Record<string, unknown>) => [o.call_id, o.arguments])).toEqual([
      ["c0", '{"x":1}'],
      ["c1", '{"y":2}'],
    ]);
  });

  it("encodes reasoning as a reasoning item with summary-text events, and drops reasoning signatures", () => {
    const events = checkStream(
      encodeAll([
        { type: "start" },
        { type: "reasoning", text: "Think" },
        { type: "reasoning", text: "ing." },
        { type: "reasoning_signature", signature: "anthropic-sig" },
        { type: "text", text: "Answer." },
        { type: "stop", reason: "end_turn" },
      ]),
    );
    expect(events.map((e) => e.event).slice(2, 10)).toEqual([
      "response.output_item.added",
      "response.reasoning_summary_part.added",
      "response.reasoning_summary_text.delta",
      "response.reasoning_summary_text.delta",
      "response.reasoning_summary_text.done",
      "response.reasoning_summary_part.done",
      "response.output_item.done",
      "response.output_item.added",
    ]);
    expect(events[2]!.value.item).toEqual({ id: events[2]!.value.item.id, type: "reasoning", summary: [] });
    expect(events[4]!.value).toMatchObject({ summary_index: 0, delta: "Think" });
    expect(events[8]!.value.item).toEqual({ id: events[2]!.value.item.id, type: "reasoning", summary: [{ type: "summary_text", text: "Thinking." }] });
    expect(JSON.stringify(events)).not.toContain("anthropic-sig");
    // No usage arrived (a backend without stream usage): the terminal event has none, never zeros.
    expect(events.at(-1)!.value.response).not.toHaveProperty("usage");
  });

  it("ends a token-limited stream with response.incomplete and incomplete items", () => {
    const events = checkStream(encodeAll([{ type: "start" }, { type: "text", text: "Hal" }, { type: "stop", reason: "max_tokens" }, { type: "usage", usage }]));
    const last = events.at(-1)!;
    expect(last.event).toBe("response.incomplete");
    expect(last.value.response).toMatchObject({ status: "incomplete", incomplete_details: { reason: "max_output_tokens" } });
    expect(last.value.response.output[0].status).toBe("incomplete");
    expect(events.find((e) => e.event === "response.output_item.done")!.value.item.status).toBe("incomplete");
    expect(events.some((e) => e.event === "response.completed")).toBe(false);
    const filtered = checkStream(encodeAll([{ type: "start" }, { type: "text", text: "x" }, { type: "stop", reason: "content_filter" }])).at(-1)!;
    expect(filtered.value.response.incomplete_details).toEqual({ reason: "content_filter" });
  });

  it("ends an errored stream with response.failed and an error event, never response.completed", () => {
    const encoder = openAiResponsesCodec.createStreamEncoder(stamp, request);
    let text = "";
    for (const ev of [
      { type: "start" },
      { type: "text", text: "par" },
      { type: "tool_call_start", index: 0, id: "call_a", name: "f" },
      { type: "error", code: "upstream_stream_cut", message: "The provider's stream ended before it was complete." },
      { type: "text", text: "ignored" },
      { type: "stop", reason: "end_turn" },
    ] as NeutralEvent[])
      text += encoder.encode(ev);
    text += encoder.end();
    const events = checkStream(text);
    expect(events.map((e) => e.event).slice(-2)).toEqual(["response.failed", "error"]);
    expect(events.some((e) => e.event === "response.completed")).toBe(false);
    expect(text).not.toContain("ignored");
    const failed = events.at(-2)!.value.response;
    expect(failed.status).toBe("failed");
    expect(failed.error).toEqual({ code: "server_error", message: "The provider's stream ended before it was complete." });
    expect(failed.output.map((o: Record<string, unknown>) => [o.type, o.status])).toEqual([
      ["message", "incomplete"],
      ["function_call", "incomplete"],
    ]);
    expect(events.at(-1)!.value).toEqual({
      type: "error",
      sequence_number: events.length - 1,
      code: "upstream_stream_cut",
      message: "The provider's stream ended before it was complete.",
      param: null,
    });
  });

  it("fails rather than completes when the upstream is cut after the stop and usage", () => {
    const events = checkStream(
      encodeAll([
        { type: "start" },
        { type: "text", text: "done?" },
        { type: "stop", reason: "end_turn" },
        { type: "usage", usage },
        { type: "error", code: "upstream_stream_cut", message: "cut" },
      ]),
    );
    expect(events.map((e) => e.event).slice(-2)).toEqual(["response.failed", "error"]);
    expect(events.some((e) => e.event === "response.completed")).toBe(false);
  });

  it("writes response.created first even when the stream fails before any content", () => {
    const events = checkStream(encodeAll([{ type: "error", code: "upstream_protocol_error", message: "bad" }]));
    expect(events.map((e) => e.event)).toEqual(["response.created", "response.in_progress", "response.failed", "error"]);
  });

  it("turns heartbeats into SSE comments that take no sequence number", () => {
    const parsed = parseTypedSse(encodeAll([{ type: "heartbeat" }, { type: "start" }, { type: "heartbeat" }, { type: "text", text: "a" }, { type: "stop", reason: "end_turn" }]));
    expect(parsed.filter((e) => e.kind === "comment")).toEqual([
      { kind: "comment", text: "keep-alive" },
      { kind: "comment", text: "keep-alive" },
    ]);
    checkStream(encodeAll([{ type: "heartbeat" }, { type: "start" }, { type: "heartbeat" }, { type: "text", text: "a" }, { type: "stop", reason: "end_turn" }]));
  });

  it("writes no terminal event for a stream that never stopped", () => {
    const text = encodeAll([{ type: "start" }, { type: "text", text: "a" }]);
    expect(text).not.toContain("response.completed");
    expect(text).not.toContain("response.failed");
  });
});

describe("openai-responses stream: both directions and the official SDK", () => {
  /** Client SSE text → SseEvents, the way the gateway's pipeline parses a provider stream. */
  function sseEvents(text: string): SseEvent[] {
    const out: SseEvent[] = [];
    const parser = createParser({ onEvent: (m) => out.push({ event: m.event, data: m.data }) });
    parser.feed(text);
    return out;
  }

  it("decodes what it encodes back into the same neutral events", () => {
    const original: NeutralEvent[] = [
      { type: "start" },
      { type: "reasoning", text: "Plan." },
      { type: "text", text: "Let me " },
      { type: "text", text: "check." },
      { type: "tool_call_start", index: 0, id: "call_a", name: "get_weather" },
      { type: "tool_call_args", index: 0, delta: '{"city":' },
      { type: "tool_call_args", index: 0, delta: '"Oslo"}' },
      { type: "stop", reason: "tool_use" },
      { type: "usage", usage: { ...usage, cacheWriteInputTokens: 0 } },
    ];
    expect(decodeAll(sseEvents(encodeAll(original)))).toEqual(original);
  });

  function sdkClient(body: string): OpenAI {
    return new OpenAI({
      apiKey: "test",
      baseURL: "http://gateway.test/v1",
      maxRetries: 0,
      fetch: async () => new Response(body, { headers: { "content-type": "text/event-stream" } }),
    });
  }

  it("is a stream the official SDK accumulates into the final response", async () => {
    const body = encodeAll([
      { type: "start" },
      { type: "reasoning", text: "hm" },
      { type: "text", text: "Hello " },
      { type: "text", text: "world" },
      { type: "tool_call_start", index: 0, id: "call_a", name: "get_weather" },
      { type: "tool_call_args", index: 0, delta: '{"city":"Oslo"}' },
      { type: "stop", reason: "tool_use" },
      { type: "usage", usage },
    ]);
    const stream = sdkClient(body).responses.stream({ model: "public-model", input: "hi" });
    const seen: string[] = [];
    for await (const e of stream) seen.push(e.type);
    const final = await stream.finalResponse();
    expect(seen.at(-1)).toBe("response.completed");
    expect(final.id).toBe(RESP);
    expect(final.output_text).toBe("Hello world");
    expect(final.output.map((o) => o.type)).toEqual(["reasoning", "message", "function_call"]);
    expect(final.usage?.output_tokens).toBe(7);
  });

  it("makes the official SDK throw on an errored stream", async () => {
    const body = encodeAll([{ type: "start" }, { type: "text", text: "par" }, { type: "error", code: "upstream_stream_cut", message: "The provider's stream ended before it was complete." }]);
    const stream = sdkClient(body).responses.stream({ model: "public-model", input: "hi" });
    await expect(stream.finalResponse()).rejects.toMatchObject({ code: "upstream_stream_cut", message: expect.stringContaining("ended before it was complete") });
    const iterated = await sdkClient(body).responses.create({ model: "public-model", input: "hi", stream: true });
    await expect(
      (async () => {
        for await (const _ of iterated);
      })(),
    ).rejects.toBeInstanceOf(OpenAI.APIError);
  });
});
