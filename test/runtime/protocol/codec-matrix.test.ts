/**
 * One case table, run through every (client protocol × backend protocol) pair, in all three
 * directions a gateway translates: requests (client → neutral → backend), buffered responses
 * (backend → neutral → client) and streams (backend SSE → neutral events → client SSE).
 * Each codec's encode side is what its own clients/providers send, so pairs are tested end to end
 * without any HTTP: C.encode → C.decode → B.encode → B.decode must keep every carried field.
 */
import { createParser } from "eventsource-parser";
import { describe, expect, it } from "vitest";
import type { Codec, ResponseStamp } from "../../../src/protocol/codec.ts";
import type { NeutralEvent, NeutralRequest, NeutralResponse, ToolCall, Usage } from "../../../src/protocol/neutral.ts";
import { requestFeatures, withoutFeatures } from "../../../src/protocol/features.ts";
import { builtinCodecs } from "../../../src/protocol/registry.ts";
import { PROTOCOL_IDS } from "../../../src/protocol/codec.ts";

const codecs: Codec[] = PROTOCOL_IDS.flatMap((id) => builtinCodecs.get(id) ?? []);
const pairs = codecs.flatMap((client) => codecs.map((backend) => [client, backend] as const));
const stamp: ResponseStamp = { id: "0123456789abcdef0123456789abcdef", created: 1_790_000_000, model: "public-model" };

const weatherTool = {
  name: "get_weather",
  description: "Weather for a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

interface Case {
  readonly name: string;
  readonly request: NeutralRequest;
  readonly response: NeutralResponse;
  /** How the response streams: text in these pieces, tool arguments in these pieces. */
  readonly textPieces: readonly string[];
  readonly argPieces: readonly string[];
}

const base = (over: Partial<NeutralRequest>): NeutralRequest => ({
  model: "public-model",
  messages: [{ role: "user", content: [{ type: "text", text: "Hello there" }] }],
  maxOutputTokens: 256,
  stream: false,
  streamUsage: false,
  ...over,
});
const usage = (u: Partial<Usage> = {}): Usage => ({ inputTokens: 40, outputTokens: 12, source: "provider", ...u });

const cases: Case[] = [
  {
    name: "plain text with a system prompt and sampling",
    request: base({
      messages: [
        { role: "system", content: [{ type: "text", text: "Be brief." }] },
        { role: "user", content: [{ type: "text", text: "Hello there" }] },
      ],
      temperature: 0.5,
      topP: 0.9,
      stop: ["END"],
    }),
    response: { text: "Hi! How can I help?", toolCalls: [], stopReason: "end_turn", usage: usage() },
    textPieces: ["Hi!", " How can", " I help?"],
    argPieces: [],
  },
  {
    name: "a forced tool call",
    request: base({ tools: [weatherTool], toolChoice: { type: "required" } }),
    response: {
      text: "",
      toolCalls: [{ id: "call_abc123", name: "get_weather", arguments: '{"city":"Paris"}' }],
      stopReason: "tool_use",
      usage: usage({ outputTokens: 9 }),
    },
    textPieces: [],
    argPieces: ['{"ci', 'ty":"Pa', 'ris"}'],
  },
  {
    name: "multi-turn with a tool result",
    request: base({
      tools: [weatherTool],
      messages: [
        { role: "user", content: [{ type: "text", text: "Weather in Paris?" }] },
        { role: "assistant", content: [], toolCalls: [{ id: "call_abc123", name: "get_weather", arguments: '{"city":"Paris"}' }] },
        { role: "tool", toolCallId: "call_abc123", content: [{ type: "text", text: '{"temp_c":21}' }] },
      ],
    }),
    response: { text: "It is 21°C in Paris.", toolCalls: [], stopReason: "end_turn", usage: usage({ inputTokens: 80 }) },
    textPieces: ["It is 21°C", " in Paris."],
    argPieces: [],
  },
  {
    name: "an image and a cut by max tokens, with cached input",
    request: base({
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "What is in this picture?" },
            { type: "image", url: "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==" },
          ],
        },
      ],
      maxOutputTokens: 4,
    }),
    response: { text: "A tiny red", toolCalls: [], stopReason: "max_tokens", usage: usage({ inputTokens: 300, outputTokens: 4, cachedInputTokens: 256 }) },
    textPieces: ["A", " tiny", " red"],
    argPieces: [],
  },
  {
    name: "structured output with a reasoning effort",
    request: base({
      reasoningEffort: "high",
      responseFormat: {
        type: "json_schema",
        name: "weather",
        schema: { type: "object", properties: { temp_c: { type: "number" } }, required: ["temp_c"], additionalProperties: false },
        strict: true,
      },
    }),
    response: { text: '{"temp_c":21}', toolCalls: [], stopReason: "end_turn", usage: usage() },
    textPieces: ['{"temp_c"', ":21}"],
    argPieces: [],
  },
];

