import { describe, expect, it } from "vitest";
import type { GatewayError } from "../../../src/errors/gateway-error.ts";
import type { Reply } from "../../../src/kinds/model/model-api.ts";
import { chat, engineHarness, LIMITED_KEY } from "../support/engine-harness.ts";
import { snapshot } from "../support/executor-harness.ts";

/** A moderation backend's answer: one verdict per violence score, with usage when given. */
const verdicts = (scores: readonly number[], promptTokens?: number) =>
  Response.json({
    id: "modr-provider",
    model: "provider-moderation",
    results: scores.map((v) => ({ flagged: v >= 0.5, categories: { violence: v >= 0.5 }, category_scores: { violence: v } })),
    ...(promptTokens === undefined ? {} : { usage: { prompt_tokens: promptTokens, total_tokens: promptTokens } }),
  });

const moderation = (input: unknown, model = "sluice-moderation") => ({ model, input });
const bytes = (...texts: string[]) => texts.reduce((n, t) => n + new TextEncoder().encode(t).byteLength, 0);

/** The bundled moderate-small price: 0.01 per million input tokens, in micro-units rounded up. */
const micros = (tokens: number) => Math.ceil(tokens * 0.01);

type Harness = ReturnType<typeof engineHarness>;
type IngressOver = Parameters<Harness["ingress"]>[1];

/** A moderation request that gets as far as dispatch, and its reply. */
async function run(h: Harness, body: unknown, over: IngressOver = {}): Promise<Reply> {
  const s = h.engine.begin(h.ingress(body, { operation: "moderations", ...over }));
  expect((await s.prepare()).kind).toBe("dispatch");
  return await s.dispatch();
}

/** A request refused while it is prepared (nothing reserved, nothing sent), and why. */
async function refusal(h: Harness, body: unknown, over: IngressOver = {}): Promise<GatewayError> {
  const action = await h.engine.begin(h.ingress(body, { operation: "moderations", ...over })).prepare();
  if (action.kind !== "immediate") throw new Error("expected a refusal");
  return action.error;
}

