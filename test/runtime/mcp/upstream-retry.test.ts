import { describe, expect, it } from "vitest";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import { McpUpstream } from "../../../src/mcp/upstream-client.ts";
import { answerEvidence, mayRetry, type UpstreamEvidence } from "../../../src/mcp/upstream-evidence.ts";

type Reply = Response | "network_error";

/**
 * An upstream over a fake fetch that counts what reaches the "server" by JSON-RPC method, and
 * answers each send from `replies(method, n)` (n counts that method's sends from 1).
 */
function upstream(era: "stateful" | "stateless", replies: (method: string, n: number) => Reply, extra: { preconnect?: () => Promise<boolean> } = {}) {
  const sends = new Map<string, number>();
  const order: string[] = [];
  const fetch = (async (_url: string, init: RequestInit) => {
    const body = JSON.parse(String(init.body)) as { method: string; id?: number };
    const n = (sends.get(body.method) ?? 0) + 1;
    sends.set(body.method, n);
    order.push(`fetch ${body.method}`);
    const r = replies(body.method, n);
    if (r === "network_error") throw new TypeError("fetch failed");
    return r;
  }) as typeof globalThis.fetch;
  const client = new McpUpstream({ url: "http://127.0.0.1:9/mcp", era, fetch, rateLimitPauseMs: 0, ...(extra.preconnect ? { preconnect: extra.preconnect } : {}) });
  const evidence: UpstreamEvidence[] = [];
  const call = (method: string, params: Record<string, unknown> = {}) =>
    client.request(method, params, {
      onSent: () => order.push(`sent ${method}`),
      onEvidence: (e) => evidence.push(e),
    });
  return { call, sends: (m: string) => sends.get(m) ?? 0, evidence, order };
}

const result = (r: unknown = { content: [] }, headers: Record<string, string> = {}) => Response.json({ jsonrpc: "2.0", id: 1, result: r }, { headers });
const rpcError = (code: number, status = 200) => Response.json({ jsonrpc: "2.0", id: 1, error: { code, message: "no" } }, { status });
const initialized = (method: string) => (method === "initialize" ? result({ protocolVersion: "2025-11-25", capabilities: {}, serverInfo: { name: "s", version: "1" } }, { "mcp-session-id": "sess-1" }) : method === "notifications/initialized" ? new Response(null, { status: 202 }) : undefined);

