import type { IncomingMessage } from "node:http";
import { startLoopbackServer, type LoopbackServer } from "./loopback-server.ts";

/** What a tool does when called: its result, or `"cut"` (the connection dropped after it ran, no answer). */
export type ToolRun = (args: unknown, req: IncomingMessage) => Promise<Record<string, unknown> | "cut">;

/** One tool of the server: whether `tools/list` shows it, its description, and what a call does. */
export interface CountedTool {
  readonly run: ToolRun;
  readonly description?: string | undefined;
  /** Callable but not listed. */
  readonly unlisted?: boolean | undefined;
  /** The tool's `execution` field as listed (what the server says of its own task support). */
  readonly execution?: Readonly<Record<string, unknown>> | undefined;
}

/** A running counting server. */
export interface CountingToolServer {
  readonly url: string;
  readonly http: LoopbackServer;
  /** The params of every `tools/call` of a known tool that reached the server, in order. */
  readonly params: Record<string, unknown>[];
  /** Executions of `name` (with exactly `args`, when given). */
  executions(name: string, args?: unknown): number;
}

/**
 * A 2026-07-28 MCP tool server of the tests' own, answering JSON-RPC by hand so that every
 * execution is counted where it happens: `tools/list` lists the tools, a `tools/call` of a known
 * tool counts and runs it, an unknown one is -32602 (refused, never run), any other method -32601.
 */
export async function startCountingToolServer(tools: Readonly<Record<string, CountedTool>>): Promise<CountingToolServer> {
  const executions = new Map<string, number>();
  const params: Record<string, unknown>[] = [];
  const http = await startLoopbackServer(async (req, body, res) => {
    const msg = JSON.parse(body.toString("utf8")) as { id?: number; method: string; params?: { name?: string; arguments?: unknown } };
    const answer = (payload: Record<string, unknown>) => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: msg.id, ...payload }));
    if (msg.method === "tools/list") {
      const listed = Object.entries(tools).filter(([, t]) => !t.unlisted);
      return void answer({ result: { tools: listed.map(([name, t]) => ({ name, ...(t.description !== undefined ? { description: t.description } : {}), inputSchema: { type: "object" }, ...(t.execution !== undefined ? { execution: t.execution } : {}) })) } });
    }
    if (msg.method !== "tools/call") return void answer({ error: { code: -32601, message: "Method not found" } });
    const name = msg.params?.name ?? "";
    const tool = tools[name];
    if (!tool) return void answer({ error: { code: -32602, message: `Unknown tool: ${name}` } });
    params.push(msg.params ?? {});
    for (const key of [name, `${name} ${JSON.stringify(msg.params?.arguments ?? {})}`]) executions.set(key, (executions.get(key) ?? 0) + 1);
    const result = await tool.run(msg.params?.arguments, req);
    if (result === "cut") return void req.socket.destroy();
    answer({ result });
  });
  return {
    url: `${http.origin}/mcp`,
    http,
    params,
    executions: (name, args) => executions.get(args === undefined ? name : `${name} ${JSON.stringify(args)}`) ?? 0,
  };
}

/** Waits `ms`: a tool slow enough that concurrent calls overlap. */
export const slowly = (ms: number) => new Promise((r) => setTimeout(r, ms));
