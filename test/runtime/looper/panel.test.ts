import { describe, expect, it } from "vitest";
import { chat, engineHarness } from "../support/engine-harness.ts";
import { snapshot } from "../support/executor-harness.ts";
import { bundled, textsWith } from "../support/fixtures.ts";
import { loadConfig } from "../../../src/config/load-config.ts";

// The fake backend serves every pool of the bundled publication, the cascade's (which need logprobs) included.
const CAPS = ["chat", "streaming", "stream-usage", "tools", "embeddings", "moderations", "logprobs"];
const PROMPT = "Question: {{question}}\n\n{{answers}}\n\nWrite the best answer.";

function panelPublication(algorithm: Record<string, unknown> = {}, models: string[][] = [["chat-small"], ["chat-large"], ["chat-small"]]) {
  const pub = bundled("publication");
  const ep = pub.entrypoints.find((e: { name: string }) => e.name === "sluice-chat");
  delete ep.routes;
  ep.decisions = [
    {
      name: "panel",
      when: { signal: "prompt-tokens", above: 0 },
      models,
      algorithm: { kind: "panel", quorum: 2, arbiter: { model: "chat-large", prompt: PROMPT }, bounds: { maxCalls: 4, maxParallel: 3, maxDepth: 1, maxTokens: 100_000, maxCostMicros: 1_000_000, maxTimeMs: 60_000 }, ...algorithm },
    },
  ];
  return pub;
}

const ok = (content: string) => Response.json({ id: "x", choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }], usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 } });
const refused = () => Response.json({ error: { message: "bad", type: "invalid_request_error" } }, { status: 400 });
const promptOf = (body: { messages: { content: unknown }[] }) => JSON.stringify(body.messages.at(-1)!.content);

describe("Looper panel", () => {
  it("goes on without a failing member once the quorum answered, records the failure, and the arbiter writes the answer", async () => {
    const snap = await snapshot([{ name: "a", port: 9001, caps: CAPS }]);
    let smalls = 0;
    const h = engineHarness({
      texts: textsWith({ publication: panelPublication() }),
      snapshot: async () => snap,
      respond: (s) => {
        if (promptOf(s.body).includes("Answer 1")) return ok("the arbiter's synthesis");
        if (s.body.model.startsWith("sim-small")) return ++smalls === 1 ? refused() : ok("second small");
        return ok("large member");
      },
    });
    const session = h.engine.begin(h.ingress(chat("what is best?", { max_tokens: 50 })));
    expect((await session.prepare()).kind).toBe("dispatch");
    const reply = await session.dispatch();
    expect(reply.kind).toBe("buffered");
    if (reply.kind !== "buffered") return;
    expect((reply.body as { choices: { message: { content: string } }[] }).choices[0]!.message.content).toBe("the arbiter's synthesis");
    expect(reply.meta.looper).toBe("panel; steps=4; accepted=chat-large");
    await h.settled();
    const parent = h.requests.find((r) => r.requestId === session.requestId)!;
    const calls = parent.looper!.calls;
    expect(calls.filter((c) => c.role === "member").map((c) => [c.errorCode, c.accepted]).sort()).toEqual([["invalid_request", false], [undefined, true], [undefined, true]].sort());
    expect(calls.at(-1)).toMatchObject({ role: "arbiter", model: "chat-large", accepted: true });
    // The arbiter saw both answers of the quorum and the question.
    const arbiterPrompt = promptOf(h.seen.at(-1)!.body);
    expect(arbiterPrompt).toContain("large member");
    expect(arbiterPrompt).toContain("second small");
    expect(arbiterPrompt).toContain("what is best?");
    expect(h.admission.stats().inFlight.global).toBe(0);
  });

  it("does not wait for a slow member: once the quorum is in it is stopped, recorded as cancelled, and released", async () => {
    const snap = await snapshot([{ name: "a", port: 9001, caps: CAPS }]);
    let smalls = 0;
    const h = engineHarness({
      texts: textsWith({ publication: panelPublication() }),
      snapshot: async () => snap,
      executor: {
        fetch: async (_input, init) => {
          const body = JSON.parse(String(init!.body));
          if (promptOf(body).includes("Answer 1")) return ok("synthesis");
          if (body.model.startsWith("sim-small") && ++smalls === 1) {
            // The slow member: answers only when stopped.
            return new Promise<Response>((_, reject) => (init!.signal as AbortSignal).addEventListener("abort", () => reject(new DOMException("aborted", "AbortError"))));
          }
          return ok("fast member");
        },
      },
    });
    const session = h.engine.begin(h.ingress(chat("q", { max_tokens: 50 })));
    await session.prepare();
    const reply = await session.dispatch();
    expect(reply.kind).toBe("buffered");
    expect(reply.meta.looper).toBe("panel; steps=4; accepted=chat-large");
    await h.settled();
    const calls = h.requests.find((r) => r.requestId === session.requestId)!.looper!.calls;
    expect(calls.filter((c) => c.errorCode === "client_closed")).toHaveLength(1);
    expect(h.attempts.map((a) => a.outcome).sort()).toEqual(["client_cancelled", "success", "success", "success"]);
    expect(h.admission.stats().inFlight.global).toBe(0);
  });

  it("fails with the members' error when too few are left to reach the quorum, and never asks the arbiter", async () => {
    const snap = await snapshot([{ name: "a", port: 9001, caps: CAPS }]);
    const h = engineHarness({ texts: textsWith({ publication: panelPublication() }), snapshot: async () => snap, respond: (s) => (s.body.model.startsWith("sim-small") ? refused() : ok("large")) });
    const session = h.engine.begin(h.ingress(chat("q", { max_tokens: 50 })));
    await session.prepare();
    const reply = await session.dispatch();
    expect(reply.kind === "error" && reply.error.code).toBe("invalid_request");
    expect(h.seen).toHaveLength(3);
  });

  it("keeps to maxParallel: never more members in flight than it allows", async () => {
    const snap = await snapshot([{ name: "a", port: 9001, caps: CAPS }]);
    let peak = 0;
    const h = engineHarness({
      texts: textsWith({ publication: panelPublication({ bounds: { maxCalls: 4, maxParallel: 1, maxDepth: 1, maxTokens: 100_000, maxCostMicros: 1_000_000, maxTimeMs: 60_000 } }) }),
      snapshot: async () => snap,
      respond: () => {
        peak = Math.max(peak, h.admission.stats().inFlight.global);
        return ok("a");
      },
    });
    const session = h.engine.begin(h.ingress(chat("q", { max_tokens: 50 })));
    await session.prepare();
    expect((await session.dispatch()).meta.looper).toBe("panel; steps=3; accepted=chat-large");
    expect(peak).toBe(1);
  });

  it("is refused at load when it cannot run: an unreachable quorum, no room for the arbiter, a prompt without {{answers}}", () => {
    const load = (pub: unknown) => () => loadConfig(textsWith({ publication: pub }));
    expect(load(panelPublication({ quorum: 4 }))).toThrow(/quorum of 4 from 3 members/);
    expect(load(panelPublication({ bounds: { maxCalls: 2, maxParallel: 3, maxDepth: 1, maxTokens: 1, maxCostMicros: 1, maxTimeMs: 1 } }))).toThrow(/maxCalls must be at least 3/);
    expect(load(panelPublication({ arbiter: { model: "chat-large", prompt: "just answer" } }))).toThrow(/must hold \{\{answers\}\}/);
  });
});
