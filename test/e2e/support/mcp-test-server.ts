import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { ElicitResultSchema, isInitializeRequest, SubscribeRequestSchema, UnsubscribeRequestSchema, UrlElicitationRequiredError } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { startLoopbackServer } from "./loopback-server.ts";

/** A stateful-era MCP server of the tests' own (the official SDK 1.x), on loopback. */
export interface McpTestServer {
  readonly url: string;
  /** Requests seen, with their headers, for checking what the gateway sends upstream. */
  readonly seen: { readonly method: string | undefined; readonly headers: IncomingMessage["headers"]; readonly body: any }[];
  /** Forgets every session, as a restarted server would. */
  forgetSessions(): void;
  stop(): Promise<void>;
}

function build(): McpServer {
  const server = new McpServer({ name: "sluice-test-server", version: "1.0.0" }, { capabilities: { logging: {}, resources: { subscribe: true } } });
  const subscribed = new Set<string>();
  server.registerResource("today", "notes://today", { mimeType: "text/plain" }, async (u) => ({ contents: [{ uri: u.href, text: "today's notes" }] }));
  server.server.setRequestHandler(SubscribeRequestSchema, async (req) => (subscribed.add(req.params.uri), {}));
  server.server.setRequestHandler(UnsubscribeRequestSchema, async (req) => (subscribed.delete(req.params.uri), {}));
  server.registerTool("touch", { description: "Changes today's notes: tells subscribers, outside the request" }, async () => {
    if (subscribed.has("notes://today")) await server.server.sendResourceUpdated({ uri: "notes://today" });
    await server.server.sendToolListChanged();
    return { content: [{ type: "text", text: "touched" }] };
  });
  server.registerTool("echo", { description: "Echoes its text", inputSchema: { text: z.string() } }, async ({ text }) => ({ content: [{ type: "text", text }] }));
  server.registerTool(
    "count",
    { description: "Counts to n, reporting progress", inputSchema: { n: z.number().int().min(1).max(20) } },
    async ({ n }, extra) => {
      const token = extra._meta?.progressToken;
      for (let i = 1; i <= n; i++) {
        if (token !== undefined) await extra.sendNotification({ method: "notifications/progress", params: { progressToken: token, progress: i, total: n } });
      }
      return { content: [{ type: "text", text: `counted to ${n}` }] };
    },
  );
  server.registerTool("confirm", { description: "Asks the client to confirm, by elicitation", inputSchema: { action: z.string() } }, async ({ action }, extra) => {
    // Sent in the request's own stream (a related request), as a server inside one call does.
    const answer = await extra.sendRequest({ method: "elicitation/create", params: { message: `Really ${action}?`, requestedSchema: { type: "object", properties: { confirm: { type: "boolean" } }, required: ["confirm"] } } }, ElicitResultSchema);
    return { content: [{ type: "text", text: answer.action === "accept" && answer.content?.confirm === true ? `confirmed ${action}` : `not confirmed (${answer.action})` }] };
  });
  server.registerTool("consent", { description: "Needs its user's consent on a page first (URLElicitationRequiredError)" }, async () => {
    throw new UrlElicitationRequiredError([{ mode: "url", elicitationId: "consent-1", url: "https://auth.example.com/consent?client=test", message: "Grant access to your notes first" }], "Consent is required first.");
  });
  server.registerTool("sample", { description: "Asks the client's model, outside the request's own stream" }, async () => {
    // Not a related request: it goes out on the session's GET stream, as many servers send it.
    const answer = await server.server.createMessage({ messages: [{ role: "user", content: { type: "text", text: "Say hi" } }], maxTokens: 10 });
    return { content: [{ type: "text", text: `sampled: ${answer.content.type === "text" ? answer.content.text : answer.content.type}` }] };
  });
  server.registerTool("slow", { description: "Waits until cancelled, or 10 s" }, async (extra) => {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 10_000);
      extra.signal.addEventListener("abort", () => {
        clearTimeout(timer);
        resolve();
      });
    });
    return { content: [{ type: "text", text: extra.signal.aborted ? "cancelled" : "finished" }] };
  });
  return server;
}

/** Starts the server on a free loopback port. */
export async function startMcpTestServer(): Promise<McpTestServer> {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const seen: McpTestServer["seen"][number][] = [];
  const http = await startLoopbackServer(async (req, raw, res) => {
    const text = raw.toString("utf8");
    const body: unknown = text === "" ? undefined : JSON.parse(text);
    seen.push({ method: (body as { method?: string } | undefined)?.method, headers: req.headers, body });
    const sid = req.headers["mcp-session-id"];
    let transport = typeof sid === "string" ? transports.get(sid) : undefined;
    if (!transport) {
      if (typeof sid === "string" || !isInitializeRequest(body)) {
        res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null }));
        return;
      }
      const t = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), onsessioninitialized: (id) => void transports.set(id, t) });
      transport = t;
      await build().connect(t);
    }
    await transport.handleRequest(req, res, body);
  });
  return {
    url: `${http.origin}/mcp`,
    seen,
    forgetSessions: () => transports.clear(),
    stop: () => http.close(),
  };
}
