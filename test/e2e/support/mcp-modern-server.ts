import type { IncomingMessage } from "node:http";
import { acceptedContent, createMcpHandler, inputRequired, McpServer } from "@modelcontextprotocol/server";
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
      // A 2026-07-28 tool that needs the client's confirmation: `input_required`, then the retry carries the answer.
      const confirmation = z.object({ confirm: z.boolean() });
      server.registerTool("confirm", { description: "Asks the client to confirm, by input_required", inputSchema: z.object({ action: z.string() }) }, async ({ action }, ctx) => {
        const answer = acceptedContent(ctx.mcpReq.inputResponses, "confirm", confirmation);
        if (answer === undefined) return inputRequired({ inputRequests: { confirm: inputRequired.elicit({ message: `Really ${action}?`, requestedSchema: confirmation }) }, requestState: `asked:${action}` });
        return { content: [{ type: "text" as const, text: answer.confirm ? `confirmed ${action}` : "not confirmed" }] };
      });
      server.registerTool(
        "count",
        { description: "Counts to n, reporting progress", inputSchema: z.object({ n: z.number().int().min(1).max(20) }) },
        async ({ n }, ctx) => {
          for (let i = 1; i <= n; i++) await ctx.mcpReq.notify({ method: "notifications/progress", params: { progressToken: ctx.mcpReq._meta?.progressToken ?? "", progress: i, total: n } });
          return { content: [{ type: "text" as const, text: `counted to ${n}` }] };
        },
      );
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
