// The package ships JavaScript only; this is the one factory the tests host.
declare module "@modelcontextprotocol/server-everything/dist/server/index.js" {
  import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
  /** A new server instance per session, and what to stop when that session ends. */
  export function createServer(): { server: McpServer; cleanup: (sessionId?: string) => void };
}
