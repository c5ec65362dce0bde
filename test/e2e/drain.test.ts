import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEMO_KEY, startStack, type Stack } from "./support/stack.ts";

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  await stack?.stop();
});

const ask = (content: string, stream = true) =>
  fetch(`${stack.gateway.publicUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "sluice-large", stream, messages: [{ role: "user", content }] }),
  });
const drain = (budgetMs: number) => stack.admin("/admin/drain", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ budgetMs }) });

describe("drain", () => {
  it("stops admission, reports not-ready, and lets in-flight requests finish within the budget", async () => {
    const slow = await ask("slow [[sim tokens=25 token-interval-ms=40]]");
    const slowText = slow.text();
    const draining = drain(10_000);
    await new Promise((r) => setTimeout(r, 100));
    expect((await fetch(`${stack.gateway.publicUrl}/ready`)).status).toBe(503);
    const refused = await ask("new one", false);
    expect(refused.status).toBe(503);
    const refusal = ((await refused.json()) as { error: { code: string; message: string } }).error;
    expect(refusal.code).toBe("gateway_draining");
    // A manual drain can be resumed: the message says draining, never that the gateway is going away.
    expect(refusal.message).toMatch(/draining/);
    expect(refusal.message).not.toMatch(/shut|stopping|going away/i);
    expect(await slowText).toContain("data: [DONE]");
    const report = (await (await draining).json()) as Record<string, unknown>;
    expect(report).toMatchObject({ status: "drained", inFlightAtStart: 1, finished: 1, cancelled: 0 });

    expect(await (await stack.admin("/admin/resume", { method: "POST" })).json()).toEqual({ status: "serving" });
    expect((await fetch(`${stack.gateway.publicUrl}/ready`)).status).toBe(200);
  });

  it("cancels what is still running when the budget runs out, aborting the upstream call", async () => {
    await fetch(`${stack.sims[0]!.url}/__sim/reset`, { method: "POST" });
    const long = await ask("long [[sim tokens=400 token-interval-ms=20]]");
    const longText = long.text();
    const report = (await (await drain(300)).json()) as Record<string, unknown>;
    expect(report).toMatchObject({ inFlightAtStart: 1, finished: 0, cancelled: 1 });
    const text = await longText;
    expect(text).not.toContain("[DONE]");
    // The stream's last event says the gateway ended it, not the provider.
    expect(text).toMatch(/"code":"gateway_draining"/);
    expect(text).not.toContain("upstream_stream_cut");
    let aborted = 0;
    for (let i = 0; i < 30 && aborted === 0; i++) {
      aborted = ((await stack.simStats(stack.sims[0]!)) as { outcomes: { aborted: number } }).outcomes.aborted;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(aborted).toBe(1);
    await stack.admin("/admin/resume", { method: "POST" });
  });
});
