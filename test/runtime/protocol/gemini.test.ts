/**
 * The Gemini codec on its own: neutral requests → `generateContent` bodies, answers → neutral
 * responses (finish reasons, thoughts, calls, usage read exactly), `alt=sse` streams → neutral
 * events however the bytes are split, endpoint paths and Google's error envelope.
 */
import { createParser } from "eventsource-parser";
import { describe, expect, it } from "vitest";
import { requestFeatures } from "../../../src/protocol/features.ts";
import { geminiPath, readGoogleError } from "../../../src/protocol/gemini/endpoint.ts";
import { geminiCodec } from "../../../src/protocol/gemini/index.ts";
import { SKIP_SIGNATURE } from "../../../src/protocol/gemini/request.ts";
import { geminiCallId, signatureOfCallId } from "../../../src/protocol/gemini/tool-call-id.ts";
import type { NeutralEvent, NeutralRequest } from "../../../src/protocol/neutral.ts";
import { builtinCodecs } from "../../../src/protocol/registry.ts";
import { refusal } from "../support/refusal.ts";

const codec = geminiCodec;
const MODEL = "gemini-2.5-flash";
const text = (t: string) => [{ type: "text" as const, text: t }];
const base: NeutralRequest = { model: "sluice-chat", messages: [{ role: "user", content: text("hi") }], stream: false, streamUsage: false };
const encode = (over: Partial<NeutralRequest>, model = MODEL) => codec.encodeRequest({ ...base, ...over }, model, { streamUsage: true }) as Record<string, unknown>;


describe("the registry", () => {
  it("knows gemini as a backend protocol only: no client can speak it", () => {
    expect(builtinCodecs.backend("gemini")).toBe(geminiCodec);
    expect(builtinCodecs.get("gemini" as never)).toBeUndefined();
  });
});

