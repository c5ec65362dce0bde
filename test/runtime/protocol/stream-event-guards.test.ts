import { describe, expect, it } from "vitest";
import type { z } from "zod";
import {
  anthropicBlockGuards,
  anthropicBlockSchemas,
  anthropicDeltaGuards,
  anthropicDeltaSchemas,
  anthropicEventGuards,
  anthropicEventSchemas,
} from "../../../src/protocol/anthropic-messages/stream-events.ts";
import { anthropicStreamDecoder, createAnthropicStreamDecoder } from "../../../src/protocol/anthropic-messages/stream.ts";
import type { SseEvent, StreamDecoder } from "../../../src/protocol/codec.ts";
import { readersOf, type Reader } from "../../../src/protocol/fast-guard.ts";
import type { NeutralEvent } from "../../../src/protocol/neutral.ts";
import { responsesEventGuards, responsesEventSchemas } from "../../../src/protocol/openai-responses/stream-events.ts";
import { createResponsesStreamDecoder, responsesStreamDecoder } from "../../../src/protocol/openai-responses/stream.ts";
import { emptyTally, expectGuardWithinZod, keysOf, mutants, show, substitutions, type GuardTally } from "./guard-corpus.ts";

/** Thousands of generated inputs each: CPU-bound, so a busy machine can stretch them well past the default 5 s. */
const PROPERTY_TIMEOUT_MS = 30_000;

type Event = Record<string, unknown>;

/** Every (schema, guard) pair of a record, by name. */
function pairs(schemas: Record<string, z.ZodType>, guards: Record<string, Reader<unknown> | undefined>): [string, z.ZodType, Reader<unknown>][] {
  return Object.entries(guards).flatMap(([name, guard]) => (guard ? [[name, schemas[name]!, guard] as [string, z.ZodType, Reader<unknown>]] : []));
}

/** Each event as the SSE parser hands it over; a mutant that is not a list becomes a one-event stream. */
function sseOf(stream: unknown, fallbackName: string): SseEvent[] {
  const events = Array.isArray(stream) ? stream : [stream];
  return events.map((e) => {
    const type = typeof e === "object" && e !== null ? (e as Event).type : undefined;
    return { event: typeof type === "string" ? type : fallbackName, data: JSON.stringify(e) ?? "undefined" };
  });
}

function run(decoder: StreamDecoder, events: readonly SseEvent[]): NeutralEvent[] {
  const out: NeutralEvent[] = [];
  for (const e of events) out.push(...decoder.decode(e));
  out.push(...decoder.finish());
  return out;
}

/** The objects a guard may be handed: each event and the objects it carries. */
function candidates(events: readonly unknown[]): unknown[] {
  return events.flatMap((e) => {
    if (typeof e !== "object" || e === null) return [e];
    const o = e as Event;
    return [o, o.content_block, o.delta, o.item, o.message, o.usage].filter((x) => x !== undefined);
  });
}

// ---- Anthropic Messages ------------------------------------------------------------------------

