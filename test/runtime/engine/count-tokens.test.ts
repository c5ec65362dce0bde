import { describe, expect, it } from "vitest";
import { estimatePromptTokens } from "../../../src/protocol/prompt-estimate.ts";
import type { Ingress } from "../../../src/kinds/model/model-api.ts";
import { builtinCodecs } from "../../../src/protocol/registry.ts";
import { engineHarness } from "../support/engine-harness.ts";
import { protocolSnapshot } from "../support/executor-harness.ts";

const COUNT_BODY = { model: "sluice-chat", system: "Be brief.", messages: [{ role: "user", content: "How many tokens is this?" }] };
const ESTIMATE = estimatePromptTokens(builtinCodecs.get("anthropic-messages")!.countTokens!.decodeRequest(COUNT_BODY));

/** An Anthropic provider: counts are 42, messages answer "Hi!". */
const anthropicProvider = (url: string) =>
  url.endsWith("/messages/count_tokens")
    ? Response.json({ input_tokens: 42 })
    : Response.json({ id: "msg_1", type: "message", role: "assistant", model: "m", content: [{ type: "text", text: "Hi!" }], stop_reason: "end_turn", usage: { input_tokens: 5, output_tokens: 2 } });

function count(h: ReturnType<typeof engineHarness>, over: Partial<Ingress> = {}) {
  return h.engine.begin(h.ingress(COUNT_BODY, { protocol: "anthropic-messages", operation: "count_tokens", ...over }));
}

async function run(h: ReturnType<typeof engineHarness>, over: Partial<Ingress> = {}) {
  const session = count(h, over);
  const action = await session.prepare();
  if (action.kind !== "dispatch") throw new Error(`refused: ${action.error.code}`);
  return session.dispatch();
}

describe("the model kind's count_tokens operation", () => {
  it("counts on the first tier's Anthropic backend, reserving nothing in a budgeted tenant's ledger", async () => {
    const snapshot = await protocolSnapshot({ "sim-small": "anthropic-messages", "sim-large": "openai-chat" });
    const h = engineHarness({ snapshot: async () => snapshot, respond: (s) => anthropicProvider(s.url) });
    const reply = await run(h);
    expect(reply.kind).toBe("buffered");
    if (reply.kind !== "buffered") return;
    expect(reply.body).toEqual({ input_tokens: 42 });
    expect(reply.meta).toMatchObject({ tokenCount: "reported", budgetRemaining: undefined, injectedMaxOutputTokens: undefined });
    expect(reply.meta.attempts).toHaveLength(1);
    await h.settled();
    // The demo tenant keeps budgets: a chat would have reserved; the count never talks to the ledger.
    expect(h.ledgers.calls).toEqual([]);
    expect(h.requests[0]!.tokenCount).toEqual({ source: "reported", inputTokens: 42 });
    expect(h.requests[0]).toMatchObject({ outcome: "success", entrypoint: "sluice-chat", protocol: "anthropic-messages", stream: false });
    expect(h.attempts[0]).toMatchObject({ outcome: "success", unbilled: true });
    expect(h.admission.stats().inFlight.global).toBe(0);
  });

  it("spends no unit of the caller's attempt budget: a chat of the same call still has its only one", async () => {
    const snapshot = await protocolSnapshot({ "sim-small": "anthropic-messages", "sim-large": "openai-chat" });
    const h = engineHarness({ snapshot: async () => snapshot, respond: (s) => anthropicProvider(s.url) });
    const call = { callId: "call-count", budget: 1, deadlineAt: h.clock.now() + 60_000 };
    expect((await run(h, { call })).kind).toBe("buffered");
    const chat = h.engine.begin(h.ingress({ model: "sluice-chat", max_tokens: 10, messages: [{ role: "user", content: "hi" }] }, { protocol: "anthropic-messages", call }));
    expect((await chat.prepare()).kind).toBe("dispatch");
    const reply = await chat.dispatch();
    expect(reply.kind).toBe("buffered");
    await h.settled();
    // The chat reserved (once); the count did not.
    expect(h.ledgers.calls.filter((c) => c.endsWith(".reserve")).length).toBeGreaterThan(0);
    expect(h.attempts.filter((a) => a.unbilled)).toHaveLength(1);
  });

  it("estimates, and says why, when the first tier has no counting backend or the count fails", async () => {
    const openai = await protocolSnapshot({ "sim-small": "openai-chat", "sim-large": "anthropic-messages" });
    const none = engineHarness({ snapshot: async () => openai });
    const estimated = await run(none);
    expect(estimated.kind === "buffered" && estimated.body).toEqual({ input_tokens: ESTIMATE });
    expect(estimated.meta.tokenCount).toBe("estimated");
    expect(none.seen).toHaveLength(0);
    expect(none.requests[0]!.tokenCount).toEqual({ source: "estimated", inputTokens: ESTIMATE, fallback: { reason: "no_counter", errorCode: "no_backend_available" } });

    const anthropic = await protocolSnapshot({ "sim-small": "anthropic-messages", "sim-large": "openai-chat" });
    const failing = engineHarness({ snapshot: async () => anthropic, respond: () => new Response("{}", { status: 500 }) });
    const fallback = await run(failing);
    expect(fallback.kind === "buffered" && fallback.body).toEqual({ input_tokens: ESTIMATE });
    expect(fallback.meta.tokenCount).toBe("estimated");
    expect(failing.requests[0]!.tokenCount).toMatchObject({ source: "estimated", fallback: { reason: "failed", errorCode: "upstream_error" } });
    expect(failing.requests[0]!.outcome).toBe("success");
  });

  it("does not estimate for a client that left: the request ends as cancelled", async () => {
    const snapshot = await protocolSnapshot({ "sim-small": "anthropic-messages", "sim-large": "openai-chat" });
    let leave!: () => void;
    const h = engineHarness({
      snapshot: async () => snapshot,
      respond: () =>
        new Promise<Response>((_, reject) => {
          leave = () => {
            session.abort("client_disconnected");
            reject(new DOMException("aborted", "AbortError"));
          };
        }),
    });
    const session = count(h);
    expect((await session.prepare()).kind).toBe("dispatch");
    const pending = session.dispatch();
    await expect.poll(() => h.seen.length).toBe(1);
    leave();
    const reply = await pending;
    expect(reply.kind === "error" && reply.error.code).toBe("client_closed");
    expect(h.requests[0]!.tokenCount).toBeUndefined();
    expect(h.requests[0]!.outcome).toBe("cancelled");
  });

  it("is refused like a message: an unknown model, a key without the grant, an embeddings entrypoint, a bad body", async () => {
    const h = engineHarness();
    const refusal = async (body: unknown, over: Partial<Ingress> = {}) => {
      const action = await h.engine.begin(h.ingress(body, { protocol: "anthropic-messages", operation: "count_tokens", ...over })).prepare();
      if (action.kind !== "immediate") throw new Error("expected a refusal");
      return action.error.code;
    };
    expect(await refusal({ ...COUNT_BODY, model: "nope" })).toBe("model_not_found");
    expect(await refusal({ ...COUNT_BODY, model: "sluice-large" }, { apiKey: "sk-sluice-limited" })).toBe("model_not_allowed");
    expect(await refusal({ ...COUNT_BODY, model: "sluice-embed" })).toBe("invalid_request");
    expect(await refusal({ model: "sluice-chat", messages: [] })).toBe("invalid_request");
    expect(await refusal(COUNT_BODY, { apiKey: undefined })).toBe("missing_api_key");
    expect(await refusal(COUNT_BODY, { protocol: "openai-chat" })).toBe("not_found");
  });
});