describe("gemini request encoding", () => {
  it("hoists system and developer messages into systemInstruction and alternates user and model turns", () => {
    const body = encode({
      messages: [
        { role: "system", content: text("Be brief.") },
        { role: "user", content: text("first") },
        { role: "developer", content: text("Answer in French.") },
        { role: "user", content: [{ type: "text", text: "second" }, { type: "image", url: "data:image/png;base64,iVBORw0KGgo=" }] },
        { role: "assistant", content: [{ type: "reasoning", text: "thinking…" }, { type: "text", text: "D'accord." }] },
        { role: "user", content: text("third") },
      ],
    });
    expect(body.systemInstruction).toEqual({ parts: [{ text: "Be brief." }, { text: "Answer in French." }] });
    expect(body.contents).toEqual([
      { role: "user", parts: [{ text: "first" }, { text: "second" }, { inlineData: { mimeType: "image/png", data: "iVBORw0KGgo=" } }] },
      { role: "model", parts: [{ text: "D'accord." }] },
      { role: "user", parts: [{ text: "third" }] },
    ]);
    expect(body).not.toHaveProperty("generationConfig");
    expect(body).not.toHaveProperty("model");
  });

  it("writes tool declarations, the calling mode, calls as functionCall and results as functionResponse named after their call", () => {
    const body = encode({
      tools: [{ name: "weather", description: "Current weather", parameters: { type: "object", properties: { city: { type: "string" } }, additionalProperties: false } }, { name: "now" }],
      toolChoice: { type: "tool", name: "weather" },
      messages: [
        { role: "user", content: text("Weather in Paris and Rome?") },
        {
          role: "assistant",
          content: [],
          toolCalls: [
            { id: "c1", name: "weather", arguments: '{"city":"Paris"}' },
            { id: "c2", name: "weather", arguments: '{"city":"Rome"}' },
          ],
        },
        { role: "tool", toolCallId: "c1", content: text("18C") },
        { role: "tool", toolCallId: "c2", content: text("no data"), isError: true },
      ],
    });
    expect(body.tools).toEqual([
      {
        functionDeclarations: [
          { name: "weather", description: "Current weather", parametersJsonSchema: { type: "object", properties: { city: { type: "string" } }, additionalProperties: false } },
          { name: "now" },
        ],
      },
    ]);
    expect(body.toolConfig).toEqual({ functionCallingConfig: { mode: "ANY", allowedFunctionNames: ["weather"] } });
    expect(body.contents).toEqual([
      { role: "user", parts: [{ text: "Weather in Paris and Rome?" }] },
      { role: "model", parts: [{ functionCall: { name: "weather", args: { city: "Paris" } } }, { functionCall: { name: "weather", args: { city: "Rome" } } }] },
      { role: "user", parts: [{ functionResponse: { name: "weather", response: { output: "18C" } } }, { functionResponse: { name: "weather", response: { error: "no data" } } }] },
    ]);
    for (const [choice, mode] of [
      [{ type: "auto" }, "AUTO"],
      [{ type: "none" }, "NONE"],
      [{ type: "required" }, "ANY"],
    ] as const) {
      expect(encode({ toolChoice: choice }).toolConfig).toEqual({ functionCallingConfig: { mode } });
    }
  });

  it("replays a call's thought signature from its id; Gemini 3 gets Google's stand-in for a call without one, earlier models nothing", () => {
    const signed = geminiCallId("CiQB0e2Kb+/sig==");
    const messages: NeutralRequest["messages"] = [
      { role: "user", content: text("go") },
      { role: "assistant", content: [], toolCalls: [{ id: signed, name: "a", arguments: "{}" }, { id: "toolu_other", name: "b", arguments: "" }] },
      { role: "tool", toolCallId: signed, content: text("1") },
      { role: "tool", toolCallId: "toolu_other", content: text("2") },
    ];
    const parts = (model: string) => ((encode({ messages }, model).contents as { parts: Record<string, unknown>[] }[])[1]!.parts);
    expect(parts("gemini-3-pro-preview")).toEqual([
      { functionCall: { name: "a", args: {} }, thoughtSignature: "CiQB0e2Kb+/sig==" },
      { functionCall: { name: "b", args: {} }, thoughtSignature: SKIP_SIGNATURE },
    ]);
    expect(parts(MODEL)).toEqual([{ functionCall: { name: "a", args: {} }, thoughtSignature: "CiQB0e2Kb+/sig==" }, { functionCall: { name: "b", args: {} } }]);
  });

  it("carries a signature of any text through an id in the character set every client allows", () => {
    for (const sig of ["CiQB0e2Kb+/sig==", "a", "ab", "日本🙂", SKIP_SIGNATURE]) {
      const id = geminiCallId(sig);
      expect(id).toMatch(/^[A-Za-z0-9_-]+$/);
      expect(signatureOfCallId(id)).toBe(sig);
    }
    expect(geminiCallId(undefined)).toMatch(/^call_[0-9a-f]{32}$/);
    expect(signatureOfCallId(geminiCallId(undefined))).toBeUndefined();
    expect(signatureOfCallId("call_abc_gs_Zm9v")).toBeUndefined();
  });

  it("maps sampling, limits, stop sequences and JSON output onto generationConfig", () => {
    const schema = { type: "object", properties: { a: { type: "integer" } }, required: ["a"], additionalProperties: false };
    const body = encode({
      maxOutputTokens: 300,
      temperature: 1.5,
      topP: 0.9,
      topK: 40,
      seed: 7,
      presencePenalty: 0.5,
      frequencyPenalty: -0.5,
      stop: ["END", "STOP"],
      responseFormat: { type: "json_schema", name: "answer", schema, strict: true },
    });
    expect(body.generationConfig).toEqual({
      maxOutputTokens: 300,
      temperature: 1.5,
      topP: 0.9,
      topK: 40,
      seed: 7,
      presencePenalty: 0.5,
      frequencyPenalty: -0.5,
      stopSequences: ["END", "STOP"],
      responseMimeType: "application/json",
      responseJsonSchema: schema,
    });
    expect(encode({ responseFormat: { type: "json_object" } }).generationConfig).toEqual({ responseMimeType: "application/json" });
  });

  it("maps reasoning effort to thinkingLevel and a budget to thinkingBudget, thoughts returned unless omitted", () => {
    expect((encode({ reasoningEffort: "low" }).generationConfig as Record<string, unknown>).thinkingConfig).toEqual({ includeThoughts: true, thinkingLevel: "low" });
    expect((encode({ reasoningBudgetTokens: 2048 }).generationConfig as Record<string, unknown>).thinkingConfig).toEqual({ includeThoughts: true, thinkingBudget: 2048 });
    expect((encode({ reasoningBudgetTokens: "adaptive", reasoningDisplay: "omitted" }).generationConfig as Record<string, unknown>).thinkingConfig).toEqual({
      includeThoughts: false,
      thinkingBudget: -1,
    });
  });

  it("refuses, naming the field, what Gemini cannot take", () => {
    const cases: [Partial<NeutralRequest>, string | undefined, RegExp][] = [
      [{ reasoningEffort: "xhigh" }, undefined, /reasoning effort 'xhigh'/],
      [{ reasoningEffort: "none" }, undefined, /reasoning effort 'none'/],
      [{ reasoningBudgetTokens: "between_tools" }, undefined, /between tool calls/],
      [{ responseFormat: { type: "json_schema", name: "x" } }, "response_format", /without a schema/],
      [{ messages: [{ role: "user", content: [{ type: "image", url: "https://example.com/cat.png" }] }] }, "messages[0]", /base64 data URLs/],
      [{ messages: [{ role: "system", content: [{ type: "image", url: "data:image/png;base64,AA==" }] }] }, "messages[0]", /only allowed in user/],
      [{ messages: [{ role: "user", content: text("x") }, { role: "tool", toolCallId: "nope", content: text("r") }] }, "messages[1]", /no earlier tool call has the id 'nope'/],
      [{ messages: [{ role: "assistant", content: [], toolCalls: [{ id: "c", name: "f", arguments: "[1]" }] }] }, "messages[0]", /JSON object/],
    ];
    for (const [over, param, message] of cases) {
      const err = refusal(() => encode(over));
      expect(err.code, JSON.stringify(over)).toBe("invalid_request");
      expect(err.param).toBe(param);
      expect(err.message).toMatch(message);
    }
  });

  it("declares exactly the features it carries: the rest are refused or downgraded before encoding", () => {
    const used = requestFeatures({ ...base, parallelToolCalls: false, metadata: { a: "b" }, verbosity: "low", speed: "fast", inferenceGeo: "us", openAiServiceTier: "flex", anthropicServiceTier: "auto" });
    for (const f of used) expect(codec.carries.has(f), f).toBe(false);
    for (const f of ["top_k", "seed", "stop_sequences", "json_schema", "json_object", "reasoning_effort", "reasoning_budget", "tool_result_error", "temperature_above_1"] as const) expect(codec.carries.has(f), f).toBe(true);
  });
});

