import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { DEMO_KEY, startStack, type Stack } from "./support/stack.ts";

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  await stack?.stop();
});
beforeEach(async () => {
  await fetch(`${stack.sims[0]!.url}/__sim/reset`, { method: "POST" });
});

const ask = (content: string, call?: { id: string; budget: number; deadlineAt?: number }) =>
  fetch(`${stack.gateway.publicUrl}/v1/chat/completions`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${DEMO_KEY}`,
      "content-type": "application/json",
      ...(call
        ? { "x-sluice-call-id": call.id, "x-sluice-attempt-budget": String(call.budget), "x-sluice-deadline": String(call.deadlineAt ?? Date.now() + 60_000) }
        : {}),
    },
    body: JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content }] }),
  });
const upstreamCount = async () => ((await stack.simStats(stack.sims[0]!)) as { total: number }).total;
const code = async (r: Response) => ((await r.json()) as { error: { code: string } }).error.code;

describe("cross-layer attempt budget", () => {
  it("caps a request's own retries at the caller's remaining budget", async () => {
    // sluice-chat allows 3 attempts; the caller has 2 left for this call.
    const res = await ask("hi [[sim status=429 retry-after=0]]", { id: `call-${Date.now()}-a`, budget: 2 });
    expect(res.status).toBe(429);
    expect(await code(res)).toBe("attempt_budget_exhausted");
    expect(await upstreamCount()).toBe(2);
    expect(res.headers.get("x-sluice-call-id")).toMatch(/^call-/);
  });

  it("is shared by concurrent requests of the same call", async () => {
    const id = `call-${Date.now()}-b`;
    const results = await Promise.all(Array.from({ length: 6 }, (_, i) => ask(`n${i}`, { id, budget: 3 })));
    const statuses = results.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(3);
    expect(statuses.filter((s) => s === 429)).toHaveLength(3);
    expect(await upstreamCount()).toBe(3);
  });

  it("never extends the caller's deadline", async () => {
    const res = await ask("slow [[sim latency-ms=2000]]", { id: `call-${Date.now()}-c`, budget: 5, deadlineAt: Date.now() + 400 });
    expect(res.status).toBe(504);
    expect(await code(res)).toBe("deadline_exceeded");
  });

  it("refuses malformed budget headers by name", async () => {
    const res = await fetch(`${stack.gateway.publicUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json", "x-sluice-call-id": "c1", "x-sluice-attempt-budget": "lots" },
      body: JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content: "x" }] }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/x-sluice-/);
  });
});
