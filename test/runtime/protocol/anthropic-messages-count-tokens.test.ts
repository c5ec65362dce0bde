import { describe, expect, it } from "vitest";
import { anthropicMessagesCodec } from "../../../src/protocol/anthropic-messages/index.ts";
import { estimatePromptTokens } from "../../../src/protocol/prompt-estimate.ts";
import { builtinCodecs } from "../../../src/protocol/registry.ts";
import { invalidRequestOf, rejectOf } from "./error-helpers.ts";

const wire = anthropicMessagesCodec.countTokens!;
const expectInvalid = invalidRequestOf((body) => wire.decodeRequest(body));

const weather = { name: "get_weather", description: "Weather for a city", input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } };

describe("anthropic token count (POST /v1/messages/count_tokens)", () => {
  it("decodes a body without max_tokens into the chat it counts, never streamed", () => {
    const request = wire.decodeRequest({ model: "sluice-chat", system: "Be brief.", messages: [{ role: "user", content: "Hello" }], tools: [weather] });
    expect(request.model).toBe("sluice-chat");
    expect(request.maxOutputTokens).toBeUndefined();
    expect(request.stream).toBe(false);
    expect(request.streamUsage).toBe(false);
    expect(request.messages.map((m) => m.role)).toEqual(["system", "user"]);
    expect(request.tools?.map((t) => t.name)).toEqual(["get_weather"]);
    // The same conversation as a message decodes to the same input, so the estimates agree.
    const message = anthropicMessagesCodec.decodeRequest({ model: "sluice-chat", max_tokens: 100, system: "Be brief.", messages: [{ role: "user", content: "Hello" }], tools: [weather] });
    expect(estimatePromptTokens(request)).toBe(estimatePromptTokens(message));
  });

  it("accepts a message's output parameters (a client may pass the message it is about to send) and forces no stream", () => {
    const request = wire.decodeRequest({ model: "m", max_tokens: 50, stream: true, temperature: 0.2, messages: [{ role: "user", content: "x" }] });
    expect(request.stream).toBe(false);
    expect(request.maxOutputTokens).toBe(50);
  });

  it("refuses what a message would refuse, naming the field", () => {
    expectInvalid({ model: "m" }, "messages");
    expectInvalid({ model: "m", messages: [] }, "messages");
    expectInvalid({ model: "m", max_tokens: 0, messages: [{ role: "user", content: "x" }] }, "max_tokens");
    expectInvalid({ model: "m", messages: [{ role: "user", content: "x" }], unknown_param: 1 }, "unknown_param");
    const server = expectInvalid({ model: "m", messages: [{ role: "user", content: "x" }], tools: [{ type: "web_search_20250305", name: "web_search" }] }, "tools[0]");
    expect(server.message).toContain("server tool");
  });

  it("encodes only what the count reads, for the provider's model id", () => {
    const request = wire.decodeRequest({
      model: "sluice-chat",
      max_tokens: 2048,
      stream: true,
      temperature: 0.5,
      top_k: 3,
      stop_sequences: ["END"],
      metadata: { user_id: "u1" },
      system: "Be brief.",
      messages: [{ role: "user", content: "Hello" }],
      tools: [weather],
      tool_choice: { type: "auto" },
      thinking: { type: "enabled", budget_tokens: 1024 },
    });
    const body = wire.encodeRequest(request, "claude-upstream") as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(["messages", "model", "system", "thinking", "tool_choice", "tools"]);
    expect(body.model).toBe("claude-upstream");
    expect(body.system).toBe("Be brief.");
    expect(body.messages).toEqual([{ role: "user", content: "Hello" }]);
    expect(body.thinking).toEqual({ type: "enabled", budget_tokens: 1024 });
    expect(body.tools).toEqual([weather]);
    expect(wire.upstreamPath).toBe("/messages/count_tokens");
  });

  it("reads the provider's count and answers the client with Anthropic's shape", () => {
    expect(wire.decodeResponse({ input_tokens: 42 })).toBe(42);
    expect(wire.decodeResponse({ input_tokens: 0, context_management: null })).toBe(0);
    for (const bad of [{}, { input_tokens: -1 }, { input_tokens: 1.5 }, { input_tokens: "3" }, null, "42"]) {
      expect(rejectOf(() => wire.decodeResponse(bad)).code, JSON.stringify(bad)).toBe("upstream_protocol_error");
    }
    expect(wire.encodeResponse(17)).toEqual({ input_tokens: 17 });
  });

  it("is Anthropic's alone: the OpenAI protocols have no token-count wire", () => {
    expect(builtinCodecs.get("openai-chat")!.countTokens).toBeUndefined();
    expect(builtinCodecs.get("openai-responses")!.countTokens).toBeUndefined();
  });
});
