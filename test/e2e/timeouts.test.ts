import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { bundledConfig, DEMO_KEY, startStack, type Stack } from "./support/stack.ts";

let stack: Stack;
beforeAll(async () => {
  const gateway = bundledConfig("gateway");
  gateway.traffic = { ...gateway.traffic, firstByteTimeoutMs: 400, firstTokenTimeoutMs: 400, streamIdleTimeoutMs: 400 };
  stack = await startStack({ gateway });
});
afterAll(async () => {
  await stack?.stop();
});
beforeEach(async () => {
  await fetch(`${stack.sims[0]!.url}/__sim/reset`, { method: "POST" });
});

const ask = (directive: string, stream: boolean) =>
  fetch(`${stack.gateway.publicUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "sluice-chat", stream, messages: [{ role: "user", content: `hi [[sim ${directive}]]` }] }),
  });
const attempts = async () => ((await stack.simStats(stack.sims[0]!)) as { total: number }).total;

describe("each timeout on its own, none of them a whole-request cut", () => {
  it("a heartbeat-only stream ends with a timeout error instead of living forever", async () => {
    const started = Date.now();
    const res = await ask("fault=heartbeat-only heartbeat-ms=50 duration-ms=20000", true);
    const text = await res.text();
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(text).toContain(": keep-alive");
    expect(text).toMatch(/"code":"upstream_timeout"/);
    expect(text).not.toContain("[DONE]");
  });

  it("a slow first token ends the stream with a timeout error", async () => {
    const res = await ask("ttft-ms=3000", true);
    const text = await res.text();
    expect(text).toMatch(/"code":"upstream_timeout"/);
    expect(text).not.toContain("[DONE]");
  });

  it("a long stream that keeps producing outlives every timeout", async () => {
    // 20 tokens 150 ms apart: 3 s in all, far past the 400 ms limits, never idle for 400 ms.
    const res = await ask("tokens=20 token-interval-ms=150", true);
    const text = await res.text();
    expect(text).toContain("data: [DONE]");
    expect(text).not.toContain('"error"');
  });

  it("no response headers in time: 504, and the attempt is not retried (the provider may be working)", async () => {
    const res = await ask("latency-ms=3000", false);
    expect(res.status).toBe(504);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("upstream_timeout");
    expect(await attempts()).toBe(1);
  });
});
