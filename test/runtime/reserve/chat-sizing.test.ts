import { describe, expect, it } from "vitest";
import type { NeutralRequest } from "../../../src/protocol/neutral.ts";
import { estimatePromptTokens } from "../../../src/protocol/prompt-estimate.ts";
import type { CompiledEntrypoint } from "../../../src/publication/compile-publication.ts";
import { chatSizing } from "../../../src/reserve/reserve-phase.ts";

// Sizing reads one field of the entrypoint.
const entrypoint = { budget: { defaultMaxOutputTokens: 256 } } as unknown as CompiledEntrypoint;

describe("a chat request's sizing", () => {
  it("has the request's input estimate without holding the request: a later change to its messages does not move it", () => {
    const messages = [{ role: "user" as const, content: [{ type: "text" as const, text: "word ".repeat(400) }] }];
    const request: NeutralRequest = { model: "sluice-chat", messages, stream: true, streamUsage: true };
    const { sizing, request: sent } = chatSizing(request, entrypoint);
    const expected = estimatePromptTokens(sent);
    expect(expected).toBeGreaterThan(100);
    // The estimate is read at settlement, which may come long after; by then the stream let go of the request.
    messages[0]!.content[0] = { type: "text", text: "" };
    expect(sizing.inputEstimate()).toBe(expected);
    expect(sent.maxOutputTokens).toBe(256);
    expect(sizing.injectedCap).toBe(256);
  });
});
