import { describe, expect, it } from "vitest";
import { errorProtocolOf, GENERATION_ROUTES } from "../../../src/http/generation-routes.ts";

describe("the envelope of a request no route answered", () => {
  it("is the route's own protocol on a model route (a wrong method)", () => {
    for (const r of GENERATION_ROUTES) expect(errorProtocolOf(r.path, false), r.path).toBe(r.protocol);
    expect(errorProtocolOf("/v1/messages/count_tokens", false)).toBe("anthropic-messages");
  });

  it("is Anthropic's on the Anthropic-only surface, whatever the client sent", () => {
    for (const path of ["/v1/messages/batches", "/v1/messages/batches/msgbatch_1/results", "/v1/messages/xyz", "/v1/messages/", "/v1/complete"]) {
      expect(errorProtocolOf(path, false), path).toBe("anthropic-messages");
    }
  });

  it("is Anthropic's for a client that sends anthropic-version, anywhere", () => {
    for (const path of ["/v1/nope", "/v1/chat/completions", "/v1/models/xyz", "/"]) expect(errorProtocolOf(path, true), path).toBe("anthropic-messages");
  });

  it("is OpenAI's elsewhere, including paths that only look like Anthropic's", () => {
    for (const path of ["/v1/nope", "/v1/messagesx", "/v1/completions", "/v1/complete/more", "/v2/messages/batches", "/"]) {
      expect(errorProtocolOf(path, false), path).toBe("openai-chat");
    }
  });
});
