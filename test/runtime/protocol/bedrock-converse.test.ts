/**
 * The bedrock-converse codec on its own: neutral requests → Converse bodies, Converse answers →
 * neutral responses, and ConverseStream's binary event stream → neutral events however its bytes
 * are cut, with the provider's in-stream exceptions and cuts as error events.
 */
import { describe, expect, it } from "vitest";
import { encodeEventStreamMessage } from "../../../src/protocol/bedrock-converse/event-stream.ts";
import { bedrockConverseCodec } from "../../../src/protocol/bedrock-converse/index.ts";
import { conversePath } from "../../../src/protocol/bedrock-converse/response.ts";
import { redactedSignature } from "../../../src/protocol/anthropic-messages/thinking.ts";
import type { NeutralEvent, NeutralRequest } from "../../../src/protocol/neutral.ts";
import { refusal } from "../support/refusal.ts";

const codec = bedrockConverseCodec;
const MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0";
const text = (t: string) => [{ type: "text" as const, text: t }];
const base: NeutralRequest = { model: "sluice-chat", messages: [{ role: "user", content: text("hi") }], stream: false, streamUsage: false };
const encode = (over: Partial<NeutralRequest>) => codec.encodeRequest({ ...base, ...over }, MODEL, { streamUsage: true }) as Record<string, unknown>;
const enc = new TextEncoder();


