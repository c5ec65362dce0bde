import { env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { HealthMonitor } from "../../../durable-objects/health-monitor.ts";
import { systemClock } from "../../../src/deps/clock.ts";
import { mcpHealthId, mcpProbeTarget, probeMcpServer } from "../../../src/mcp/health-probe.ts";
import { resolveProbeTarget, type ProbeFetch, type ProbeTarget } from "../../../src/traffic/health.ts";

interface Sent {
  readonly method: string;
  readonly headers: Record<string, string>;
  readonly body: Record<string, unknown> | undefined;
}

/** A fake server: `answer` decides the reply to each request; everything sent is recorded. */
function fakeFetch(answer: (sent: Sent) => Response | Promise<Response>): { fetch: ProbeFetch; sent: Sent[] } {
  const sent: Sent[] = [];
  return {
    sent,
    fetch: async (_url, init) => {
      const s = { method: init.method ?? "GET", headers: init.headers as Record<string, string>, body: typeof init.body === "string" ? (JSON.parse(init.body) as Record<string, unknown>) : undefined };
      sent.push(s);
      return await answer(s);
    },
  };
}

const stateless = { url: "https://mcp.example.com/mcp", headers: {}, timeoutMs: 2000, mcp: { era: "stateless" } } as const;
const stateful = { ...stateless, mcp: { era: "stateful" } } as const;
const result = (r: unknown) => Response.json({ jsonrpc: "2.0", id: 1, result: r });

describe("MCP health probes", () => {
  it("asks a stateless server server/discover with the era's headers, and nothing else", async () => {
    const f = fakeFetch(() => result({ resultType: "complete", supportedVersions: ["2026-07-28"], capabilities: {} }));
    expect(await probeMcpServer(f.fetch, stateless, systemClock, { authorization: "Bearer t" })).toMatchObject({ ok: true, status: 200, reason: "ok" });
    expect(f.sent).toHaveLength(1);
    expect(f.sent[0]!).toMatchObject({ method: "POST", body: { method: "server/discover", params: { _meta: { "io.modelcontextprotocol/protocolVersion": "2026-07-28" } } } });
    expect(f.sent[0]!.headers).toMatchObject({ "mcp-method": "server/discover", "mcp-protocol-version": "2026-07-28", authorization: "Bearer t", accept: "application/json, text/event-stream" });
  });

  it("initializes a stateful server and ends the session at once; never a tool call", async () => {
    const f = fakeFetch((s) => (s.method === "DELETE" ? new Response(null, { status: 200 }) : new Response(`event: message\ndata: ${JSON.stringify({ jsonrpc: "2.0", id: 1, result: { protocolVersion: "2025-11-25", capabilities: {} } })}\n\n`, { headers: { "content-type": "text/event-stream", "mcp-session-id": "sess-1" } })));
    expect(await probeMcpServer(f.fetch, stateful, systemClock)).toMatchObject({ ok: true, reason: "ok" });
    expect(f.sent.map((s) => `${s.method} ${String(s.body?.method ?? "")}`)).toEqual(["POST initialize", "DELETE "]);
    expect(f.sent[1]!.headers).toMatchObject({ "mcp-session-id": "sess-1" });
    expect(f.sent.some((s) => s.body?.method === "tools/call" || s.body?.method === "tools/list")).toBe(false);
  });

  it("leaves an answer stream that stays open once the answer is in", async () => {
    const f = fakeFetch(
      () =>
        new Response(
          new ReadableStream({
            start(c) {
              c.enqueue(new TextEncoder().encode(`data: ${JSON.stringify({ jsonrpc: "2.0", id: 1, result: {} })}\n\n`));
            },
          }),
          { headers: { "content-type": "text/event-stream" } },
        ),
    );
    expect(await probeMcpServer(f.fetch, stateless, systemClock)).toMatchObject({ ok: true });
  });

  it("fails on an HTTP error, a JSON-RPC error, an answer that is not MCP, no connection, or no answer in time", async () => {
    const reason = async (answer: () => Response | Promise<Response>, target: typeof stateless | typeof stateful = stateless) => (await probeMcpServer(fakeFetch(answer).fetch, { ...target, timeoutMs: 100 }, systemClock)).reason;
    expect(await reason(() => new Response("down", { status: 503 }))).toBe("http_503");
    expect(await reason(() => new Response(null, { status: 307, headers: { location: "https://elsewhere.example/" } }))).toBe("http_307");
    expect(await reason(() => Response.json({ jsonrpc: "2.0", id: 1, error: { code: -32601, message: "Method not found" } }))).toBe("jsonrpc_error: -32601");
    expect(await reason(() => new Response("<html>ok</html>", { headers: { "content-type": "text/html" } }))).toBe("not_mcp");
    expect(await reason(() => Response.json({ status: "ok" }))).toBe("not_mcp");
    expect(await reason(() => Promise.reject(new TypeError("connection refused")))).toBe("network_error: connection refused");
    expect(await reason(() => new Promise<Response>(() => {}))).toBe("timeout");
  });

  it("builds a target only for a server with healthCheck, in its own monitor namespace", () => {
    expect(mcpProbeTarget({ url: "https://mcp.example.com/mcp", era: "stateless" })).toBeUndefined();
    const t = mcpProbeTarget({ url: "https://mcp.example.com/mcp", era: "stateful", credential: { secret: "TOKEN", scheme: "bearer" }, healthCheck: { intervalMs: 30_000, timeoutMs: 5000 } })!;
    expect(resolveProbeTarget(t)).toMatchObject({ method: "POST", mcp: { era: "stateful" }, credential: { authorizationSecret: "TOKEN", scheme: "bearer" } });
    expect(() => resolveProbeTarget({ ...t, method: "GET" })).toThrow(/method must be "POST" for an MCP probe/);
    const { mcp: _m, ...plain } = t;
    expect(() => resolveProbeTarget({ ...plain })).toThrow(/method must be "GET"/);
    expect(mcpHealthId("docs")).toBe("mcp:docs");
  });

  it("is what the HealthMonitor sends for an MCP target on its alarm", async () => {
    const name = mcpHealthId("probe-alarm");
    const stub = env.HEALTH_MONITOR.getByName(name);
    const target: ProbeTarget = { url: "https://mcp.example.com/mcp", method: "POST", mcp: { era: "stateless" }, headers: {}, timeoutMs: 1000, intervalMs: 86_400_000, jitterRatio: 0.1, unhealthyAfter: 1 };
    await stub.watch(target);
    const f = fakeFetch(() => new Response("down", { status: 502 }));
    await runInDurableObject(stub, async (instance: HealthMonitor) => {
      instance.probeFetch = f.fetch;
    });
    await runDurableObjectAlarm(stub);
    expect(await stub.state()).toMatchObject({ status: "unhealthy", lastReason: "http_502", watching: true });
    // The first probe is jittered into a day's first 10%, so the monitor's own alarm does not fire before the test's; every probe is discovery.
    const methods = f.sent.map((s) => s.body?.method);
    expect(methods.length).toBeGreaterThanOrEqual(1);
    expect(new Set(methods)).toEqual(new Set(["server/discover"]));
  });
});
