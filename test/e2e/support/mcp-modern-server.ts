import type { IncomingMessage } from "node:http";
import { createMcpHandler, McpServer } from "@modelcontextprotocol/server";
import { z } from "zod";
import { startLoopbackServer } from "./loopback-server.ts";

/** A 2026-07-28 (stateless) MCP server of the tests' own (the official SDK 2.x), on loopback. */
export interface ModernMcpTestServer {
  readonly url: string;
  readonly seen: { readonly headers: IncomingMessage["headers"]; readonly body: any }[];
  stop(): Promise<void>;
}

/** Starts it on a free loopback port; legacy (2025-era) traffic is refused. */
export async function startModernMcpTestServer(): Promise<ModernMcpTestServer> {
  const handler = createMcpHandler(
    () => {
      const server = new McpServer({ name: "sluice-modern-test-server", version: "1.0.0" });
      server.registerTool("echo", { description: "Echoes its text", inputSchema: z.object({ text: z.string() }) }, async ({ text }) => ({ content: [{ type: "text" as const, text }] }));
      server.registerPrompt("greet", { description: "A greeting", argsSchema: z.object({ name: z.string() }) }, async ({ name }) => ({ messages: [{ role: "user" as const, content: { type: "text" as const, text: `Hello, ${name}` } }] }));
      for (const [name, uri] of [
        ["readme", "docs://readme"],
        ["secret", "docs://secret"],
      ] as const) {
        server.registerResource(name, uri, { mimeType: "text/plain" }, async (u) => ({ contents: [{ uri: u.href, text: `the ${name}` }] }));
      }
      return server;
    },
    { legacy: "reject" },
  );
  const seen: ModernMcpTestServer["seen"][number][] = [];
  const http = await startLoopbackServer(async (req, body, res) => {
    try {
      seen.push({ headers: req.headers, body: JSON.parse(body.toString("utf8")) });
    } catch {
      seen.push({ headers: req.headers, body: undefined });
    }
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
    const request = new Request(`http://127.0.0.1${req.url ?? "/"}`, { method: req.method, headers, ...(req.method === "POST" ? { body } : {}) });
    const response = await handler.fetch(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.end(Buffer.from(await response.arrayBuffer()));
  });
  return {
    url: `${http.origin}/mcp`,
    seen,
    stop: async () => {
      await handler.close();
      await http.close();
    },
  };
}