describe("bedrock-converse requests", () => {
  it("names the model and the operation in the path, the model id one encoded segment", () => {
    expect(conversePath(MODEL, false)).toBe("/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse");
    expect(conversePath("arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.x", true)).toBe(
      "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.x/converse-stream",
    );
  });

  it("writes system blocks, alternating turns, tool calls and results (joined with the user text after them), images as bytes, cache points", () => {
    const body = encode({
      messages: [
        { role: "system", content: [{ type: "text", text: "be brief", cacheControl: { type: "ephemeral" } }] },
        { role: "developer", content: text("use metric") },
        { role: "user", content: [{ type: "text", text: "weather?" }, { type: "image", url: "data:image/png;base64,iVBORw0KGgo=" }] },
        {
          role: "assistant",
          content: [{ type: "reasoning", text: "think", signature: "sig" }, { type: "reasoning", text: "unsigned" }, ...text("checking")],
          toolCalls: [{ id: "t1", name: "weather", arguments: '{"city":"Oslo"}' }],
        },
        { role: "tool", toolCallId: "t1", content: text("12C"), isError: false },
        { role: "user", content: text("and tomorrow?") },
      ],
      tools: [{ name: "weather", description: "Weather", parameters: { type: "object", properties: { city: { type: "string" } } } }],
      toolChoice: { type: "auto" },
    });
    expect(body.system).toEqual([{ text: "be brief" }, { cachePoint: { type: "default" } }, { text: "use metric" }]);
    expect(body.messages).toEqual([
      { role: "user", content: [{ text: "weather?" }, { image: { format: "png", source: { bytes: "iVBORw0KGgo=" } } }] },
      {
        role: "assistant",
        content: [
          { reasoningContent: { reasoningText: { text: "think", signature: "sig" } } },
          { text: "checking" },
          { toolUse: { toolUseId: "t1", name: "weather", input: { city: "Oslo" } } },
        ],
      },
      { role: "user", content: [{ toolResult: { toolUseId: "t1", content: [{ text: "12C" }], status: "success" } }, { text: "and tomorrow?" }] },
    ]);
    expect(body.toolConfig).toEqual({
      tools: [{ toolSpec: { name: "weather", description: "Weather", inputSchema: { json: { type: "object", properties: { city: { type: "string" } } } } } }],
      toolChoice: { auto: {} },
    });
    expect(body).not.toHaveProperty("model");
  });

  it("puts sampling and limits in inferenceConfig, the schema in outputConfig (as a string), thinking in additionalModelRequestFields", () => {
    const body = encode({
      maxOutputTokens: 100,
      temperature: 0.2,
      topP: 0.9,
      stop: ["END"],
      responseFormat: { type: "json_schema", name: "answer", schema: { type: "object" } },
      toolChoice: { type: "required" },
      tools: [{ name: "f" }],
    });
    expect(body.inferenceConfig).toEqual({ maxTokens: 100, temperature: 0.2, topP: 0.9, stopSequences: ["END"] });
    expect(body.outputConfig).toEqual({ textFormat: { type: "json_schema", structure: { jsonSchema: { schema: '{"type":"object"}', name: "answer" } } } });
    expect((body.toolConfig as Record<string, unknown>).toolChoice).toEqual({ any: {} });
    const thinking = encode({ reasoningBudgetTokens: 2048 });
    expect(thinking.additionalModelRequestFields).toEqual({ thinking: { type: "enabled", budget_tokens: 2048 } });
    expect(thinking.inferenceConfig).toEqual({ maxTokens: 4096 + 2048 });
    expect(encode({ toolChoice: { type: "tool", name: "f" }, tools: [{ name: "f" }] }).toolConfig).toMatchObject({ toolChoice: { tool: { name: "f" } } });
  });

  it("replays a redacted reasoning block as its redacted content, and marks a failed tool result", () => {
    const body = encode({
      messages: [
        { role: "user", content: text("q") },
        { role: "assistant", content: [{ type: "reasoning", text: "", signature: redactedSignature("b3BhcXVl") }], toolCalls: [{ id: "a", name: "f", arguments: "" }] },
        { role: "tool", toolCallId: "a", content: text("boom"), isError: true },
      ],
      tools: [{ name: "f" }],
    });
    expect((body.messages as { content: unknown[] }[])[1]!.content[0]).toEqual({ reasoningContent: { redactedContent: "b3BhcXVl" } });
    expect((body.messages as { content: unknown[] }[])[2]!.content[0]).toEqual({ toolResult: { toolUseId: "a", content: [{ text: "boom" }], status: "error" } });
  });

  it("leaves tools out for tool_choice none, and refuses it when the conversation already has tool calls", () => {
    expect(encode({ tools: [{ name: "f" }], toolChoice: { type: "none" } })).not.toHaveProperty("toolConfig");
    const err = refusal(() =>
      encode({
        tools: [{ name: "f" }],
        toolChoice: { type: "none" },
        messages: [
          { role: "user", content: text("q") },
          { role: "assistant", content: [], toolCalls: [{ id: "a", name: "f", arguments: "{}" }] },
          { role: "tool", toolCallId: "a", content: text("r") },
        ],
      }),
    );
    expect(err.code).toBe("invalid_request");
    expect(err.message).toMatch(/tool_choice 'none'/);
  });

  it("refuses what Converse cannot carry, naming the message: web image URLs, unknown image types, non-object arguments", () => {
    const url = refusal(() => encode({ messages: [{ role: "user", content: [{ type: "image", url: "https://example.com/a.png" }] }] }));
    expect(url.code).toBe("invalid_request");
    expect(url.param).toBe("messages[0]");
    expect(refusal(() => encode({ messages: [{ role: "user", content: [{ type: "image", url: "data:image/tiff;base64,AAAA" }] }] })).message).toMatch(/image\/tiff/);
    const args = refusal(() => encode({ messages: [{ role: "user", content: text("q") }, { role: "assistant", content: [], toolCalls: [{ id: "a", name: "f", arguments: "[1]" }] }] }));
    expect(args.param).toBe("messages[1]");
  });

  it("declares the features it carries and not the others", () => {
    expect([...codec.carries].sort()).toEqual(["json_schema", "reasoning_budget", "stop_sequences", "tool_result_error"]);
    expect(codec.rejectedBeforeProcessing).toEqual(new Set([429, 503]));
  });
});

