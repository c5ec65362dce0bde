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

/** sluice-chat in the default config: tiers [[chat-small], [chat-large]], up to 3 attempts. */
const ask = (directive: string, stream = false) =>
  fetch(`${stack.gateway.publicUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "sluice-chat", stream, messages: [{ role: "user", content: `hello [[sim ${directive}]]` }] }),
  });
const upstream = async () => {
  const reqs = await stack.simRequests(stack.sims[0]!, 20);
  return reqs.filter((r: any) => r.path === "/v1/chat/completions").map((r: any) => r.body.model as string);
};
const attemptIds = (res: Response) => (res.headers.get("x-sluice-attempts") ?? "").split(", ").filter(Boolean);

describe("retries only on known-zero evidence (the simulator counts every upstream attempt)", () => {
  it("a 429 refusal falls back to the next tier: two upstream attempts, one answer", async () => {
    const res = await ask("status=429 retry-after=0 times=1");
    expect(res.status).toBe(200);
    expect(await upstream()).toEqual(["sim-small", "sim-large"]);
    expect(attemptIds(res)).toHaveLength(2);
  });

  it("repeated 429s stop at the plan's attempt authority (3)", async () => {
    const res = await ask("status=429 retry-after=0");
    expect(res.status).toBe(429);
    expect(await upstream()).toHaveLength(3);
    expect(attemptIds(res)).toHaveLength(3);
  });

  it("a 503 after acceptance is unknown: exactly one attempt", async () => {
    const res = await ask("status=503 times=1");
    expect(res.status).toBe(503);
    expect(await upstream()).toEqual(["sim-small"]);
  });

  it("a connection reset is unknown (it may follow a written body): exactly one attempt", async () => {
    const res = await ask("fault=reset-before-headers times=1");
    expect(res.status).toBe(502);
    expect(await upstream()).toEqual(["sim-small"]);
  });

  it("a stream cut after headers is never retried", async () => {
    const res = await ask("fault=cut-mid-stream cut-after=2 times=1", true);
    expect(res.status).toBe(200);
    expect(await res.text()).not.toContain("[DONE]");
    expect(await upstream()).toEqual(["sim-small"]);
  });

  it("a retry-after beyond the deadline is not waited for", async () => {
    // The default deadline is 10 minutes; a provider asking for an hour gets no retry.
    const res = await ask("status=429 retry-after=3600 times=1");
    expect(res.status).toBe(429);
    expect(await upstream()).toEqual(["sim-small"]);
  });
});