describe("moderations through the engine", () => {
  it("answers in OpenAI's shape under the public name, and settles the attempt at the usage reported", async () => {
    const h = engineHarness({ snapshot: () => snapshot([{ name: "a", port: 9001 }]), respond: () => verdicts([0.02, 0.91], 9) });
    const inputs = ["a calm sentence", "I will kill the process"];
    const reply = await run(h, moderation(inputs));
    if (reply.kind !== "buffered") throw new Error(`expected an answer, got ${reply.kind}`);
    const body = reply.body as { id: string; model: string; results: { flagged: boolean; categories: Record<string, boolean>; category_scores: Record<string, number> }[] };
    expect(body.id).toMatch(/^modr-[0-9a-f]+$/);
    expect(body.model).toBe("sluice-moderation");
    expect(body.results.map((r) => [r.flagged, r.categories.violence, r.category_scores.violence])).toEqual([
      [false, false, 0.02],
      [true, true, 0.91],
    ]);
    // One attempt at the backend's moderations path, for the provider's own model id.
    expect(h.seen.map((s) => [new URL(s.url).pathname, s.body])).toEqual([["/v1/moderations", { model: "sim-moderate-upstream", input: inputs }]]);
    expect(reply.meta.attempts).toEqual([h.attempts[0]!.id]);
    await h.settled();
    const record = h.ledgers.core("tenant:demo").attempt(h.attempts[0]!.id)!;
    // Reserved strictly: a token per UTF-8 byte of the inputs, no output; settled at the 9 reported.
    expect(record.amount.tokens).toBe(bytes(...inputs));
    expect(record.state).toBe("settled");
    expect(record.settlement!.actual).toEqual({ tokens: 9, micros: micros(9) });
    expect(h.requests.map((r) => [r.entrypoint, r.outcome])).toEqual([["sluice-moderation", "success"]]);
  });

  it("holds an attempt whose backend reports no usage (OpenAI's never does) for reconciliation, with the estimate beside it", async () => {
    const h = engineHarness({ snapshot: () => snapshot([{ name: "a", port: 9001 }]), respond: () => verdicts([0.1]) });
    const input = "is this fine?";
    const reply = await run(h, moderation(input));
    expect(reply.kind).toBe("buffered");
    expect(h.seen[0]!.body).toEqual({ model: "sim-moderate-upstream", input });
    await h.settled();
    const record = h.ledgers.core("tenant:demo").attempt(h.attempts[0]!.id)!;
    expect(record.state).toBe("pending_reconciliation");
    expect(record.settlement!.actual).toBe("unknown");
    expect(record.amount.tokens).toBe(bytes(input));
    expect(record.settlement!.estimate).toEqual({ tokens: Math.ceil(bytes(input) / 4), micros: micros(Math.ceil(bytes(input) / 4)) });
  });

  it("retries a known-zero refusal through the same attempts loop, the refused attempt released", async () => {
    const h = engineHarness({
      snapshot: () => snapshot([{ name: "a", port: 9001 }]),
      respond: (_s, n) => (n === 1 ? new Response(JSON.stringify({ error: { message: "slow down", type: "rate_limit" } }), { status: 429 }) : verdicts([0], 2)),
    });
    const reply = await run(h, moderation("x"));
    expect(reply.kind).toBe("buffered");
    expect(reply.meta.attempts).toHaveLength(2);
    await h.settled();
    const core = h.ledgers.core("tenant:demo");
    expect(h.attempts.map((a) => core.attempt(a.id)!.state)).toEqual(["released", "settled"]);
  });

  it("fails an unreadable backend answer as 502 without retrying: the provider may have done the work", async () => {
    const h = engineHarness({ snapshot: () => snapshot([{ name: "a", port: 9001 }]), respond: () => Response.json({ results: [{ flagged: "no" }] }) });
    const reply = await run(h, moderation("x"));
    if (reply.kind !== "error") throw new Error(`expected an error, got ${reply.kind}`);
    expect([reply.error.code, reply.error.status]).toEqual(["upstream_protocol_error", 502]);
    expect(h.seen).toHaveLength(1);
    await h.settled();
    expect(h.ledgers.core("tenant:demo").attempt(h.attempts[0]!.id)!.state).toBe("pending_reconciliation");
  });

  it("refuses the wrong operation either way round, before anything is reserved or sent", async () => {
    const h = engineHarness({ snapshot: () => snapshot([{ name: "a", port: 9001 }]) });
    const chatHere = await refusal(h, moderation("x", "sluice-chat"));
    expect([chatHere.code, chatHere.status, chatHere.param, chatHere.message]).toEqual(["invalid_request", 400, "model", "The model 'sluice-chat' does not serve moderations."]);
    expect((await refusal(h, chat("hi", { model: "sluice-moderation" }), { operation: "chat" })).message).toBe("The model 'sluice-moderation' serves moderations only: call POST /v1/moderations.");
    expect((await refusal(h, moderation("x", "sluice-embed"))).message).toBe("The model 'sluice-embed' serves embeddings only: call POST /v1/embeddings.");
    expect((await refusal(h, { model: "sluice-moderation", input: "x" }, { operation: "embeddings" })).message).toBe("The model 'sluice-moderation' serves moderations only: call POST /v1/moderations.");
    expect((await refusal(h, moderation("x"), { apiKey: LIMITED_KEY })).code).toBe("model_not_allowed");
    expect(h.seen).toHaveLength(0);
    expect(h.ledgers.calls.filter((c) => c.endsWith(".reserve"))).toEqual([]);
  });

  it("moderates on a request's behalf (models.moderate): no grant needed, charged to the caller, recorded under the parent", async () => {
    const h = engineHarness({ snapshot: () => snapshot([{ name: "a", port: 9001 }]), respond: () => verdicts([0.97, 0], 5) });
    // The limited key may call sluice-chat only: the moderation is the gateway's own call.
    const parent = h.engine.begin(h.ingress(chat("check these", { max_tokens: 20 }), { apiKey: LIMITED_KEY }));
    expect((await parent.prepare()).kind).toBe("dispatch");
    const r = await parent.models.moderate({ model: "sluice-moderation", inputs: ["they will murder us", "hello"] });
    if (!r.ok) throw r.error;
    expect(r.response.results.map((v) => [v.flagged, v.categoryScores.violence])).toEqual([
      [true, 0.97],
      [false, 0],
    ]);
    expect(r.response.inputTokens).toBe(5);
    expect(r.attempts).toHaveLength(1);
    expect(h.requests.filter((x) => x.parentRequestId === parent.requestId).map((x) => [x.requestId, x.key, x.entrypoint, x.outcome])).toEqual([[r.requestId, "limited", "sluice-moderation", "success"]]);
    await h.settled();
    const record = h.ledgers.core("tenant:demo").attempt(r.attempts[0]!)!;
    expect([record.state, record.scopes.at(-1), record.settlement!.actual]).toEqual(["settled", "key:limited", { tokens: 5, micros: micros(5) }]);
    // A model that is no moderations entrypoint is refused, not called.
    const wrong = await parent.models.moderate({ model: "sluice-chat", inputs: ["x"] });
    expect(!wrong.ok && wrong.error.code).toBe("invalid_request");
    expect(h.seen).toHaveLength(1);
    parent.close();
  });
});