describe("bedrock-converse answers", () => {
  it("reads text, tool calls, reasoning (signed and redacted), the stop reason and usage with the cache counted in", () => {
    const r = codec.decodeResponse({
      output: {
        message: {
          role: "assistant",
          content: [
            { reasoningContent: { reasoningText: { text: "hmm", signature: "s1" } } },
            { reasoningContent: { redactedContent: "cmVk" } },
            { text: "Let me " },
            { text: "check." },
            { toolUse: { toolUseId: "tooluse_1", name: "weather", input: { city: "Oslo" } } },
          ],
        },
      },
      stopReason: "tool_use",
      usage: { inputTokens: 10, outputTokens: 20, totalTokens: 130, cacheReadInputTokens: 80, cacheWriteInputTokens: 20 },
      metrics: { latencyMs: 100 },
    });
    expect(r).toEqual({
      text: "Let me check.",
      reasoning: [{ text: "hmm", signature: "s1" }, { text: "", signature: redactedSignature("cmVk") }],
      toolCalls: [{ id: "tooluse_1", name: "weather", arguments: '{"city":"Oslo"}' }],
      stopReason: "tool_use",
      usage: { inputTokens: 110, outputTokens: 20, cachedInputTokens: 80, cacheWriteInputTokens: 20, source: "provider" },
    });
  });

  it("maps every stop reason", () => {
    const stop = (stopReason: string) => codec.decodeResponse({ output: { message: { content: [] } }, stopReason }).stopReason;
    expect(["end_turn", "tool_use", "max_tokens", "model_context_window_exceeded", "stop_sequence", "content_filtered", "guardrail_intervened", "malformed_tool_use"].map(stop)).toEqual([
      "end_turn",
      "tool_use",
      "max_tokens",
      "max_tokens",
      "stop_sequence",
      "content_filter",
      "content_filter",
      "other",
    ]);
  });

  it("refuses an answer it cannot read as a protocol error", () => {
    expect(refusal(() => codec.decodeResponse({ output: {} })).code).toBe("upstream_protocol_error");
    expect(refusal(() => codec.decodeResponse({ output: { message: { content: [] } }, stopReason: "end_turn", usage: { inputTokens: -1, outputTokens: 1 } })).code).toBe(
      "upstream_protocol_error",
    );
  });
});

const event = (type: string, body: unknown) =>
  encodeEventStreamMessage({ ":event-type": type, ":content-type": "application/json", ":message-type": "event" }, enc.encode(JSON.stringify(body)));
const exception = (type: string, message: string) =>
  encodeEventStreamMessage({ ":exception-type": type, ":content-type": "application/json", ":message-type": "exception" }, enc.encode(JSON.stringify({ message })));

function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let p = 0;
  for (const part of parts) {
    out.set(part, p);
    p += part.length;
  }
  return out;
}

/** A whole ConverseStream: reasoning, text with multi-byte characters, a tool call in pieces, stop, usage. */
const STREAM = concat([
  event("messageStart", { role: "assistant" }),
  event("contentBlockDelta", { contentBlockIndex: 0, delta: { reasoningContent: { text: "thinking…" } } }),
  event("contentBlockDelta", { contentBlockIndex: 0, delta: { reasoningContent: { signature: "sig" } } }),
  event("contentBlockStop", { contentBlockIndex: 0 }),
  event("contentBlockDelta", { contentBlockIndex: 1, delta: { text: "Héllo " } }),
  event("contentBlockDelta", { contentBlockIndex: 1, delta: { text: "wörld ✓" } }),
  event("contentBlockStop", { contentBlockIndex: 1 }),
  event("contentBlockStart", { contentBlockIndex: 2, start: { toolUse: { toolUseId: "tooluse_a", name: "weather" } } }),
  event("contentBlockDelta", { contentBlockIndex: 2, delta: { toolUse: { input: '{"city":' } } }),
  event("contentBlockDelta", { contentBlockIndex: 2, delta: { toolUse: { input: '"Oslo"}' } } }),
  event("contentBlockStop", { contentBlockIndex: 2 }),
  event("messageStop", { stopReason: "tool_use" }),
  event("metadata", { usage: { inputTokens: 5, outputTokens: 7, totalTokens: 12 }, metrics: { latencyMs: 42 } }),
]);

function run(chunks: readonly Uint8Array[]): NeutralEvent[] {
  const d = codec.createStreamDecoder();
  const out: NeutralEvent[] = [];
  for (const c of chunks) out.push(...d.bytes!(c));
  out.push(...d.finish());
  return out;
}

/** What STREAM decodes to, whichever way its bytes are cut: one neutral event per delta. */
const EXPECTED: NeutralEvent[] = [
  { type: "start" },
  { type: "reasoning", text: "thinking…" },
  { type: "reasoning_signature", signature: "sig" },
  { type: "text", text: "Héllo " },
  { type: "text", text: "wörld ✓" },
  { type: "tool_call_start", index: 0, id: "tooluse_a", name: "weather" },
  { type: "tool_call_args", index: 0, delta: '{"city":' },
  { type: "tool_call_args", index: 0, delta: '"Oslo"}' },
  { type: "stop", reason: "tool_use" },
  { type: "usage", usage: { inputTokens: 5, outputTokens: 7, source: "provider" } },
];