const anthropicStreams: readonly Event[][] = [
  [
    {
      type: "message_start",
      message: {
        id: "msg_P",
        type: "message",
        role: "assistant",
        content: [],
        usage: { input_tokens: 472, cache_creation_input_tokens: 100, cache_read_input_tokens: 2000, output_tokens: 2, service_tier: "standard" },
      },
    },
    { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
    { type: "ping" },
    { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Okay, let me check " } },
    { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "" } },
    { type: "content_block_stop", index: 0 },
    { type: "content_block_start", index: 1, content_block: { type: "tool_use", id: "toolu_1", name: "get_weather", input: {} } },
    { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: '{"location": "Oslo"}' } },
    { type: "content_block_stop", index: 1 },
    { type: "content_block_start", index: 2, content_block: { type: "tool_use", id: "toolu_2", name: "get_time", input: { tz: "UTC" } } },
    { type: "content_block_stop", index: 2 },
    { type: "message_delta", delta: { stop_reason: "tool_use", stop_sequence: null }, usage: { output_tokens: 89 } },
    { type: "message_stop" },
  ],
  [
    { type: "message_start", message: { usage: { input_tokens: 10, output_tokens: 1, cache_read_input_tokens: null, cache_creation_input_tokens: null } } },
    { type: "content_block_start", index: 0, content_block: { type: "thinking", thinking: "", signature: "" } },
    { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "Let me think." } },
    { type: "content_block_delta", index: 0, delta: { type: "signature_delta", signature: "EqQBSig" } },
    { type: "content_block_stop", index: 0 },
    { type: "content_block_start", index: 1, content_block: { type: "text", text: "Hi" } },
    { type: "content_block_delta", index: 1, delta: { type: "text_delta", text: " there" } },
    { type: "content_block_stop", index: 1 },
    {
      type: "message_delta",
      delta: { stop_reason: "stop_sequence", stop_sequence: "END" },
      usage: { input_tokens: 10, output_tokens: 20, cache_read_input_tokens: 0, output_tokens_details: { thinking_tokens: 5 } },
    },
    { type: "message_stop" },
  ],
  [
    { type: "message_start", message: { usage: null } },
    { type: "content_block_start", index: 0, content_block: { type: "redacted_thinking", data: "EmwRedacted" } },
    { type: "content_block_stop", index: 0 },
    { type: "content_block_start", index: 1, content_block: { type: "server_tool_use", id: "srvtoolu_1", name: "web_search", input: {} } },
    { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: "{}" } },
    { type: "content_block_stop", index: 1 },
    { type: "content_block_start", index: 2, content_block: { type: "thinking", thinking: "pre", signature: null } },
    { type: "content_block_delta", index: 2, delta: { type: "citations_delta", citation: { type: "char_location" } } },
    { type: "content_block_stop", index: 2 },
    { type: "some_future_event", anything: [1, 2] },
    { type: "message_delta", delta: { stop_reason: null }, usage: null },
    { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 3, output_tokens_details: null } },
    { type: "error", error: { type: "overloaded_error", message: "Overloaded" } },
  ],
];

const anthropicEvents = anthropicStreams.flat();
const anthropicPool = [
  ...new Set([
    ...keysOf(anthropicEvents),
    ...Object.values({ ...anthropicEventSchemas, ...anthropicBlockSchemas, ...anthropicDeltaSchemas }).flatMap((s) => Object.keys(s.shape)),
  ]),
];
const anthropicPairs = [
  ...pairs(anthropicEventSchemas, anthropicEventGuards),
  ...pairs(anthropicBlockSchemas, anthropicBlockGuards),
  ...pairs(anthropicDeltaSchemas, anthropicDeltaGuards),
];
const anthropicZod = {
  events: readersOf(anthropicEventSchemas, {}),
  blocks: readersOf(anthropicBlockSchemas, {}),
  deltas: readersOf(anthropicDeltaSchemas, {}),
};

/** Event text the mutator does not make. */
const anthropicRaw: readonly string[] = [
  "null",
  "[]",
  "not json",
  '{"type":5}',
  '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"},"__proto__":{"index":-1}}',
  '{"type":"content_block_start","index":9007199254740992,"content_block":{"type":"text"}}',
  '{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"n"}}',
  '{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1.5}}',
];

function tallyAll(guardPairs: readonly [string, z.ZodType, Reader<unknown>][], inputs: readonly unknown[]): Map<string, GuardTally> {
  const tallies = new Map<string, GuardTally>();
  for (const [name, schema, guard] of guardPairs) {
    const tally = emptyTally();
    for (const input of inputs) expectGuardWithinZod(guard, schema, input, tally, name);
    tallies.set(name, tally);
  }
  return tallies;
}

