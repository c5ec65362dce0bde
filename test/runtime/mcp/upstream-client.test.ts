import { describe, expect, it } from "vitest";
import { McpUpstream } from "../../../src/mcp/upstream-client.ts";

/** A fake stateful server: records what it is sent and answers from a script. */
function fakeServer(answer: (msg: any, headers: Headers) => Response) {
  const sent: { msg: any; headers: Headers; method: string }[] = [];
  const fetch = async (_url: RequestInfo | URL, init?: RequestInit) => {
    const headers = new Headers(init?.headers);
    const msg = init?.body ? JSON.parse(String(init.body)) : undefined;
    sent.push({ msg, headers, method: init?.method ?? "GET" });
    return answer(msg, headers);
  };
  return { sent, fetch: fetch as typeof globalThis.fetch };
}

const json = (body: unknown, headers: Record<string, string> = {}) => new Response(JSON.stringify(body), { headers: { "content-type": "application/json", ...headers } });
const sse = (...messages: unknown[]) => new Response(messages.map((m) => `event: message\ndata: ${JSON.stringify(m)}\n\n`).join(""), { headers: { "content-type": "text/event-stream" } });

describe("the gateway's MCP client", () => {
  it("opens one upstream session per client, declaring that client's carried capabilities", async () => {
    let n = 0;
    const server = fakeServer((msg) => {
      if (msg?.method === "initialize") return json({ jsonrpc: "2.0", id: msg.id, result: { protocolVersion: "2025-11-25", capabilities: {} } }, { "mcp-session-id": `s${++n}` });
      if (msg?.method === "notifications/initialized") return new Response(null, { status: 202 });
      return json({ jsonrpc: "2.0", id: msg.id, result: { ok: true } });
    });
    const up = new McpUpstream({ url: "http://127.0.0.1:9/mcp", era: "stateful", fetch: server.fetch });
    await up.request("ping", {}, { session: { key: "a", capabilities: { elicitation: {} } } });
    await up.request("ping", {}, { session: { key: "b", capabilities: {} } });
    await up.request("ping", {}, { session: { key: "a", capabilities: { elicitation: {} } } });
    const inits = server.sent.filter((s) => s.msg?.method === "initialize");
    expect(inits.map((s) => s.msg.params.capabilities)).toEqual([{ elicitation: {} }, {}]);
    const pings = server.sent.filter((s) => s.msg?.method === "ping").map((s) => s.headers.get("mcp-session-id"));
    expect(pings).toEqual(["s1", "s2", "s1"]);
  });

  it("relays notifications, answers the server's own requests in the same session, and reads the answer by its id", async () => {
    const server = fakeServer((msg) => {
      if (msg?.method === "initialize") return json({ jsonrpc: "2.0", id: msg.id, result: {} }, { "mcp-session-id": "s" });
      if (msg?.method === "tools/call")
        return sse(
          { jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: 1, progress: 1 } },
          { jsonrpc: "2.0", id: "ask-1", method: "elicitation/create", params: { message: "?" } },
          { jsonrpc: "2.0", id: 999, result: { not: "ours" } },
          { jsonrpc: "2.0", id: msg.id, result: { content: [] } },
        );
      return new Response(null, { status: 202 });
    });
    const up = new McpUpstream({ url: "http://127.0.0.1:9/mcp", era: "stateful", fetch: server.fetch });
    const notes: string[] = [];
    const kept: Promise<unknown>[] = [];
    const answer = await up.request("tools/call", { name: "t" }, { onNotification: (n) => notes.push(n.method), onRequest: async () => ({ result: { action: "accept" } }), keepAlive: (p) => kept.push(p) });
    await Promise.all(kept);
    expect(answer).toEqual({ ok: true, result: { content: [] } });
    expect(notes).toEqual(["notifications/progress"]);
    const reply = server.sent.find((s) => s.msg?.id === "ask-1" && !s.msg.method)!;
    expect(reply.msg).toEqual({ jsonrpc: "2.0", id: "ask-1", result: { action: "accept" } });
    expect(reply.headers.get("mcp-session-id")).toBe("s");
  });

  it("tells a server the client cannot be asked, rather than leaving it waiting", async () => {
    const server = fakeServer((msg) => {
      if (msg?.method === "tools/call") return sse({ jsonrpc: "2.0", id: 7, method: "sampling/createMessage", params: {} }, { jsonrpc: "2.0", id: msg.id, result: { isError: true } });
      return new Response(null, { status: 202 });
    });
    const up = new McpUpstream({ url: "http://127.0.0.1:9/mcp", era: "stateless", fetch: server.fetch });
    const kept: Promise<unknown>[] = [];
    await up.request("tools/call", { name: "t" }, { keepAlive: (p) => kept.push(p) });
    await Promise.all(kept);
    expect(server.sent.find((s) => s.msg?.id === 7)?.msg).toMatchObject({ id: 7, error: { code: -32601 } });
  });

  it("sends a stateless server the client's carried capabilities in every request's _meta", async () => {
    const server = fakeServer((msg) => json({ jsonrpc: "2.0", id: msg.id, result: {} }));
    const up = new McpUpstream({ url: "http://127.0.0.1:9/mcp", era: "stateless", fetch: server.fetch });
    await up.request("tools/list", {}, { session: { key: "k", capabilities: { sampling: {} } } });
    expect(server.sent[0]!.msg.params._meta).toEqual({ "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": { sampling: {} } });
  });

  it("resumes a stream the server ended before its answer, with Last-Event-ID in the same session", async () => {
    const server = fakeServer((msg, headers) => {
      if (msg?.method === "initialize") return json({ jsonrpc: "2.0", id: msg.id, result: {} }, { "mcp-session-id": "s" });
      if (msg?.method === "tools/call") return new Response(`id: e1\nretry: 10\ndata: \n\n`, { headers: { "content-type": "text/event-stream" } });
      if (msg === undefined && headers.get("last-event-id") === "e1") return sse({ jsonrpc: "2.0", id: 2, result: { content: [{ type: "text", text: "after the reconnection" }] } });
      return new Response(null, { status: 202 });
    });
    const up = new McpUpstream({ url: "http://127.0.0.1:9/mcp", era: "stateful", fetch: server.fetch });
    expect(await up.request("tools/call", { name: "t" })).toEqual({ ok: true, result: { content: [{ type: "text", text: "after the reconnection" }] } });
    const resume = server.sent.find((s) => s.method === "GET")!;
    expect(resume.headers.get("mcp-session-id")).toBe("s");
    expect(resume.headers.get("last-event-id")).toBe("e1");
  });

  it("answers an HTTP 401 or 403 of the server as its refusal of the gateway's credential, not as an outage", async () => {
    for (const status of [401, 403]) {
      const server = fakeServer(() => new Response(JSON.stringify({ error: "invalid_token" }), { status, headers: { "content-type": "application/json", "www-authenticate": 'Bearer error="invalid_token"' } }));
      const up = new McpUpstream({ url: "http://127.0.0.1:9/mcp", era: "stateless", fetch: server.fetch });
      await expect(up.request("tools/list")).rejects.toMatchObject({ code: "upstream_auth_failed", message: `The MCP server refused the gateway's credential (${status}).` });
    }
  });

  it("reports a stream that ends without the answer", async () => {
    const server = fakeServer(() => sse({ jsonrpc: "2.0", method: "notifications/message", params: {} }));
    const up = new McpUpstream({ url: "http://127.0.0.1:9/mcp", era: "stateless", fetch: server.fetch });
    await expect(up.request("tools/list")).rejects.toMatchObject({ code: "upstream_protocol_error" });
  });
});
