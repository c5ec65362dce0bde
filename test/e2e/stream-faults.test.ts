import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEMO_KEY, startStack, type Stack } from "./support/stack.ts";

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  await stack?.stop();
});

const ask = (directive: string, extra: Record<string, unknown> = {}) =>
  fetch(`${stack.gateway.publicUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content: `hello [[sim ${directive}]]` }], ...extra }),
  });

describe("upstream faults reach the client honestly", () => {
  it("a stream cut mid-answer ends with an error event and no [DONE]", async () => {
    const res = await ask("fault=cut-mid-stream cut-after=3", { stream: true });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toContain('"content"');
    expect(text).not.toContain("[DONE]");
    expect(text).toMatch(/data: \{"error":\{[^\n]*"code":"upstream_stream_cut"/);
  });

  it("the official client raises on a cut stream instead of returning a short answer", async () => {
    const stream = await stack.client.chat.completions.create({
      model: "sluice-chat",
      messages: [{ role: "user", content: "hello [[sim fault=cut-mid-stream cut-after=2]]" }],
      stream: true,
    });
    const err = await (async () => {
      for await (const _ of stream) {
        // drain
      }
    })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
  });

  it("usage omitted by the provider stays unknown, never zero", async () => {
    const res = await ask("fault=omit-usage");
    const body = (await res.json()) as Record<string, unknown>;
    expect(res.status).toBe(200);
    expect(body.usage).toBeUndefined();
  });

  it("provider 429 → 429 with retry-after; 503/529 → 503; 500 → 502", async () => {
    const r429 = await ask("status=429 retry-after=4");
    expect(r429.status).toBe(429);
    expect(r429.headers.get("retry-after")).toBe("4");
    expect(((await r429.json()) as any).error.code).toBe("upstream_rate_limited");
    for (const [s, want] of [[503, 503], [529, 503], [500, 502]] as const) {
      const r = await ask(`status=${s}`, { stream: true });
      expect(r.status).toBe(want);
      expect(r.headers.get("content-type")).toContain("application/json");
    }
  });

  it("a connection reset before headers → 502 upstream_unreachable, as a proper HTTP error", async () => {
    const r = await ask("fault=reset-before-headers", { stream: true });
    expect(r.status).toBe(502);
    expect(((await r.json()) as any).error.code).toBe("upstream_unreachable");
  });

  it("heartbeats pass through as SSE comments and do not count as content", async () => {
    const ctrl = new AbortController();
    const res = await ask("fault=heartbeat-only heartbeat-ms=50 duration-ms=400", { stream: true });
    const text = await res.text();
    ctrl.abort();
    expect(text).toContain(": keep-alive");
    expect(text).not.toContain("[DONE]");
    expect(text).not.toContain('"content":"');
  });

  it("a client that disconnects mid-stream aborts the upstream request", async () => {
    await fetch(`${stack.sims[0]!.url}/__sim/reset`, { method: "POST" });
    const ctrl = new AbortController();
    const res = await fetch(`${stack.gateway.publicUrl}/v1/chat/completions`, {
      method: "POST",
      signal: ctrl.signal,
      headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "sluice-chat", stream: true, messages: [{ role: "user", content: "long [[sim tokens=400 token-interval-ms=20]]" }] }),
    });
    const reader = res.body!.getReader();
    await reader.read();
    ctrl.abort();
    await reader.cancel().catch(() => {});
    let outcomes: Record<string, number> = {};
    for (let i = 0; i < 50; i++) {
      outcomes = ((await stack.simStats(stack.sims[0]!)) as any).outcomes;
      if (outcomes.aborted === 1) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(outcomes.aborted).toBe(1);
    expect(outcomes.completed ?? 0).toBe(0);
  });
});
