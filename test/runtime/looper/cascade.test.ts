import { describe, expect, it } from "vitest";
import { chat, engineHarness } from "../support/engine-harness.ts";
import { snapshot } from "../support/executor-harness.ts";
import { bundled, textsWith } from "../support/fixtures.ts";
import type { Reply } from "../../../src/kinds/model/model-api.ts";
import { loadConfig } from "../../../src/config/load-config.ts";
import { parse } from "yaml";

const CAPS = ["chat", "streaming", "stream-usage", "tools", "embeddings", "moderations", "logprobs"];

/** The bundled publication with sluice-chat answered by a cascade small → large. */
function cascadeTexts(bounds: Record<string, number> = {}, score = "avg_logprob", threshold = -0.5) {
  const pub = bundled("publication");
  for (const m of pub.models) if (m.id === "chat-small" || m.id === "chat-large") m.revisions[0].requires = [...m.revisions[0].requires, "logprobs"];
  const ep = pub.entrypoints.find((e: { name: string }) => e.name === "sluice-chat");
  delete ep.routes;
  ep.decisions = [
    {
      name: "cascade",
      when: { signal: "prompt-tokens", above: 0 },
      models: [["chat-small"], ["chat-large"]],
      algorithm: { kind: "cascade", score, threshold, bounds: { maxCalls: 3, maxParallel: 1, maxDepth: 1, maxTokens: 100_000, maxCostMicros: 1_000_000, maxTimeMs: 60_000, ...bounds } },
    },
  ];
  return textsWith({ publication: pub });
}

/** A Chat answer whose every token has this log-probability (and one alternative 1.0 below it). */
const answer = (text: string, logprob: number) =>
  Response.json({
    id: "x",
    choices: [
      {
        index: 0,
        message: { role: "assistant", content: text },
        logprobs: { content: text.split(" ").map((token) => ({ token, logprob, top_logprobs: [{ token, logprob }, { token: "other", logprob: logprob - 1 }] })) },
        finish_reason: "stop",
      },
    ],
    usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 },
  });

const byModel = (small: number, large: number) => (s: { body: { model: string } }) => (s.body.model.startsWith("sim-small") ? answer("small answer", small) : answer("large answer", large));

async function run(h: ReturnType<typeof engineHarness>, body: Record<string, unknown>): Promise<{ reply: Reply; requestId: string }> {
  const session = h.engine.begin(h.ingress(body));
  const action = await session.prepare();
  expect(action.kind).toBe("dispatch");
  return { reply: await session.dispatch(), requestId: session.requestId };
}

