import { randomUUID } from "node:crypto";
import { createServer } from "@modelcontextprotocol/server-everything/dist/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { startLoopbackServer } from "./loopback-server.ts";

/**
 * `@modelcontextprotocol/server-everything`, the MCP reference server, hosted on loopback. Its own
 * HTTP entry point listens on every interface with no host option, so the tests import its server
 * factory and serve it here instead: one server per session on the SDK 1.x Streamable HTTP
 * transport, as that entry point does.
 */
export interface EverythingServer {
  readonly url: string;
  /** JSON-RPC messages received, in order, for checking what the gateway sends upstream. */
  readonly seen: readonly { readonly method: string | undefined; readonly body: any; readonly sessionId: string | undefined }[];
  stop(): Promise<void>;
}

/** Starts it on a free loopback port. */
export async function startEverythingServer(): Promise<EverythingServer> {
  const sessions = new Map<string, { transport: StreamableHTTPServerTransport; cleanup: (id?: string) => void }>();
  const seen: { method: string | undefined; body: any; sessionId: string | undefined }[] = [];
  const http = await startLoopbackServer(async (req, raw, res) => {
    const body: unknown = raw.length === 0 ? undefined : JSON.parse(raw.toString("utf8"));
    const sid = req.headers["mcp-session-id"];
    seen.push({ method: (body as { method?: string } | undefined)?.method, body, sessionId: typeof sid === "string" ? sid : undefined });
    let session = typeof sid === "string" ? sessions.get(sid) : undefined;
    if (!session) {
      if (typeof sid === "string" || req.method !== "POST" || !isInitializeRequest(body)) {
        res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null }));
        return;
      }
      const { server, cleanup } = createServer();
      const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => void sessions.set(id, { transport, cleanup }),
      });
      transport.onclose = () => {
        const id = transport.sessionId;
        if (id !== undefined && sessions.delete(id)) cleanup(id);
      };
      session = { transport, cleanup };
      await server.connect(transport);
    }
    await session.transport.handleRequest(req, res, body);
  });
  return {
    url: `${http.origin}/mcp`,
    seen,
    stop: async () => {
      await Promise.all([...sessions.values()].map((s) => s.transport.close()));
      await http.close();
    },
  };
}
