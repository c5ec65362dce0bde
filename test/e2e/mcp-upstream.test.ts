import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { McpUpstream } from "../../src/mcp/upstream-client.ts";
import { startModernMcpTestServer, type ModernMcpTestServer } from "./support/mcp-modern-server.ts";
import { startMcpTestServer, type McpTestServer } from "./support/mcp-test-server.ts";

describe("the gateway's MCP client against a stateful-era server (official SDK 1.x)", () => {
  let server: McpTestServer;
  beforeAll(async () => {
    server = await startMcpTestServer();
  });
  afterAll(async () => {
    await server?.stop();
  });

  const upstream = () => new McpUpstream({ url: server.url, era: "stateful", fetch: (i, init) => fetch(i, init), headers: { authorization: "Bearer upstream-credential" } });

  it("opens a session itself, lists and calls tools, and sends only its own headers", async () => {
    const u = upstream();
    const list = await u.request("tools/list");
    expect(list.ok).toBe(true);
    expect(((list as { result: { tools: { name: string }[] } }).result.tools).map((t) => t.name).sort()).toEqual(["confirm", "consent", "count", "echo", "sample", "slow", "touch"]);
    const call = await u.request("tools/call", { name: "echo", arguments: { text: "hi" } });
    expect(call).toEqual({ ok: true, result: { content: [{ type: "text", text: "hi" }] } });
    expect(server.seen.slice(0, 3).map((s) => s.method)).toEqual(["initialize", "notifications/initialized", "tools/list"]);
    const last = server.seen.at(-1)!.headers;
    expect(last["mcp-session-id"]).toMatch(/^[0-9a-f-]{36}$/);
    expect(last["mcp-protocol-version"]).toBe("2025-11-25");
    expect(last.authorization).toBe("Bearer upstream-credential");
    expect(last.cookie).toBeUndefined();
  });

  it("passes on progress the server streams before its answer", async () => {
    const progress: unknown[] = [];
    const answer = await upstream().request("tools/call", { name: "count", arguments: { n: 3 }, _meta: { progressToken: "p1" } }, { onNotification: (n) => progress.push(n) });
    expect(answer).toEqual({ ok: true, result: { content: [{ type: "text", text: "counted to 3" }] } });
    expect(progress).toEqual([1, 2, 3].map((i) => ({ method: "notifications/progress", params: { progressToken: "p1", progress: i, total: 3 } })));
  });

  it("re-initializes once when the server forgot the session, instead of relaying the error", async () => {
    const u = upstream();
    expect((await u.request("tools/list")).ok).toBe(true);
    const before = server.seen.filter((s) => s.method === "initialize").length;
    server.forgetSessions();
    const again = await u.request("tools/call", { name: "echo", arguments: { text: "after restart" } });
    expect(again).toEqual({ ok: true, result: { content: [{ type: "text", text: "after restart" }] } });
    expect(server.seen.filter((s) => s.method === "initialize").length).toBe(before + 1);
  });

  it("returns the server's JSON-RPC error as it sent it", async () => {
    const answer = await upstream().request("tools/call", { name: "no-such-tool", arguments: {} });
    // SDK 1.x servers report an unknown tool as a tool result with isError, or as -32602.
    if (answer.ok) expect((answer.result as { isError?: boolean }).isError).toBe(true);
    else expect(answer.error.code).toBe(-32602);
  });
});

describe("the gateway's MCP client against a 2026-07-28 server (official SDK 2.x)", () => {
  let server: ModernMcpTestServer;
  beforeAll(async () => {
    server = await startModernMcpTestServer();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("sends every request with its _meta and the headers that repeat it, with no session", async () => {
    const u = new McpUpstream({ url: server.url, era: "stateless", fetch: (i, init) => fetch(i, init) });
    const list = await u.request("tools/list");
    expect(list.ok).toBe(true);
    expect((list as { result: { tools: { name: string }[] } }).result.tools.map((t) => t.name)).toEqual(["echo", "confirm", "count"]);
    const call = await u.request("tools/call", { name: "echo", arguments: { text: "stateless" } });
    expect(call.ok).toBe(true);
    expect((call as { result: { content: unknown[] } }).result.content).toEqual([{ type: "text", text: "stateless" }]);
    const last = server.seen.at(-1)!;
    expect(last.headers["mcp-method"]).toBe("tools/call");
    expect(last.headers["mcp-name"]).toBe("echo");
    expect(last.headers["mcp-protocol-version"]).toBe("2026-07-28");
    expect(last.headers["mcp-session-id"]).toBeUndefined();
    expect(last.body.params._meta["io.modelcontextprotocol/protocolVersion"]).toBe("2026-07-28");
    expect(server.seen.some((s) => s.body?.method === "initialize")).toBe(false);
  });
});
