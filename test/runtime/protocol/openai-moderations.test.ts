import { describe, expect, it } from "vitest";
import { toOpenAiErrorBody } from "../../../src/errors/envelopes.ts";
import type { NeutralModerationResponse } from "../../../src/protocol/moderations.ts";
import { openAiChatCodec } from "../../../src/protocol/openai-chat/index.ts";
import { openAiModerationsCodec as wire } from "../../../src/protocol/openai-moderations/index.ts";
import { openAiResponsesCodec } from "../../../src/protocol/openai-responses/index.ts";
import { invalidRequestOf, rejectOf } from "./error-helpers.ts";

const expectInvalid = invalidRequestOf((body) => wire.decodeRequest(body));

/** One result as OpenAI writes it (two of its thirteen categories are enough here). */
const result = (violence: number, extra: Record<string, unknown> = {}) => ({
  flagged: violence >= 0.5,
  categories: { harassment: false, violence: violence >= 0.5 },
  category_scores: { harassment: 0.001, violence },
  ...extra,
});

const providerBody = (results: unknown[], extra: Record<string, unknown> = {}) => ({ id: "modr-PROVIDER", model: "omni-moderation-2024-09-26", results, ...extra });

/** Decoding must fail as an unreadable upstream answer, never as the client's fault. */
function expectUnreadable(body: unknown, expected = 1): void {
  const err = rejectOf(() => wire.decodeResponse(body, expected));
  expect(err.code).toBe("upstream_protocol_error");
  expect(err.status).toBe(502);
  expect(err.source).toBe("upstream");
  expect(err.message).toBe("The moderations provider returned an unreadable response.");
}