describe("Looper cascade", () => {
  it("escalates on low confidence: the cheap step scores below the threshold, the next tier answers", async () => {
    const snap = await snapshot([{ name: "a", port: 9001, caps: CAPS }]);
    const h = engineHarness({ texts: cascadeTexts(), snapshot: async () => snap, respond: byModel(-2, -0.1) });
    const { reply, requestId } = await run(h, chat("what is the capital of France?", { max_tokens: 50 }));
    expect(reply.kind).toBe("buffered");
    if (reply.kind !== "buffered") return;
    expect((reply.body as { choices: { message: { content: string } }[] }).choices[0]!.message.content).toBe("large answer");
    expect(reply.meta.looper).toBe("cascade; steps=2; accepted=chat-large");
    // Each step asked for log-probabilities, upstream, and was a sub-call of its own.
    expect(h.seen.map((s) => [s.body.model, s.body.logprobs, s.body.top_logprobs])).toEqual([
      ["sim-small-upstream", true, 0],
      ["sim-large-upstream", true, 0],
    ]);
    await h.settled();
    const parent = h.requests.find((r) => r.requestId === requestId)!;
    expect(parent.looper).toMatchObject({ algorithm: "cascade", steps: 2, accepted: "chat-large" });
    expect(parent.looper!.calls.map((c) => [c.model, c.accepted, c.score])).toEqual([
      ["chat-small", false, -2],
      ["chat-large", true, undefined],
    ]);
    const subs = h.requests.filter((r) => r.parentRequestId === requestId);
    expect(subs.map((r) => [r.requestId, r.outcome])).toEqual(parent.looper!.calls.map((c) => [c.requestId, "success"]));
    // The parent sent nothing itself and held no admission lease; every step's reservation settled once.
    expect(parent.attempts).toEqual([]);
    expect(h.admission.stats().inFlight.global).toBe(0);
    expect(h.attempts.map((a) => h.endings.get(a.id))).toEqual([["settle"], ["settle"]]);
  });

  it("stops at the threshold: a confident cheap answer is accepted and nothing dearer is asked", async () => {
    const snap = await snapshot([{ name: "a", port: 9001, caps: CAPS }]);
    const h = engineHarness({ texts: cascadeTexts(), snapshot: async () => snap, respond: byModel(-0.2, -0.1) });
    const { reply } = await run(h, chat("hello", { max_tokens: 50 }));
    expect(reply.meta.looper).toBe("cascade; steps=1; accepted=chat-small");
    expect(h.seen.map((s) => s.body.model)).toEqual(["sim-small-upstream"]);
  });

  it("scores by margin: the gap to each token's best alternative", async () => {
    const snap = await snapshot([{ name: "a", port: 9001, caps: CAPS }]);
    // Every token's alternative is 1.0 below it: a margin of 1 passes 0.5, fails 1.5.
    const pass = engineHarness({ texts: cascadeTexts({}, "margin", 0.5), snapshot: async () => snap, respond: byModel(-3, -3) });
    expect((await run(pass, chat("x", { max_tokens: 50 }))).reply.meta.looper).toBe("cascade; steps=1; accepted=chat-small");
    expect(pass.seen[0]!.body.top_logprobs).toBe(2);
    const fail = engineHarness({ texts: cascadeTexts({}, "margin", 1.5), snapshot: async () => snap, respond: byModel(-3, -3) });
    expect((await run(fail, chat("x", { max_tokens: 50 }))).reply.meta.looper).toBe("cascade; steps=2; accepted=chat-large");
  });

  it("honours maxCalls: the step past it is refused, typed and naming the bound, and never sent", async () => {
    const snap = await snapshot([{ name: "a", port: 9001, caps: CAPS }]);
    const h = engineHarness({ texts: cascadeTexts({ maxCalls: 1 }), snapshot: async () => snap, respond: byModel(-2, -0.1) });
    const { reply, requestId } = await run(h, chat("x", { max_tokens: 50 }));
    expect(reply.kind).toBe("error");
    if (reply.kind !== "error") return;
    expect(reply.error.code).toBe("looper_bound_exceeded");
    expect(reply.error.details).toEqual([{ bound: "maxCalls" }]);
    expect(reply.meta.looper).toBe("cascade; steps=1; bound=maxCalls");
    expect(h.seen).toHaveLength(1);
    await h.settled();
    expect(h.requests.find((r) => r.requestId === requestId)!.errorCode).toBe("looper_bound_exceeded");
  });

  it("holds the token bound before a step is sent: a step whose worst case does not fit is refused", async () => {
    const snap = await snapshot([{ name: "a", port: 9001, caps: CAPS }]);
    // The first step's input bound alone is more than 10 tokens.
    const h = engineHarness({ texts: cascadeTexts({ maxTokens: 10 }), snapshot: async () => snap, respond: byModel(-2, -0.1) });
    const { reply } = await run(h, chat("a prompt long enough to need more than ten tokens of input", { max_tokens: 50 }));
    expect(reply.kind === "error" && reply.error.details).toEqual([{ bound: "maxTokens" }]);
    expect(h.seen).toHaveLength(0);
  });

  it("stops a step the time bound overtakes, and releases what it took", async () => {
    const snap = await snapshot([{ name: "a", port: 9001, caps: CAPS }]);
    let started!: () => void;
    const inFlight = new Promise<void>((r) => (started = r));
    const h = engineHarness({
      texts: cascadeTexts({ maxTimeMs: 5_000 }),
      snapshot: async () => snap,
      executor: {
        fetch: (_input, init) =>
          new Promise<Response>((_, reject) => {
            started();
            (init?.signal as AbortSignal).addEventListener("abort", () => reject(new DOMException("aborted", "AbortError")));
          }),
      },
    });
    const session = h.engine.begin(h.ingress(chat("x", { max_tokens: 50 })));
    await session.prepare();
    const pending = session.dispatch();
    await inFlight;
    h.timers.advance(5_001);
    const reply = await pending;
    expect(reply.kind === "error" && [reply.error.code, reply.error.details]).toEqual(["looper_bound_exceeded", [{ bound: "maxTimeMs" }]]);
    await h.settled();
    expect(h.admission.stats().inFlight.global).toBe(0);
    expect(h.attempts.map((a) => a.outcome)).toEqual(["client_cancelled"]);
  });

  it("aborts the running step when the client disconnects mid-cascade, and releases everything once", async () => {
    const snap = await snapshot([{ name: "a", port: 9001, caps: CAPS }]);
    let n = 0;
    let second!: () => void;
    const secondStarted = new Promise<void>((r) => (second = r));
    const h = engineHarness({
      texts: cascadeTexts(),
      snapshot: async () => snap,
      executor: {
        fetch: (_input, init) => {
          if (++n === 1) return Promise.resolve(answer("small answer", -2));
          return new Promise<Response>((_, reject) => {
            second();
            (init?.signal as AbortSignal).addEventListener("abort", () => reject(new DOMException("aborted", "AbortError")));
          });
        },
      },
    });
    const session = h.engine.begin(h.ingress(chat("x", { max_tokens: 50 })));
    await session.prepare();
    const pending = session.dispatch();
    await secondStarted;
    expect(h.admission.stats().inFlight.global).toBe(1);
    session.abort("client_disconnected");
    const reply = await pending;
    expect(reply.kind === "error" && reply.error.code).toBe("client_closed");
    await h.settled();
    expect(h.admission.stats().inFlight.global).toBe(0);
    expect(h.attempts.map((a) => a.outcome)).toEqual(["success", "client_cancelled"]);
    // Each reservation ended exactly once: the first settled, the cut one held for reconciliation.
    expect(h.attempts.map((a) => h.endings.get(a.id)?.length ?? 0)).toEqual([1, 1]);
    expect(h.ledgers.core("tenant:demo").attempt(h.attempts[1]!.id)!.state).toBe("pending_reconciliation");
    expect(h.requests.map((r) => r.outcome).sort()).toEqual(["cancelled", "cancelled", "success"]);
  });

  it("streams the accepted answer to a streaming client in its own protocol", async () => {
    const snap = await snapshot([{ name: "a", port: 9001, caps: CAPS }]);
    const h = engineHarness({ texts: cascadeTexts(), snapshot: async () => snap, respond: byModel(-2, -0.1) });
    const { reply } = await run(h, chat("x", { max_tokens: 50, stream: true }));
    expect(reply.kind).toBe("stream");
    if (reply.kind !== "stream") return;
    expect(reply.meta.looper).toBe("cascade; steps=2; accepted=chat-large");
    const text = await new Response(reply.body).text();
    const frames = text.split("\n\n").filter((f) => f.startsWith("data: ")).map((f) => f.slice(6));
    expect(frames.at(-1)).toBe("[DONE]");
    const content = frames.slice(0, -1).map((f) => JSON.parse(f).choices[0]?.delta?.content ?? "").join("");
    expect(content).toBe("large answer");
    // The steps themselves were buffered.
    expect(h.seen.map((s) => s.body.stream)).toEqual([undefined, undefined]);
  });

  it("cannot be started, shaped or skipped by the client: logprobs in the body are refused, and headers change nothing", async () => {
    const snap = await snapshot([{ name: "a", port: 9001, caps: CAPS }]);
    const h = engineHarness({ texts: cascadeTexts(), snapshot: async () => snap, respond: byModel(-2, -0.1) });
    const session = h.engine.begin(h.ingress(chat("x", { logprobs: true })));
    expect(await session.prepare()).toMatchObject({ kind: "immediate", error: { code: "invalid_request" } });
    const headed = h.engine.begin(h.ingress(chat("x", { max_tokens: 50 }), { trustedHeaders: new Map([["x-sluice-looper", "off"], ["x-sluice-tier", "premium"]]) }));
    expect((await headed.prepare()).kind).toBe("dispatch");
    expect((await headed.dispatch()).meta.looper).toBe("cascade; steps=2; accepted=chat-large");
  });

  it("scores by a verifier's JSON score: a low score escalates, and the verifier call is a bounded step too", async () => {
    const snap = await snapshot([{ name: "a", port: 9001, caps: CAPS }]);
    const pub = parse(cascadeTexts({}, "verify", 0.7).publication);
    const algorithm = pub.entrypoints.find((e: { name: string }) => e.name === "sluice-chat").decisions[0].algorithm;
    algorithm.verifier = { model: "chat-large", prompt: "Q: {{question}}\nA: {{answer}}\nReply with JSON {\"score\": 0..1}." };
    const h = engineHarness({
      texts: textsWith({ publication: pub }),
      snapshot: async () => snap,
      respond: (s) => {
        const last = JSON.stringify(s.body.messages.at(-1).content);
        if (last.includes("Reply with JSON")) return answer('{"score": 0.2}', -1);
        return s.body.model.startsWith("sim-small") ? answer("small answer", -1) : answer("large answer", -1);
      },
    });
    const { reply, requestId } = await run(h, chat("hard question", { max_tokens: 50 }));
    expect(reply.meta.looper).toBe("cascade; steps=3; accepted=chat-large");
    // A verifier needs no log-probabilities: none were asked for.
    expect(h.seen.map((s) => s.body.logprobs)).toEqual([undefined, undefined, undefined]);
    expect(JSON.stringify(h.seen[1]!.body.messages)).toContain("small answer");
    await h.settled();
    expect(h.requests.find((r) => r.requestId === requestId)!.looper!.calls.map((c) => [c.role, c.model, c.score, c.accepted])).toEqual([
      ["candidate", "chat-small", 0.2, false],
      ["verifier", "chat-large", 0.2, false],
      ["candidate", "chat-large", undefined, true],
    ]);
  });

  it("is refused at load when it cannot run: log-probabilities from a model that does not require them, verify without a verifier, no models", () => {
    const pub = parse(cascadeTexts().publication);
    pub.models.find((m: { id: string }) => m.id === "chat-large").revisions[0].requires = ["chat", "streaming", "stream-usage", "tools"];
    expect(() => loadConfig(textsWith({ publication: pub }))).toThrow(/model "chat-large" does not require "logprobs"/);
    const verify = parse(cascadeTexts({}, "verify", 0.5).publication);
    expect(() => loadConfig(textsWith({ publication: verify }))).toThrow(/score: verify needs a verifier/);
    const bare = parse(cascadeTexts().publication);
    delete bare.entrypoints.find((e: { name: string }) => e.name === "sluice-chat").decisions[0].models;
    expect(() => loadConfig(textsWith({ publication: bare }))).toThrow(/give the decision models:/);
  });

  it("runs its per-model-call plugins on every step, and the decision's own plugins once, on the client's request", async () => {
    const pub = parse(cascadeTexts().publication);
    pub.plugins.push(
      { name: "outer-voice", kind: "system_prompt", mode: "prepend", text: "OUTER VOICE" },
      { name: "step-voice", kind: "system_prompt", mode: "append", text: "STEP VOICE" },
      { name: "step-header", kind: "headers", set: { "x-step": "yes" } },
      { name: "step-mask", kind: "output_pii", detectors: ["email"] },
    );
    const decision = pub.entrypoints.find((e: { name: string }) => e.name === "sluice-chat").decisions[0];
    decision.plugins = ["outer-voice"];
    decision.algorithm.perModelCall = ["step-voice", "step-header", "step-mask"];
    const snap = await snapshot([{ name: "a", port: 9001, caps: CAPS }]);
    // The cheap step's answer holds an address: its step's output_pii masks it before the algorithm sees it.
    const respond = (s: { body: { model: string } }) => (s.body.model.startsWith("sim-small") ? answer("write to ada@example.org", -2) : answer("large answer", -0.1));
    const h = engineHarness({ texts: textsWith({ publication: pub }), snapshot: async () => snap, respond });
    const { reply, requestId } = await run(h, chat("hello", { max_tokens: 50 }));
    expect(reply.meta.looper).toBe("cascade; steps=2; accepted=chat-large");
    const systems = h.seen.map((s) => (s.body.messages as { role: string; content: string }[]).filter((m) => m.role === "system").map((m) => m.content));
    // Each step: the outer prompt once (inherited from the client's request), its own once.
    expect(systems).toEqual([
      ["OUTER VOICE", "STEP VOICE"],
      ["OUTER VOICE", "STEP VOICE"],
    ]);
    expect(h.seen.map((s) => s.headers.get("x-step"))).toEqual(["yes", "yes"]);
    await h.settled();
    const subs = h.requests.filter((r) => r.parentRequestId === requestId);
    expect(subs.map((r) => r.plugins.filter((p) => p.plugin === "step-mask").length > 0)).toEqual([true, false]);
    const parent = h.requests.find((r) => r.requestId === requestId)!;
    expect(parent.plugins.map((p) => p.plugin)).not.toContain("step-voice");
    expect(parent.plugins.map((p) => p.plugin)).toContain("outer-voice");
  });

  it("refuses at load per-model-call plugins that cannot run per step, or that do not exist", () => {
    const pub = parse(cascadeTexts().publication);
    pub.plugins.push({ name: "no", kind: "block" });
    const decision = pub.entrypoints.find((e: { name: string }) => e.name === "sluice-chat").decisions[0];
    decision.algorithm.perModelCall = ["no"];
    expect(() => loadConfig(textsWith({ publication: pub }))).toThrow(/algorithm\.perModelCall\[0\]: plugin "no" is a block plugin; an algorithm's sub-calls take only/);
    decision.algorithm.perModelCall = ["missing"];
    expect(() => loadConfig(textsWith({ publication: pub }))).toThrow(/unknown plugin "missing"/);
  });
});