describe("gemini answers", () => {
  it("reads text, thoughts, function calls and the usage exactly (cached input inside prompt, thoughts added to output)", () => {
    const r = codec.decodeResponse({
      responseId: "resp-1",
      modelVersion: "gemini-2.5-flash",
      candidates: [
        {
          index: 0,
          content: {
            role: "model",
            parts: [
              { text: "Let me look.", thought: true },
              { text: "Checking " },
              { text: "now." },
              { functionCall: { name: "weather", args: { city: "Paris" } }, thoughtSignature: "c2ln" },
            ],
          },
          finishReason: "STOP",
          safetyRatings: [],
        },
      ],
      usageMetadata: { promptTokenCount: 120, candidatesTokenCount: 30, cachedContentTokenCount: 100, thoughtsTokenCount: 12, toolUsePromptTokenCount: 5, totalTokenCount: 167 },
    });
    expect(r.text).toBe("Checking now.");
    expect(r.reasoning).toEqual([{ text: "Let me look." }]);
    expect(r.toolCalls).toHaveLength(1);
    expect(r.toolCalls[0]!.name).toBe("weather");
    expect(JSON.parse(r.toolCalls[0]!.arguments)).toEqual({ city: "Paris" });
    expect(signatureOfCallId(r.toolCalls[0]!.id)).toBe("c2ln");
    expect(r.stopReason).toBe("tool_use");
    expect(r.providerId).toBe("resp-1");
    expect(r.usage).toEqual({ inputTokens: 125, outputTokens: 42, cachedInputTokens: 100, reasoningTokens: 12, source: "provider" });
  });

  it("maps every finish reason: safety filters are content_filter, a blocked prompt too, unknown usage stays unknown", () => {
    const answer = (finishReason: string) => codec.decodeResponse({ candidates: [{ content: { role: "model", parts: [{ text: "x" }] }, finishReason }] });
    expect(answer("STOP").stopReason).toBe("end_turn");
    expect(answer("MAX_TOKENS").stopReason).toBe("max_tokens");
    for (const f of ["SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"]) expect(answer(f).stopReason, f).toBe("content_filter");
    for (const f of ["MALFORMED_FUNCTION_CALL", "LANGUAGE", "OTHER", "SOMETHING_NEW"]) expect(answer(f).stopReason, f).toBe("other");
    expect(answer("STOP").usage).toBeUndefined();
    const blocked = codec.decodeResponse({ promptFeedback: { blockReason: "SAFETY" }, usageMetadata: { promptTokenCount: 8, totalTokenCount: 8 } });
    expect(blocked).toMatchObject({ text: "", toolCalls: [], stopReason: "content_filter", usage: { inputTokens: 8, outputTokens: 0, source: "provider" } });
  });

  it("refuses unreadable answers as upstream_protocol_error", () => {
    for (const body of [null, [], { candidates: [] }, { candidates: [{ content: { parts: [{ functionCall: { args: {} } }] } }] }, { candidates: "x" }, { usageMetadata: { promptTokenCount: -1 }, candidates: [{}] }]) {
      expect(refusal(() => codec.decodeResponse(body)).code, JSON.stringify(body)).toBe("upstream_protocol_error");
    }
  });
});

