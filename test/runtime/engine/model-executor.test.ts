import { describe, expect, it } from "vitest";
import type { NeutralResponse } from "../../../src/protocol/neutral.ts";
import { chat, engineHarness } from "../support/engine-harness.ts";
import { snapshot } from "../support/executor-harness.ts";

const reply = (content: string) =>
  Response.json({ id: "x", choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }], usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 } });

const user = (text: string) => ({ role: "user" as const, content: [{ type: "text" as const, text }] });

describe("ModelExecutor: sub-calls inside a request", () => {
  it("runs a two-step sub-call on the parent's principal, snapshot, budget scope and headers, each with its own ids and admission", async () => {
    let pins = 0;
    const snaps = [await snapshot([{ name: "first", port: 9001 }], "round-robin", 1), await snapshot([{ name: "second", port: 9002 }], "round-robin", 2)];
    const leasesSeen: number[] = [];
    const h = engineHarness({
      // A newer snapshot activates after the first pin: sub-calls must not see it.
      snapshot: async () => snaps[Math.min(pins++, 1)]!,
      respond: (s, n) => {
        leasesSeen.push(h.admission.stats().inFlight.global);
        return reply(n === 1 ? "Paris" : `${s.body.messages.at(-1).content} is in France`);
      },
    });
    const parent = h.engine.begin(h.ingress(chat("plan a trip", { max_tokens: 50 }), { trustedHeaders: new Map([["x-sluice-end-user", "alice"]]) }));
    expect((await parent.prepare()).kind).toBe("dispatch");

    const step1 = await parent.models.call({ model: "sluice-chat", request: { messages: [user("Capital of France?")], maxOutputTokens: 20 } });
    if (!step1.ok) throw step1.error;
    const step2 = await parent.models.call({ model: "sluice-chat", request: { messages: [user((step1.response as NeutralResponse).text)], maxOutputTokens: 20 } });
    if (!step2.ok) throw step2.error;
    expect(step2.response.text).toBe("Paris is in France");

    // Own ids, recorded under the parent.
    expect(new Set([parent.requestId, step1.requestId, step2.requestId]).size).toBe(3);
    expect(step1.attempts).toHaveLength(1);
    expect(step2.attempts).toHaveLength(1);
    expect(step1.attempts[0]).not.toBe(step2.attempts[0]);
    const subRecords = h.requests.filter((r) => r.parentRequestId === parent.requestId);
    expect(subRecords.map((r) => [r.requestId, r.tenant, r.key, r.outcome])).toEqual([
      [step1.requestId, "demo", "demo", "success"],
      [step2.requestId, "demo", "demo", "success"],
    ]);
    // One snapshot pin for the whole request: both steps on revision 1, its backend only.
    expect(pins).toBe(1);
    expect(h.attempts.map((a) => a.snapshotRevision)).toEqual([1, 1]);
    expect(h.seen.map((s) => new URL(s.url).port)).toEqual(["9001", "9001"]);
    // Each step held an admission lease of its own while it ran, and gave it back.
    expect(leasesSeen).toEqual([1, 1]);
    expect(h.admission.stats().inFlight.global).toBe(0);
    // Charged to the parent's scopes, the trusted end user included.
    await h.settled();
    const charged = h.attempts.map((a) => h.ledgers.core("tenant:demo").attempt(a.id)!);
    expect(charged.map((c) => [c.state, c.scopes.at(-1), c.meta?.requestId])).toEqual([
      ["settled", "user:alice", step1.requestId],
      ["settled", "user:alice", step2.requestId],
    ]);
    parent.close();
    expect(h.requests.find((r) => r.requestId === parent.requestId)).toBeDefined();
  });

  it("inherits the parent's deadline: a sub-call after it passed is refused without sending", async () => {
    const snap = await snapshot([{ name: "a", port: 9001 }]);
    const h = engineHarness({ snapshot: async () => snap });
    const parent = h.engine.begin(h.ingress(chat("x"), { call: { callId: "c", budget: 5, deadlineAt: h.clock.now() + 1_000 } }));
    await parent.prepare();
    h.clock.advance(1_001);
    const r = await parent.models.call({ model: "sluice-chat", request: { messages: [user("late")] } });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.code).toBe("deadline_exceeded");
    expect(h.seen).toHaveLength(0);
  });

  it("is aborted with its parent: the upstream call stops and everything it took is released", async () => {
    const snap = await snapshot([{ name: "a", port: 9001 }]);
    let started!: () => void;
    const inFlight = new Promise<void>((r) => (started = r));
    const h = engineHarness({
      snapshot: async () => snap,
      executor: {
        fetch: (_input, init) =>
          new Promise<Response>((_, reject) => {
            started();
            (init?.signal as AbortSignal).addEventListener("abort", () => reject(new DOMException("aborted", "AbortError")));
          }),
      },
    });
    const parent = h.engine.begin(h.ingress(chat("x", { max_tokens: 50 })));
    await parent.prepare();
    const pending = parent.models.call({ model: "sluice-chat", request: { messages: [user("long")], maxOutputTokens: 10 } });
    await inFlight;
    expect(h.admission.stats().inFlight.global).toBe(1);
    parent.abort("client_disconnected");
    const r = await pending;
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.code).toBe("client_closed");
    await h.settled();
    expect(h.admission.stats().inFlight.global).toBe(0);
    expect(h.attempts.map((a) => [a.outcome, a.errorCode])).toEqual([["client_cancelled", "client_closed"]]);
    expect(h.ledgers.core("tenant:demo").attempt(h.attempts[0]!.id)!.state).toBe("pending_reconciliation");
    expect(h.requests.map((x) => x.outcome)).toEqual(["cancelled", "cancelled"]);
  });

  it("refuses a model the parent's key may not use", async () => {
    const h = engineHarness({ snapshot: async () => snapshot([{ name: "a", port: 9001 }]) });
    const parent = h.engine.begin(h.ingress(chat("x"), { apiKey: "sk-sluice-limited" }));
    await parent.prepare();
    const r = await parent.models.call({ model: "sluice-large", request: { messages: [user("x")] } });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.code).toBe("model_not_allowed");
  });
});
