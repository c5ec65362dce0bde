/**
 * `POST /mcp`: a small MCP server of the stateless revision (2026-07-28), answering in JSON:
 * `server/discover`, `ping`, `tools/list` and `tools/call` of one tool, `echo`. It is the
 * upstream that benchmarks and tests put behind a gateway's MCP endpoint, so it costs little per
 * call; and it checks what that revision asks of every request (the `_meta` envelope, and the
 * headers that repeat the body), so that a gateway sending a malformed request upstream gets the
 * revision's refusal, counted as `rejected`, never a result.
 */

import type { IncomingHttpHeaders } from "node:http";
import type { Exchange } from "./exchange.ts";
import { isObject } from "./formats/openai-shared.ts";

/** Where the simulator serves MCP. */
export const MCP_PATH = "/mcp";

/** The only revision served. */
export const MCP_VERSION = "2026-07-28";

/** The tool: answers its `text` argument back as one text block. */
export const ECHO_TOOL = "echo";

const META_VERSION = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities";

const ECHO_DEFINITION = {
  name: ECHO_TOOL,
  description: "Answers its text argument back.",
  inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
};

/** A refusal: its HTTP status, as the revision pairs them (protocol errors 4xx, a tool's own in-band). */
interface Refusal {
  readonly status: number;
  readonly code: number;
  readonly message: string;
  readonly data?: unknown;
}

type Answer = { readonly result: Readonly<Record<string, unknown>> } | { readonly error: Refusal };

const refuse = (status: number, code: number, message: string, data?: unknown): { readonly error: Refusal } => ({ error: { status, code, message, ...(data === undefined ? {} : { data }) } });
const headerMismatch = (message: string) => refuse(400, -32020, message);

/** A header as sent (plain, or `=?base64?…?=` for values that are not header-safe). */
function headerValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  if (typeof v !== "string") return undefined;
  const m = /^=\?base64\?([A-Za-z0-9+/]*={0,2})\?=$/.exec(v);
  return m ? Buffer.from(m[1]!, "base64").toString("utf8") : v;
}

/** What one JSON-RPC request gets, after its envelope and headers were checked. */
function dispatch(method: string, params: Readonly<Record<string, unknown>>): Answer {
  switch (method) {
    case "server/discover":
      return { result: { supportedVersions: [MCP_VERSION], capabilities: { tools: {} }, _meta: { "io.modelcontextprotocol/serverInfo": { name: "sluice-simulator", version: "1" } }, ttlMs: 0, cacheScope: "private" } };
    case "ping":
      return { result: {} };
    case "tools/list":
      return { result: { tools: [ECHO_DEFINITION], ttlMs: 0, cacheScope: "private" } };
    case "tools/call": {
      if (params.name !== ECHO_TOOL) return refuse(200, -32602, `Unknown tool: ${String(params.name).slice(0, 64)}`);
      const text = isObject(params.arguments) ? params.arguments.text : undefined;
      // A tool's own failure is a result the model can read, not a protocol error.
      if (typeof text !== "string") return { result: { content: [{ type: "text", text: "echo needs a string argument 'text'." }], isError: true } };
      return { result: { content: [{ type: "text", text }] } };
    }
    default:
      return refuse(404, -32601, `Method not found: ${method.slice(0, 64)}`);
  }
}

/**
 * The checks of the revision, in the order its servers apply them: one JSON-RPC 2.0 message
 * (notifications are accepted as they are), the `_meta` envelope naming a served version and the
 * client's capabilities, then `MCP-Protocol-Version`, `Mcp-Method` and, for `tools/call`,
 * `Mcp-Name` equal to what the body says.
 */
function answer(headers: IncomingHttpHeaders, body: unknown): Answer | "accepted" {
  if (!isObject(body) || body.jsonrpc !== "2.0" || typeof body.method !== "string" || body.method === "") return refuse(400, -32600, "Invalid Request: one JSON-RPC 2.0 message per POST.");
  const method = body.method;
  if (!("id" in body)) return method.startsWith("notifications/") ? "accepted" : refuse(400, -32600, "Invalid Request: a message without an id must be a notification.");
  if (body.params !== undefined && !isObject(body.params)) return refuse(400, -32600, "Invalid Request: params must be an object.");
  const params = body.params ?? {};
  const meta = isObject(params._meta) ? params._meta : {};
  const version = meta[META_VERSION];
  if (typeof version !== "string") return refuse(400, -32022, "Unsupported protocol version: the request did not name a protocol version.", { supported: [MCP_VERSION] });
  if (version !== MCP_VERSION) return refuse(400, -32022, `Unsupported protocol version: ${version.slice(0, 32)}`, { supported: [MCP_VERSION], requested: version.slice(0, 32) });
  if (!isObject(meta[META_CAPABILITIES])) return refuse(400, -32602, `Invalid params: _meta["${META_CAPABILITIES}"] is required.`);
  if (headerValue(headers, "mcp-protocol-version") !== version) return headerMismatch("The MCP-Protocol-Version header must equal the protocol version in _meta.");
  if (headerValue(headers, "mcp-method") !== method) return headerMismatch("The Mcp-Method header must equal the JSON-RPC method.");
  if (method === "tools/call" && headerValue(headers, "mcp-name") !== params.name) return headerMismatch("The Mcp-Name header must equal params.name.");
  return dispatch(method, params);
}

/** Answers one request to {@link MCP_PATH}; `malformed` when its body was not JSON. */
export function serveMcp(ex: Exchange, body: unknown, malformed: boolean): void {
  // The revision has no GET stream and no DELETE: everything is one POST.
  if (ex.req.method !== "POST") return ex.json(405, JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32600, message: "Only POST is served on this endpoint." } }), "rejected", { allow: "POST" });
  const a = malformed ? refuse(400, -32700, "Parse error: the body is not JSON.") : answer(ex.req.headers, body);
  if (a === "accepted") {
    ex.settle("completed");
    ex.res.writeHead(202, { [ex.idHeader]: ex.requestId }).end();
    return;
  }
  const id = isObject(body) && (typeof body.id === "string" || typeof body.id === "number") ? body.id : null;
  if ("result" in a) return ex.json(200, JSON.stringify({ jsonrpc: "2.0", id, result: { resultType: "complete", ...a.result } }), "completed");
  const { status, ...error } = a.error;
  ex.json(status, JSON.stringify({ jsonrpc: "2.0", id, error }), "rejected");
}

/** The answer to a request without the simulator's API key. */
export function mcpUnauthorized(ex: Exchange): void {
  ex.json(401, JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32000, message: "Unauthorized: send the simulator's API key." } }), "rejected", { "www-authenticate": "Bearer" });
}