/** What must survive any pair: text of each message by role, tool calls, tool results, tools, limits. */
function requestEssence(r: NeutralRequest) {
  return {
    messages: r.messages.map((m) => ({
      role: m.role === "developer" ? "system" : m.role,
      text: m.content.map((p) => (p.type === "text" ? p.text : p.type === "image" ? `[image ${p.url.slice(0, 30)}]` : "")).join(""),
      toolCalls: m.role === "assistant" ? (m.toolCalls ?? []).map((c) => ({ id: c.id, name: c.name, args: JSON.parse(c.arguments) as unknown })) : [],
      toolCallId: m.role === "tool" ? m.toolCallId : undefined,
    })),
    tools: (r.tools ?? []).map((t) => ({ name: t.name, parameters: t.parameters })),
    toolChoice: r.toolChoice?.type ?? "auto",
    maxOutputTokens: r.maxOutputTokens,
    temperature: r.temperature,
    topP: r.topP,
    stop: r.stop,
    reasoningEffort: r.reasoningEffort,
    // The schema and its strictness survive; its name is a label Anthropic does not have.
    responseFormat: r.responseFormat && (r.responseFormat.type === "json_schema" ? { type: "json_schema", schema: r.responseFormat.schema, strict: r.responseFormat.strict } : r.responseFormat),
  };
}

/** Usage each protocol can express: Chat and Responses have no cache-write field, Anthropic no reasoning field. */
function usageEssence(u: Usage | undefined) {
  return u && { inputTokens: u.inputTokens, outputTokens: u.outputTokens, cached: u.cachedInputTokens ?? 0 };
}

function responseEssence(r: NeutralResponse) {
  return {
    text: r.text,
    toolCalls: r.toolCalls.map((c) => ({ name: c.name, args: JSON.parse(c.arguments) as unknown })),
    stopReason: r.stopReason,
    usage: usageEssence(r.usage),
  };
}

/** Runs SSE text through a decoder the way the pipeline does. */
function decodeSse(codec: Codec, text: string): NeutralEvent[] {
  const decoder = codec.createStreamDecoder();
  const out: NeutralEvent[] = [];
  const parser = createParser({ onEvent: (e) => out.push(...decoder.decode({ event: e.event, data: e.data })) });
  parser.feed(text);
  out.push(...decoder.finish());
  return out;
}

function encodeSse(codec: Codec, events: readonly NeutralEvent[], request: NeutralRequest, clean = true): string {
  const encoder = codec.createStreamEncoder(stamp, request);
  return events.map((e) => encoder.encode(e)).join("") + (clean ? encoder.end() : "");
}