/** The neutral events of SSE text fed in the given chunks, as the stream pipeline feeds them. */
function decode(chunks: readonly Uint8Array[]): NeutralEvent[] {
  const decoder = codec.createStreamDecoder();
  const utf8 = new TextDecoder();
  const out: NeutralEvent[] = [];
  const parser = createParser({ onEvent: (e) => out.push(...decoder.decode({ event: e.event, data: e.data })) });
  for (const c of chunks) parser.feed(utf8.decode(c, { stream: true }));
  parser.feed(utf8.decode());
  out.push(...decoder.finish());
  return out;
}
// Google's SSE uses CRLF line endings.
const sse = (...events: readonly unknown[]) => events.map((e) => `data: ${typeof e === "string" ? e : JSON.stringify(e)}\r\n\r\n`).join("");
const bytes = (s: string) => new TextEncoder().encode(s);

describe("gemini streams", () => {
  const chunk = (parts: unknown[], extra: Record<string, unknown> = {}) => ({ candidates: [{ content: { role: "model", parts }, ...extra }], modelVersion: MODEL, responseId: "r1" });
  const stream = sse(
    chunk([{ text: "Hmm.", thought: true }], { usageMetadata: undefined }),
    { ...chunk([{ text: "héllo " }]), usageMetadata: { promptTokenCount: 9, candidatesTokenCount: 2, totalTokenCount: 11 } },
    { ...chunk([{ text: "日本 🙂" }], { finishReason: "STOP" }), usageMetadata: { promptTokenCount: 9, candidatesTokenCount: 5, thoughtsTokenCount: 3, cachedContentTokenCount: 4, totalTokenCount: 17 } },
  );
  const expected: NeutralEvent[] = [
    { type: "start" },
    { type: "reasoning", text: "Hmm." },
    { type: "text", text: "héllo " },
    { type: "text", text: "日本 🙂" },
    { type: "stop", reason: "end_turn" },
    { type: "usage", usage: { inputTokens: 9, outputTokens: 8, cachedInputTokens: 4, reasoningTokens: 3, source: "provider" } },
  ];

  it("decodes thoughts and text, then the stop and the last running usage at the end", () => {
    expect(decode([bytes(stream)])).toEqual(expected);
  });

  it("decodes the same however the bytes are split, inside characters included", () => {
    const all = bytes(stream);
    for (let i = 1; i < all.length; i++) expect(decode([all.slice(0, i), all.slice(i)]), `split at ${i}`).toEqual(expected);
  });

  it("hands a whole function call over as a start and its arguments, and stops for the tool", () => {
    const events = decode([bytes(sse(chunk([{ functionCall: { name: "weather", args: { city: "Paris" } }, thoughtSignature: "c2ln" }], { finishReason: "STOP" })))]);
    expect(events[0]).toEqual({ type: "start" });
    const start = events[1] as Extract<NeutralEvent, { type: "tool_call_start" }>;
    expect(start).toMatchObject({ type: "tool_call_start", index: 0, name: "weather" });
    expect(signatureOfCallId(start.id)).toBe("c2ln");
    expect(events.slice(2)).toEqual([{ type: "tool_call_args", index: 0, delta: '{"city":"Paris"}' }, { type: "stop", reason: "tool_use" }]);
  });

  it("reports a stream that ended without a finish reason as cut, and an unreadable chunk as a protocol error", () => {
    expect(decode([bytes(sse(chunk([{ text: "partial" }])))]).at(-1)).toEqual({ type: "error", code: "upstream_stream_cut", message: expect.any(String) });
    expect(decode([])).toEqual([{ type: "error", code: "upstream_stream_cut", message: expect.any(String) }]);
    expect(decode([bytes(sse("{not json"))])).toEqual([{ type: "error", code: "upstream_protocol_error", message: expect.any(String) }]);
    expect(decode([bytes(sse({ candidates: 3 }))])).toEqual([{ type: "error", code: "upstream_protocol_error", message: expect.any(String) }]);
  });

  it("reports Google's error envelope in a chunk as the provider's mid-stream error, without its text", () => {
    const events = decode([bytes(sse(chunk([{ text: "a" }]), { error: { code: 503, message: "secret-ish detail", status: "UNAVAILABLE" } }))]);
    expect(events).toEqual([{ type: "start" }, { type: "text", text: "a" }, { type: "error", code: "upstream_error", message: "The provider is overloaded and ended the stream." }]);
  });

  it("ends a blocked prompt and a safety stop as content_filter", () => {
    expect(decode([bytes(sse({ promptFeedback: { blockReason: "PROHIBITED_CONTENT" } }))])).toEqual([{ type: "start" }, { type: "stop", reason: "content_filter" }]);
    expect(decode([bytes(sse(chunk([{ text: "a" }]), chunk([], { finishReason: "SAFETY" })))]).slice(-1)).toEqual([{ type: "stop", reason: "content_filter" }]);
  });
});