describe("anthropic-messages stream event guards", () => {
  it("vouch for every realistic event, block and delta they cover", () => {
    const guards: Record<string, Reader<unknown> | undefined> = { ...anthropicEventGuards, ...anthropicBlockGuards, ...anthropicDeltaGuards };
    const seen = new Set<string>();
    for (const e of anthropicEvents) {
      for (const value of [e, e.content_block, e.delta]) {
        const type = (value as Event | undefined)?.type as string | undefined;
        const guard = type === undefined ? undefined : guards[type];
        if (guard === undefined || type === undefined) continue;
        expect(guard(value), show(value)).toBe(value);
        seen.add(type);
      }
    }
    // Every guard was reached by some realistic input.
    expect([...seen].sort()).toEqual(anthropicPairs.map(([name]) => name).sort());
  });

  it("never vouch for anything zod rejects, and agree with zod's value whenever they vouch", () => {
    const inputs = candidates([
      ...anthropicEvents,
      ...anthropicRaw.flatMap((t) => (t === "not json" || t.includes("__proto__") ? [] : [JSON.parse(t) as unknown])),
      ...anthropicEvents.flatMap((e) => substitutions(e, anthropicPool)),
      ...mutants(anthropicEvents, 3000, 0x5eed_a7c1, anthropicPool),
    ]);
    for (const [name, tally] of tallyAll(anthropicPairs, inputs)) {
      expect(tally.fast, name).toBeGreaterThan(100);
      expect(tally.rejected, name).toBeGreaterThan(100);
    }
  }, PROPERTY_TIMEOUT_MS);

  it("decode every stream to the same neutral events as zod alone", () => {
    const streams: SseEvent[][] = [...anthropicStreams, ...mutants(anthropicStreams, 2500, 0x5eed_a7c2, anthropicPool)].map((s) => sseOf(s, "message"));
    for (const stream of anthropicStreams) {
      const events = sseOf(stream, "message");
      for (const raw of anthropicRaw) streams.push([...events.slice(0, 3), { event: "raw", data: raw }, ...events.slice(3)]);
    }
    let protocolErrors = 0;
    for (const events of streams) {
      const guarded = run(createAnthropicStreamDecoder(), events);
      expect(guarded, show(events)).toEqual(run(anthropicStreamDecoder(anthropicZod), events));
      if (guarded.some((e) => e.type === "error" && e.code === "upstream_protocol_error")) protocolErrors++;
    }
    expect(protocolErrors).toBeGreaterThan(300);
  });
});

// ---- OpenAI Responses -------------------------------------------------------------------------

const providerResponse = (status: string, extra: Event = {}): Event => ({ id: "resp_P", object: "response", status, output: [], usage: null, ...extra });
const msg = (status: string, text?: string): Event => ({
  id: "msg_P",
  type: "message",
  status,
  role: "assistant",
  content: text === undefined ? [] : [{ type: "output_text", text, annotations: [] }],
});
const fc = (id: string, callId: string, name: string, args: string): Event => ({ id, type: "function_call", status: "completed", arguments: args, call_id: callId, name });
const ev = (type: string, fields: Event, i: number): Event => ({ type, sequence_number: i, ...fields });