describe("upstream MCP requests: retries only on known-zero evidence", () => {
  it("never sends a tools/call twice after it may have gone out: a failed connection is unknown", async () => {
    const u = upstream("stateless", () => "network_error");
    await expect(u.call("tools/call", { name: "t" })).rejects.toMatchObject({ code: "upstream_unreachable" });
    expect(u.sends("tools/call")).toBe(1);
    expect(u.evidence).toEqual(["unknown"]);
  });

  it("does not retry a read on unknown evidence either (a 5xx, a cut connection)", async () => {
    const cut = upstream("stateless", () => "network_error");
    await expect(cut.call("tools/list")).rejects.toBeInstanceOf(GatewayError);
    expect(cut.sends("tools/list")).toBe(1);
    const failed = upstream("stateless", () => rpcError(-32603, 500));
    expect(await failed.call("resources/read", { uri: "x://y" })).toMatchObject({ ok: false });
    expect(failed.sends("resources/read")).toBe(1);
    expect(failed.evidence).toEqual(["unknown"]);
  });

  it("retries a tools/call once when the connect check proves it was never sent", async () => {
    let checks = 0;
    const u = upstream("stateless", () => result(), { preconnect: async () => ++checks > 1 });
    expect(await u.call("tools/call", { name: "t" })).toMatchObject({ ok: true });
    expect(checks).toBe(2);
    expect(u.sends("tools/call")).toBe(1);
    expect(u.evidence).toEqual(["answered"]);
  });

  it("gives up after one retry when nothing can be sent, with not_sent evidence", async () => {
    let checks = 0;
    const u = upstream("stateless", () => result(), {
      preconnect: async () => {
        checks++;
        return false;
      },
    });
    await expect(u.call("tools/call", { name: "t" })).rejects.toMatchObject({ code: "upstream_unreachable" });
    expect(checks).toBe(2);
    expect(u.sends("tools/call")).toBe(0);
    expect(u.evidence).toEqual(["not_sent"]);
  });

  it("passes a 429 on for a tools/call, and retries a read once after it", async () => {
    const limited = () => rpcError(-32000, 429);
    const call = upstream("stateless", limited);
    expect(await call.call("tools/call", { name: "t" })).toMatchObject({ ok: false });
    expect(call.sends("tools/call")).toBe(1);
    expect(call.evidence).toEqual(["rate_limited"]);
    for (const method of ["tools/list", "prompts/list", "prompts/get", "resources/list", "resources/templates/list", "resources/read"]) {
      const read = upstream("stateless", (_m, n) => (n === 1 ? limited() : result()));
      expect(await read.call(method), method).toMatchObject({ ok: true });
      expect(read.sends(method), method).toBe(2);
      expect(read.evidence).toEqual(["answered"]);
      const always = upstream("stateless", limited);
      expect(await always.call(method)).toMatchObject({ ok: false });
      expect(always.sends(method), `${method} retried at most once`).toBe(2);
    }
  });

  it("does not retry a protocol refusal, and reports it as proof the tool did not run", async () => {
    const u = upstream("stateless", () => rpcError(-32602));
    expect(await u.call("tools/call", { name: "nosuch" })).toMatchObject({ ok: false, error: { code: -32602 } });
    expect(u.sends("tools/call")).toBe(1);
    expect(u.evidence).toEqual(["refused"]);
  });

  it("counts a tool's isError result and a server error of its own as answered", async () => {
    const u = upstream("stateless", (_m, n) => (n === 1 ? result({ isError: true, content: [] }) : rpcError(-32001)));
    await u.call("tools/call", { name: "t" });
    await u.call("tools/call", { name: "t" });
    expect(u.evidence).toEqual(["answered", "answered"]);
    expect(u.sends("tools/call")).toBe(2);
  });

  it("tells the caller the call went out before it is handed to fetch", async () => {
    const u = upstream("stateless", () => result());
    await u.call("tools/call", { name: "t" });
    expect(u.order).toEqual(["sent tools/call", "fetch tools/call"]);
  });

  it("retries a stateful-era tools/call once when its session could not be opened (it was never sent)", async () => {
    const u = upstream("stateful", (method, n) => (method === "initialize" && n === 1 ? "network_error" : (initialized(method) ?? result())));
    expect(await u.call("tools/call", { name: "t" })).toMatchObject({ ok: true });
    expect(u.sends("initialize")).toBe(2);
    expect(u.sends("tools/call")).toBe(1);
    expect(u.evidence).toEqual(["answered"]);
  });

  it("re-opens a forgotten session once, and reports a second refusal as refused", async () => {
    const u = upstream("stateful", (method) => initialized(method) ?? new Response("no session", { status: 404 }));
    await expect(u.call("tools/call", { name: "t" })).rejects.toMatchObject({ code: "upstream_error" });
    expect(u.sends("tools/call")).toBe(2);
    expect(u.evidence).toEqual(["refused"]);
  });
});

describe("the retry rule and the evidence of answers", () => {
  it("retries once at most, only on known-zero evidence, and a tools/call only when not sent", () => {
    expect(mayRetry("tools/call", "not_sent", 1)).toBe(true);
    expect(mayRetry("tools/call", "not_sent", 2)).toBe(false);
    for (const e of ["rate_limited", "refused", "answered", "unknown"] as const) expect(mayRetry("tools/call", e, 1), e).toBe(false);
    expect(mayRetry("tools/list", "rate_limited", 1)).toBe(true);
    expect(mayRetry("resources/read", "unknown", 1)).toBe(false);
    expect(mayRetry("tools/list", "refused", 1)).toBe(false);
    expect(mayRetry("initialize", "not_sent", 1)).toBe(false);
  });

  it("reads the JSON-RPC protocol's own refusals as proof of not running", () => {
    for (const code of [-32700, -32600, -32601, -32602]) expect(answerEvidence(200, code)).toBe("refused");
    expect(answerEvidence(200, -32603)).toBe("answered");
    expect(answerEvidence(200, undefined)).toBe("answered");
    expect(answerEvidence(400, -32603)).toBe("refused");
    expect(answerEvidence(503, undefined)).toBe("unknown");
  });
});