describe("gemini endpoints and errors", () => {
  it("names the model in the Gemini API's path or under the Vertex project and location", () => {
    expect(geminiPath({ mode: "gemini-api" }, "gemini-2.5-flash", false)).toBe("/v1beta/models/gemini-2.5-flash:generateContent");
    expect(geminiPath({ mode: "gemini-api" }, "gemini-2.5-flash", true)).toBe("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse");
    expect(geminiPath({ mode: "vertex", project: "my-proj", location: "europe-west4" }, "gemini-2.5-pro", true)).toBe(
      "/v1/projects/my-proj/locations/europe-west4/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
    );
  });

  it("reads Google's error envelope: its status and RetryInfo's delay", () => {
    const body = {
      error: {
        code: 429,
        message: "Resource has been exhausted",
        status: "RESOURCE_EXHAUSTED",
        details: [{ "@type": "type.googleapis.com/google.rpc.QuotaFailure" }, { "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: "17.2s" }],
      },
    };
    expect(readGoogleError(JSON.stringify(body))).toEqual({ status: "RESOURCE_EXHAUSTED", retryDelaySeconds: 18 });
    expect(readGoogleError(JSON.stringify([body]))).toEqual({ status: "RESOURCE_EXHAUSTED", retryDelaySeconds: 18 });
    expect(readGoogleError(JSON.stringify({ error: { code: 503, status: "UNAVAILABLE" } }))).toEqual({ status: "UNAVAILABLE" });
    expect(readGoogleError("upstream connect error")).toEqual({});
    expect(readGoogleError(JSON.stringify({ error: { details: [{ "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: "99999s" }] } }))).toEqual({ retryDelaySeconds: 3600 });
    // An invalid key: ErrorInfo's reason, with or without its @type; the message is never read.
    const invalidKey = { error: { code: 400, message: "API key not valid.", status: "INVALID_ARGUMENT", details: [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "API_KEY_INVALID", domain: "googleapis.com" }, { "@type": "type.googleapis.com/google.rpc.LocalizedMessage", locale: "en-US", message: "x" }] } };
    expect(readGoogleError(JSON.stringify(invalidKey))).toEqual({ status: "INVALID_ARGUMENT", reasons: ["API_KEY_INVALID"] });
    expect(readGoogleError(JSON.stringify({ error: { code: 400, status: "INVALID_ARGUMENT", details: [{ reason: "API_KEY_INVALID" }] } }))).toEqual({ status: "INVALID_ARGUMENT", reasons: ["API_KEY_INVALID"] });
  });
});
