import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bundledConfig, DEMO_KEY, expectResourcesReleased, startStack, type Stack } from "./support/stack.ts";

let stack: Stack;
beforeAll(async () => {
  const gateway = bundledConfig("gateway");
  // Two in flight per isolate, two may wait; the rest are refused.
  gateway.admission = { maxConcurrent: 2, maxQueue: 2, maxQueuePerTenant: 2 };
  stack = await startStack({ gateway });
});
afterAll(async () => {
  await stack?.stop();
});

const ask = (content: string, stream = false, signal?: AbortSignal) =>
  fetch(`${stack.gateway.publicUrl}/v1/chat/completions`, {
    method: "POST",
    signal,
    headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "sluice-large", stream, messages: [{ role: "user", content }] }),
  });

describe("admission: bounded concurrency and queue, leases always returned", () => {
  it("queues what fits, refuses the rest with 503 + retry-after, and serves everyone admitted", async () => {
    const slow = "slow [[sim latency-ms=600]]";
    const responses = await Promise.all(Array.from({ length: 6 }, () => ask(slow)));
    const statuses = responses.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(4);
    expect(statuses.filter((s) => s === 503)).toHaveLength(2);
    const refused = responses.find((r) => r.status === 503)!;
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    const body = (await refused.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("gateway_overloaded");
    expect(body.error.message).not.toMatch(/\d/); // no capacity figures leak
    await Promise.all(responses.filter((r) => r !== refused).map((r) => r.text()));
  });

  it("returns stream leases at the end of the stream and when the client leaves", async () => {
    const ctrl = new AbortController();
    const abandoned = await ask("long [[sim tokens=200 token-interval-ms=20]]", true, ctrl.signal);
    await abandoned.body!.getReader().read();
    ctrl.abort();
    const finished = await ask("short", true);
    expect(await finished.text()).toContain("[DONE]");
    // Both leases come back: the gateway's own counts say so (a queue could hide a leaked slot).
    await expectResourcesReleased(stack.gateway.adminUrl);
    const pair = await Promise.all([ask("a [[sim latency-ms=200]]"), ask("b [[sim latency-ms=200]]")]);
    expect(pair.map((r) => r.status)).toEqual([200, 200]);
  });

  it("returns leases of failed requests", async () => {
    const failures = await Promise.all([ask("x [[sim status=500]]"), ask("y [[sim status=500]]")]);
    expect(failures.map((r) => r.status)).toEqual([502, 502]);
    await expectResourcesReleased(stack.gateway.adminUrl);
    const pair = await Promise.all([ask("a [[sim latency-ms=100]]"), ask("b [[sim latency-ms=100]]")]);
    expect(pair.map((r) => r.status)).toEqual([200, 200]);
  });
});