const responsesStreams: readonly Event[][] = [
  [
    ["response.created", { response: providerResponse("in_progress") }],
    ["response.output_item.added", { output_index: 0, item: { id: "rs_P", type: "reasoning", summary: [] } }],
    ["response.reasoning_summary_text.delta", { item_id: "rs_P", output_index: 0, summary_index: 0, delta: "Look up." }],
    ["response.reasoning_summary_text.delta", { item_id: "rs_P", output_index: 0, summary_index: 1, delta: "Then time." }],
    ["response.output_item.done", { output_index: 0, item: { id: "rs_P", type: "reasoning", summary: [{ type: "summary_text", text: "Look up." }] } }],
    ["response.output_item.added", { output_index: 1, item: msg("in_progress") }],
    ["response.output_text.delta", { item_id: "msg_P", output_index: 1, content_index: 0, delta: "Let me ", logprobs: [] }],
    ["response.output_text.delta", { item_id: "msg_P", output_index: 1, content_index: 0, delta: "", logprobs: [] }],
    ["response.output_text.done", { item_id: "msg_P", output_index: 1, content_index: 0, text: "Let me check." }],
    ["response.output_item.done", { output_index: 1, item: msg("completed", "Let me check.") }],
    ["response.output_item.added", { output_index: 2, item: fc("fc_P1", "call_w", "get_weather", "") }],
    ["response.function_call_arguments.delta", { item_id: "fc_P1", output_index: 2, delta: '{"ci' }],
    ["response.function_call_arguments.delta", { output_index: 2, delta: 'ty":"Oslo"}' }],
    ["response.output_item.done", { output_index: 2, item: fc("fc_P1", "call_w", "get_weather", '{"city":"Oslo"}') }],
    ["keepalive", {}],
    [
      "response.completed",
      { response: providerResponse("completed", { usage: { input_tokens: 40, output_tokens: 18, total_tokens: 58, input_tokens_details: { cached_tokens: 32 } } }) },
    ],
  ].map(([type, fields], i) => ev(type as string, fields as Event, i)),
  [
    ["response.created", { response: providerResponse("in_progress") }],
    ["response.output_item.added", { output_index: 0, item: { type: "message", id: "m1" } }],
    ["response.refusal.delta", { output_index: 0, delta: "No." }],
    ["response.reasoning_text.delta", { output_index: 1, content_index: 2, delta: "hm" }],
    ["response.output_item.added", { output_index: 2, item: fc("fc_2", "call_2", "get_time", "{}") }],
    ["response.output_item.done", { output_index: 3, item: { type: "web_search_call", id: "ws_1" } }],
    ["response.incomplete", { response: providerResponse("incomplete", { incomplete_details: { reason: "max_output_tokens" } }) }],
  ].map(([type, fields], i) => ev(type as string, fields as Event, i)),
  [
    ["response.created", { response: providerResponse("in_progress") }],
    ["response.output_text.delta", { output_index: 0, delta: "partial" }],
    ["error", { code: "server_error", message: "boom" }],
  ].map(([type, fields], i) => ev(type as string, fields as Event, i)),
];

const responsesEvents = responsesStreams.flat();
const responsesPool = [...new Set([...keysOf(responsesEvents), ...Object.values(responsesEventSchemas).flatMap((s) => Object.keys(s.shape))])];
const responsesPairs = pairs(responsesEventSchemas, responsesEventGuards);
const responsesZod = readersOf(responsesEventSchemas, {});

describe("openai-responses stream event guards", () => {
  it("vouch for every realistic event and item they cover", () => {
    const g = responsesEventGuards;
    for (const e of responsesEvents) {
      expect(g.typed!(e), show(e)).toBe(e);
      if (typeof e.delta === "string") expect(g.delta!(e), show(e)).toBe(e);
      if (typeof e.item === "object") expect(g.itemEvent!(e), show(e)).toBe(e);
      if ((e.item as Event | undefined)?.type === "function_call") expect(g.callItem!(e.item), show(e)).toBe(e.item);
    }
  });

  it("never vouch for anything zod rejects, and agree with zod's value whenever they vouch", () => {
    const inputs = candidates([
      ...responsesEvents,
      ...responsesEvents.flatMap((e) => substitutions(e, responsesPool)),
      ...mutants(responsesEvents, 3000, 0x5eed_2e51, responsesPool),
    ]);
    for (const [name, tally] of tallyAll(responsesPairs, inputs)) {
      expect(tally.fast, name).toBeGreaterThan(100);
      expect(tally.rejected, name).toBeGreaterThan(100);
    }
  }, PROPERTY_TIMEOUT_MS);

  it("decode every stream to the same neutral events as zod alone", () => {
    const streams: unknown[] = [...responsesStreams, ...mutants(responsesStreams, 2500, 0x5eed_2e52, responsesPool)];
    let protocolErrors = 0;
    for (const stream of streams) {
      // A typeless event falls back to its SSE name; a delta's name makes that path do work too.
      const events = sseOf(stream, "response.output_text.delta");
      const guarded = run(createResponsesStreamDecoder(), events);
      expect(guarded, show(stream)).toEqual(run(responsesStreamDecoder(responsesZod), events));
      if (guarded.some((e) => e.type === "error" && e.code === "upstream_protocol_error")) protocolErrors++;
    }
    expect(protocolErrors).toBeGreaterThan(300);
  });
});