/** Folds neutral events back into a response, as a client SDK accumulates a stream. */
function fold(events: readonly NeutralEvent[]): { response: NeutralResponse; error?: string } {
  let text = "";
  const calls = new Map<number, { id: string; name: string; arguments: string }>();
  let stopReason: NeutralResponse["stopReason"] = "other";
  let u: Usage | undefined;
  let error: string | undefined;
  for (const e of events) {
    if (e.type === "text") text += e.text;
    else if (e.type === "tool_call_start") calls.set(e.index, { id: e.id, name: e.name, arguments: "" });
    else if (e.type === "tool_call_args") calls.get(e.index)!.arguments += e.delta;
    else if (e.type === "stop") stopReason = e.reason;
    else if (e.type === "usage") u = e.usage;
    else if (e.type === "error") error = e.code;
  }
  const toolCalls: ToolCall[] = [...calls.entries()].sort(([a], [b]) => a - b).map(([, c]) => c);
  return { response: { text, toolCalls, stopReason, usage: u }, ...(error ? { error } : {}) };
}

/** The provider-side event sequence of a case, in OpenAI order (stop, then usage). */
function providerEvents(c: Case): NeutralEvent[] {
  const ev: NeutralEvent[] = [{ type: "start" }];
  for (const t of c.textPieces) ev.push({ type: "text", text: t });
  c.response.toolCalls.forEach((call, i) => {
    ev.push({ type: "tool_call_start", index: i, id: call.id, name: call.name });
    for (const a of c.argPieces) ev.push({ type: "tool_call_args", index: i, delta: a });
  });
  ev.push({ type: "stop", reason: c.response.stopReason });
  if (c.response.usage) ev.push({ type: "usage", usage: c.response.usage });
  return ev;
}

describe.each(pairs.map(([c, b]) => ({ client: c, backend: b, label: `${c.id} client → ${b.id} backend` })))("$label", ({ client, backend }) => {
  it.each(cases)("request: $name", (c) => {
    const clientBody = JSON.parse(JSON.stringify(client.encodeRequest(c.request, "public-model", { streamUsage: true })));
    const decoded = client.decodeRequest(clientBody);
    const backendBody = JSON.parse(JSON.stringify(backend.encodeRequest(decoded, "provider-model", { streamUsage: true })));
    expect(backendBody.model).toBe("provider-model");
    const atBackend = backend.decodeRequest(backendBody);
    // A feature the client's protocol cannot express never arrives; one the backend's protocol
    // lacks never reaches it (the executor refuses the request, or drops the feature under a
    // declared downgrade). Everything else must arrive intact.
    const uncarried = new Set(requestFeatures(c.request).filter((f) => !backend.carries.has(f) || !client.carries.has(f)));
    expect(requestEssence(atBackend)).toEqual(requestEssence(withoutFeatures(c.request, uncarried)));
  });

  it.each(cases)("buffered response: $name", (c) => {
    const providerBody = JSON.parse(JSON.stringify(backend.encodeResponse(c.response, stamp)));
    const decoded = backend.decodeResponse(providerBody);
    const clientBody = JSON.parse(JSON.stringify(client.encodeResponse(decoded, stamp)));
    expect(JSON.stringify(clientBody)).not.toContain("provider-model");
    expect(responseEssence(client.decodeResponse(clientBody))).toEqual(responseEssence(c.response));
  });

  it.each(cases)("stream: $name", (c) => {
    const streamReq = { ...c.request, stream: true, streamUsage: true };
    const fromProvider = decodeSse(backend, encodeSse(backend, providerEvents(c), streamReq));
    const toClient = decodeSse(client, encodeSse(client, fromProvider, streamReq));
    const folded = fold(toClient);
    expect(folded.error).toBeUndefined();
    expect(responseEssence(folded.response)).toEqual(responseEssence(c.response));
  });

  it("stream cut mid-answer reaches the client as an error, never a clean end", () => {
    const c = cases[0]!;
    const streamReq = { ...c.request, stream: true, streamUsage: true };
    const partial = providerEvents(c).slice(0, 3); // start + two text pieces, no stop
    const fromProvider = decodeSse(backend, encodeSse(backend, partial, streamReq, false));
    expect(fromProvider.at(-1)?.type).toBe("error");
    const toClient = decodeSse(client, encodeSse(client, fromProvider, streamReq));
    const folded = fold(toClient);
    expect(folded.error).toBeDefined();
    expect(folded.response.text).toBe("Hi! How can");
  });
});