describe("bedrock-converse streams", () => {
  it("decodes a whole stream to neutral events, the stop sent with the usage that follows it", () => {
    expect(run([STREAM])).toEqual(EXPECTED);
  });

  it("decodes the same events whichever byte the stream is cut at, and byte by byte", () => {
    for (let cut = 0; cut <= STREAM.length; cut++) expect(run([STREAM.subarray(0, cut), STREAM.subarray(cut)])).toEqual(EXPECTED);
    expect(run(Array.from(STREAM, (_, i) => STREAM.subarray(i, i + 1)))).toEqual(EXPECTED);
  });

  it("ends with a cut, never a success, when the stream stops before messageStop or inside a frame", () => {
    const stopAt = STREAM.length - event("metadata", { usage: { inputTokens: 5, outputTokens: 7, totalTokens: 12 }, metrics: { latencyMs: 42 } }).length;
    const beforeStop = stopAt - event("messageStop", { stopReason: "tool_use" }).length;
    for (const cut of [beforeStop, beforeStop + 5, stopAt + 3, 7]) {
      const events = run([STREAM.subarray(0, cut)]);
      expect(events.at(-1)).toEqual({ type: "error", code: "upstream_stream_cut", message: "The provider's stream ended before it was complete." });
      expect(events.some((e) => e.type === "stop")).toBe(false);
    }
    // messageStop without the metadata after it: complete, usage unknown.
    expect(run([STREAM.subarray(0, stopAt)]).slice(-1)).toEqual([{ type: "stop", reason: "tool_use" }]);
  });

  it("ends with the provider's error for an exception in the stream, and reads nothing after it", () => {
    for (const type of ["throttlingException", "modelStreamErrorException", "internalServerException", "serviceUnavailableException", "validationException"]) {
      const events = run([concat([event("messageStart", { role: "assistant" }), event("contentBlockDelta", { contentBlockIndex: 0, delta: { text: "a" } }), exception(type, "secret detail"), event("messageStop", { stopReason: "end_turn" })])]);
      expect(events.slice(0, 2)).toEqual([{ type: "start" }, { type: "text", text: "a" }]);
      expect(events.slice(2)).toHaveLength(1);
      expect(events[2]).toMatchObject({ type: "error", code: "upstream_error" });
      expect(JSON.stringify(events)).not.toContain("secret detail");
    }
  });

  it("treats a corrupted frame, an unreadable payload or an event of the wrong shape as a protocol error", () => {
    const bad = STREAM.slice();
    bad[40]! ^= 1;
    expect(run([bad]).at(-1)).toMatchObject({ type: "error", code: "upstream_protocol_error" });
    const notJson = encodeEventStreamMessage({ ":message-type": "event", ":event-type": "contentBlockDelta" }, enc.encode("{nope"));
    expect(run([notJson])).toEqual([{ type: "error", code: "upstream_protocol_error", message: "The provider sent an unreadable stream event." }]);
    expect(run([event("contentBlockDelta", { contentBlockIndex: 3, delta: { toolUse: { input: "{}" } } })]).at(-1)).toMatchObject({ code: "upstream_protocol_error" });
    expect(run([event("messageStop", { stopReason: 3 })]).at(-1)).toMatchObject({ code: "upstream_protocol_error" });
  });

  it("counts cache reads and writes into the stream's input usage", () => {
    const events = run([concat([event("messageStart", { role: "assistant" }), event("messageStop", { stopReason: "end_turn" }), event("metadata", { usage: { inputTokens: 1, outputTokens: 2, totalTokens: 13, cacheReadInputTokens: 6, cacheWriteInputTokens: 4 } })])]);
    expect(events).toEqual([
      { type: "start" },
      { type: "stop", reason: "end_turn" },
      { type: "usage", usage: { inputTokens: 11, outputTokens: 2, cachedInputTokens: 6, cacheWriteInputTokens: 4, source: "provider" } },
    ]);
  });
});