describe("openai moderations wire", () => {
  it("is the moderations wire of both OpenAI codecs, at <baseUrl>/moderations", () => {
    expect(openAiChatCodec.moderations).toBe(wire);
    expect(openAiResponsesCodec.moderations).toBe(wire);
    expect(wire.upstreamPath).toBe("/moderations");
  });

  describe("decodeRequest (client side)", () => {
    it("takes one string or a list of strings, in order", () => {
      expect(wire.decodeRequest({ model: "m", input: "hello" })).toEqual({ model: "m", inputs: ["hello"] });
      expect(wire.decodeRequest({ model: "m", input: ["one", "", "three"] })).toEqual({ model: "m", inputs: ["one", "", "three"] });
    });

    it("refuses a malformed body with a 400 naming the field, in OpenAI's envelope", () => {
      const noModel = expectInvalid({ input: "x" }, "model");
      expect(toOpenAiErrorBody(noModel)).toEqual({ error: { message: "Missing required parameter: 'model'.", type: "invalid_request_error", param: "model", code: "invalid_request" } });
      const noInput = expectInvalid({ model: "m" }, "input");
      expect(noInput.message).toBe("Missing required parameter: 'input'.");
      expect(expectInvalid({ model: "m", input: [] }, "input").message).toBe("Invalid value for 'input': Too small: expected array to have >=1 items");
      expect(expectInvalid({ model: "m", input: 42 }, "input").message).toBe("Invalid value for 'input': expected a string or a non-empty array of strings");
      expectInvalid({ model: "m", input: null }, "input");
      expectInvalid({ model: "", input: "x" }, "model");
      expectInvalid({ model: 7, input: "x" }, "model");
      expect(rejectOf(() => wire.decodeRequest("not an object")).code).toBe("invalid_request");
      expect(rejectOf(() => wire.decodeRequest(null)).status).toBe(400);
    });

    it("refuses a mixed list and multi-modal parts, saying only text is moderated", () => {
      const mixed = rejectOf(() => wire.decodeRequest({ model: "m", input: ["a", 1] }));
      expect(mixed.code).toBe("invalid_request");
      expect(mixed.param).toMatch(/^input/);
      const image = expectInvalid({ model: "m", input: [{ type: "text", text: "look" }, { type: "image_url", image_url: { url: "https://example.com/x.png" } }] }, "input");
      expect(toOpenAiErrorBody(image).error).toMatchObject({ type: "invalid_request_error", param: "input", message: expect.stringContaining("Only text is moderated") });
    });
  });

  describe("encodeRequest (backend side)", () => {
    it("sends the provider's own model id, one input as a string and several as a list", () => {
      expect(wire.encodeRequest({ model: "public", inputs: ["only"] }, "omni-moderation-latest")).toEqual({ model: "omni-moderation-latest", input: "only" });
      expect(wire.encodeRequest({ model: "public", inputs: ["a", "b"] }, "up")).toEqual({ model: "up", input: ["a", "b"] });
    });
  });

  describe("decodeResponse (backend side)", () => {
    it("reads one verdict per input, in order; no usage is unknown, never zero", () => {
      const r = wire.decodeResponse(providerBody([result(0.02), result(0.91)]), 2);
      expect(r.inputTokens).toBeUndefined();
      expect(r.results).toEqual([
        { flagged: false, categories: { harassment: false, violence: false }, categoryScores: { harassment: 0.001, violence: 0.02 } },
        { flagged: true, categories: { harassment: false, violence: true }, categoryScores: { harassment: 0.001, violence: 0.91 } },
      ]);
    });

    it("reads the usage a self-hosted classifier reports, and the input types it names", () => {
      const r = wire.decodeResponse(providerBody([result(0.7, { category_applied_input_types: { harassment: ["text"], violence: ["text", "image"] } })], { usage: { prompt_tokens: 12, total_tokens: 12 } }), 1);
      expect(r.inputTokens).toBe(12);
      expect(r.results[0]!.appliedInputTypes).toEqual({ harassment: ["text"], violence: ["text", "image"] });
      // A usage figure that is not a count is no figure at all.
      expect(wire.decodeResponse(providerBody([result(0)], { usage: { prompt_tokens: -3 } }), 1).inputTokens).toBeUndefined();
      expect(wire.decodeResponse(providerBody([result(0)], { usage: { prompt_tokens: 1.5 } }), 1).inputTokens).toBeUndefined();
    });

    it("leaves out malformed input types (informative only) instead of failing the answer", () => {
      const r = wire.decodeResponse(providerBody([result(0.1, { category_applied_input_types: { violence: "text" } })]), 1);
      expect(r.results[0]).not.toHaveProperty("appliedInputTypes");
    });

    it("fails an answer it cannot read as an upstream protocol error", () => {
      expectUnreadable("not json object");
      expectUnreadable(null);
      expectUnreadable({ id: "modr-x" });
      expectUnreadable({ results: {} });
      expectUnreadable(providerBody([result(0.1)]), 2);
      expectUnreadable(providerBody([result(0.1), result(0.2)]), 1);
      expectUnreadable(providerBody(["flagged"]));
      expectUnreadable(providerBody([{ ...result(0.1), flagged: "false" }]));
      expectUnreadable(providerBody([{ ...result(0.1), categories: undefined }]));
      expectUnreadable(providerBody([{ ...result(0.1), categories: { violence: 1 } }]));
      expectUnreadable(providerBody([{ ...result(0.1), categories: ["violence"] }]));
      expectUnreadable(providerBody([{ ...result(0.1), category_scores: { violence: "0.1" } }]));
      expectUnreadable(providerBody([{ ...result(0.1), category_scores: null }]));
    });

    it("keeps a category named like an object's prototype as plain data", () => {
      const body = JSON.parse('{"results":[{"flagged":false,"categories":{"__proto__":false},"category_scores":{"__proto__":0.25}}]}');
      const v = wire.decodeResponse(body, 1).results[0]!;
      expect(Object.keys(v.categories)).toEqual(["__proto__"]);
      expect(Object.getPrototypeOf(v.categories)).toBe(Object.prototype);
      expect(Object.getOwnPropertyDescriptor(v.categoryScores, "__proto__")?.value).toBe(0.25);
    });
  });

  describe("encodeResponse (client side)", () => {
    const response: NeutralModerationResponse = {
      inputTokens: undefined,
      results: [
        { flagged: true, categories: { violence: true, hate: false }, categoryScores: { violence: 0.91, hate: 0.01 } },
        { flagged: false, categories: { violence: false }, categoryScores: { violence: 0.02 }, appliedInputTypes: { violence: ["text"] } },
      ],
    };

    it("writes OpenAI's shape under the gateway's id and the public model name", () => {
      expect(wire.encodeResponse(response, { model: "public", inputs: ["a", "b"] }, { id: "0123abcd", model: "sluice-moderation" })).toEqual({
        id: "modr-0123abcd",
        model: "sluice-moderation",
        results: [
          { flagged: true, categories: { violence: true, hate: false }, category_scores: { violence: 0.91, hate: 0.01 }, category_applied_input_types: { violence: ["text"], hate: ["text"] } },
          { flagged: false, categories: { violence: false }, category_scores: { violence: 0.02 }, category_applied_input_types: { violence: ["text"] } },
        ],
      });
    });

    it("round-trips what it decoded", () => {
      const results = [result(0.3), result(0.6)];
      const encoded = wire.encodeResponse(wire.decodeResponse(providerBody(results), 2), { model: "p", inputs: ["a", "b"] }, { id: "1", model: "p" }) as { results: unknown[] };
      expect(encoded.results).toEqual(results.map((r) => ({ ...r, category_applied_input_types: { harassment: ["text"], violence: ["text"] } })));
    });
  });
});
