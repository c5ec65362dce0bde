import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { McpServer, ResourceTemplate } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport, type EventStore } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { ElicitResultSchema, isInitializeRequest, ListToolsRequestSchema, type JSONRPCMessage, type ListToolsResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { startLoopbackServer } from "./loopback-server.ts";

/**
 * The target the MCP conformance runner's server scenarios expect: the tools, resources and
 * prompts they call by fixed names (`test_simple_text`, `test://static-text`, …), each answering
 * what the scenario checks. The runner's own reference server is not in its npm package, so this is
 * the tests' own, on the official SDK 1.x, stateful (sessions), bound to loopback.
 */
export interface McpConformanceServer {
  readonly url: string;
  stop(): Promise<void>;
}

/** A 1×1 PNG and a minimal WAV: the scenarios check the type and MIME type, not the pixels. */
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
const WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

const JSON_SCHEMA_2020_12 = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object" as const,
  $defs: { address: { type: "object", properties: { street: { type: "string" }, city: { type: "string" } } } },
  properties: { name: { type: "string" }, address: { $ref: "#/$defs/address" } },
  additionalProperties: false,
};

/**
 * How long a server-to-client request (elicitation, sampling) waits for its answer. A client
 * answers these at once; a gateway that does not relay them never does, and a short wait turns
 * that into the tool's own "not supported" answer instead of the runner's 60 s request timeout.
 */
const ASK_CLIENT = { timeout: 5_000 };

const text = (t: string) => ({ content: [{ type: "text" as const, text: t }] });
const tick = () => new Promise((r) => setTimeout(r, 20));

function elicitTool(server: McpServer, name: string, message: string, requestedSchema: Record<string, unknown>): void {
  server.registerTool(name, { description: `Elicits: ${message}`, inputSchema: {} }, async () => {
    try {
      const r = await server.server.request({ method: "elicitation/create", params: { message, requestedSchema: requestedSchema as never } }, ElicitResultSchema, ASK_CLIENT);
      return text(`Elicitation completed: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
    } catch (err) {
      return text(`Elicitation not supported or error: ${(err as Error).message}`);
    }
  });
}

/**
 * Resumable streams (SEP-1699) for the polling scenario: events kept per stream, replayed after
 * the `Last-Event-ID` a reconnecting client sends.
 */
function memoryEventStore(): EventStore {
  const events: { id: string; stream: string; message: JSONRPCMessage }[] = [];
  return {
    async storeEvent(stream, message) {
      const id = `${stream}::${String(events.length).padStart(8, "0")}`;
      events.push({ id, stream, message });
      return id;
    },
    async replayEventsAfter(lastEventId, { send }) {
      const stream = lastEventId.split("::")[0]!;
      for (const e of events) if (e.stream === stream && e.id > lastEventId) await send(e.id, e.message);
      return stream;
    },
  };
}

function build(transports: ReadonlyMap<string, StreamableHTTPServerTransport>): McpServer {
  const server = new McpServer(
    { name: "sluice-conformance-target", version: "1.0.0" },
    { capabilities: { tools: { listChanged: true }, resources: { subscribe: true, listChanged: true }, prompts: { listChanged: true }, logging: {}, completions: {} } },
  );
  const log = (data: string) => void server.server.notification({ method: "notifications/message", params: { level: "info", logger: "conformance-target", data } }).catch(() => {});

  server.registerTool("test_simple_text", { description: "Simple text content" }, async () => text("This is a simple text response for testing."));
  server.registerTool("test_image_content", { description: "Image content" }, async () => ({ content: [{ type: "image", data: PNG, mimeType: "image/png" }] }));
  server.registerTool("test_audio_content", { description: "Audio content" }, async () => ({ content: [{ type: "audio", data: WAV, mimeType: "audio/wav" }] }));
  server.registerTool("test_embedded_resource", { description: "An embedded resource" }, async () => ({
    content: [{ type: "resource", resource: { uri: "test://embedded-resource", mimeType: "text/plain", text: "This is an embedded resource content." } }],
  }));
  server.registerTool("test_multiple_content_types", { description: "Text, image and resource" }, async () => ({
    content: [
      { type: "text", text: "Multiple content types test:" },
      { type: "image", data: PNG, mimeType: "image/png" },
      { type: "resource", resource: { uri: "test://mixed-content-resource", mimeType: "application/json", text: JSON.stringify({ test: "data", value: 123 }) } },
    ],
  }));
  server.registerTool("test_tool_with_logging", { description: "Logs while it runs", inputSchema: {} }, async (_args, extra) => {
    for (const data of ["Tool execution started", "Tool processing data", "Tool execution completed"]) {
      await extra.sendNotification({ method: "notifications/message", params: { level: "info", data } });
      await tick();
    }
    return text("Tool with logging executed successfully");
  });
  server.registerTool("test_tool_with_progress", { description: "Reports progress", inputSchema: {} }, async (_args, extra) => {
    const progressToken = extra._meta?.progressToken ?? 0;
    for (const progress of [0, 50, 100]) {
      await extra.sendNotification({ method: "notifications/progress", params: { progressToken, progress, total: 100, message: `Completed step ${progress} of 100` } });
      await tick();
    }
    return text(String(progressToken));
  });
  server.registerTool("test_error_handling", { description: "Always fails" }, async () => {
    throw new Error("This tool intentionally returns an error for testing");
  });
  server.registerTool("test_reconnection", { description: "Closes its SSE stream mid-call; the answer comes on the resumed stream", inputSchema: {} }, async (_args, extra) => {
    const transport = extra.sessionId === undefined ? undefined : transports.get(extra.sessionId);
    transport?.closeSSEStream(extra.requestId);
    await new Promise((r) => setTimeout(r, 100));
    return text("Reconnection test completed successfully.");
  });
  server.registerTool("test_sampling", { description: "Asks the client's model", inputSchema: { prompt: z.string() } }, async ({ prompt }) => {
    try {
      const r = await server.server.createMessage({ messages: [{ role: "user", content: { type: "text", text: prompt } }], maxTokens: 100 }, ASK_CLIENT);
      return text(`LLM response: ${r.content.type === "text" ? r.content.text : "No response"}`);
    } catch (err) {
      return text(`Sampling not supported or error: ${(err as Error).message}`);
    }
  });
  server.registerTool("test_elicitation", { description: "Asks the user", inputSchema: { message: z.string() } }, async ({ message }) => {
    try {
      const r = await server.server.request(
        { method: "elicitation/create", params: { message, requestedSchema: { type: "object", properties: { response: { type: "string", description: "User's response" } }, required: ["response"] } } },
        ElicitResultSchema,
        ASK_CLIENT,
      );
      return text(`User response: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
    } catch (err) {
      return text(`Elicitation not supported or error: ${(err as Error).message}`);
    }
  });
  elicitTool(server, "test_elicitation_sep1034_defaults", "Please review and update the form fields with defaults", {
    type: "object",
    properties: {
      name: { type: "string", description: "User name", default: "John Doe" },
      age: { type: "integer", description: "User age", default: 30 },
      score: { type: "number", description: "User score", default: 95.5 },
      status: { type: "string", description: "User status", enum: ["active", "inactive", "pending"], default: "active" },
      verified: { type: "boolean", description: "Verification status", default: true },
    },
    required: [],
  });
  elicitTool(server, "test_elicitation_sep1330_enums", "Please select options from the enum fields", {
    type: "object",
    properties: {
      untitledSingle: { type: "string", description: "Select one option", enum: ["option1", "option2", "option3"] },
      titledSingle: { type: "string", description: "Select one option with titles", oneOf: [{ const: "value1", title: "First Option" }, { const: "value2", title: "Second Option" }, { const: "value3", title: "Third Option" }] },
      legacyEnum: { type: "string", description: "Select one option (legacy)", enum: ["opt1", "opt2", "opt3"], enumNames: ["Option One", "Option Two", "Option Three"] },
      untitledMulti: { type: "array", description: "Select multiple options", minItems: 1, maxItems: 3, items: { type: "string", enum: ["option1", "option2", "option3"] } },
      titledMulti: { type: "array", description: "Select multiple options with titles", minItems: 1, maxItems: 3, items: { anyOf: [{ const: "value1", title: "First Choice" }, { const: "value2", title: "Second Choice" }, { const: "value3", title: "Third Choice" }] } },
    },
    required: [],
  });

  server.registerResource("static-text", "test://static-text", { title: "Static Text Resource", description: "Static text", mimeType: "text/plain" }, async () => ({
    contents: [{ uri: "test://static-text", mimeType: "text/plain", text: "This is the content of the static text resource." }],
  }));
  server.registerResource("static-binary", "test://static-binary", { title: "Static Binary Resource", description: "A PNG", mimeType: "image/png" }, async () => ({
    contents: [{ uri: "test://static-binary", mimeType: "image/png", blob: PNG }],
  }));
  server.registerResource("template", new ResourceTemplate("test://template/{id}/data", { list: undefined }), { title: "Resource Template", description: "By id", mimeType: "application/json" }, async (uri, { id }) => ({
    contents: [{ uri: uri.href, mimeType: "application/json", text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${String(id)}` }) }],
  }));
  server.registerResource("watched-resource", "test://watched-resource", { title: "Watched Resource", description: "Subscribable", mimeType: "text/plain" }, async () => ({
    contents: [{ uri: "test://watched-resource", mimeType: "text/plain", text: "Watched resource content" }],
  }));
  server.server.setRequestHandler(z.object({ method: z.literal("resources/subscribe"), params: z.object({ uri: z.string() }).passthrough() }).passthrough(), async (r) => {
    log(`Subscribed to resource: ${r.params.uri}`);
    return {};
  });
  server.server.setRequestHandler(z.object({ method: z.literal("resources/unsubscribe"), params: z.object({ uri: z.string() }).passthrough() }).passthrough(), async (r) => {
    log(`Unsubscribed from resource: ${r.params.uri}`);
    return {};
  });

  server.registerPrompt("test_simple_prompt", { title: "Simple Test Prompt", description: "No arguments" }, async () => ({
    messages: [{ role: "user", content: { type: "text", text: "This is a simple prompt for testing." } }],
  }));
  server.registerPrompt("test_prompt_with_arguments", { title: "Prompt With Arguments", description: "Two arguments", argsSchema: { arg1: z.string(), arg2: z.string() } }, async ({ arg1, arg2 }) => ({
    messages: [{ role: "user", content: { type: "text", text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` } }],
  }));
  server.registerPrompt("test_prompt_with_embedded_resource", { title: "Prompt With Embedded Resource", description: "Embeds a resource", argsSchema: { resourceUri: z.string() } }, async ({ resourceUri }) => ({
    messages: [
      { role: "user", content: { type: "resource", resource: { uri: resourceUri, mimeType: "text/plain", text: "Embedded resource content for testing." } } },
      { role: "user", content: { type: "text", text: "Please process the embedded resource above." } },
    ],
  }));
  server.registerPrompt("test_prompt_with_image", { title: "Prompt With Image", description: "Includes an image" }, async () => ({
    messages: [
      { role: "user", content: { type: "image", data: PNG, mimeType: "image/png" } },
      { role: "user", content: { type: "text", text: "Please analyze the image above." } },
    ],
  }));

  server.server.setRequestHandler(z.object({ method: z.literal("logging/setLevel"), params: z.object({ level: z.string() }).passthrough() }).passthrough(), async (r) => {
    log(`Log level set to: ${r.params.level}`);
    return {};
  });
  server.server.setRequestHandler(z.object({ method: z.literal("completion/complete") }).passthrough(), async () => ({ completion: { values: [], total: 0, hasMore: false } }));

  // SEP-1613: the list must carry this tool's JSON Schema 2020-12 as written ($schema, $defs,
  // additionalProperties), which the SDK's zod conversion would not; the SDK's own list handler
  // answers the rest and the schema is put back on the way out.
  server.registerTool("json_schema_2020_12_tool", { description: "JSON Schema 2020-12 input", inputSchema: { name: z.string().optional(), address: z.object({ street: z.string().optional(), city: z.string().optional() }).optional() } }, async (args) =>
    text(`JSON Schema 2020-12 tool called with: ${JSON.stringify(args)}`),
  );
  const handlers = (server.server as unknown as { _requestHandlers: Map<string, (req: unknown, extra: unknown) => Promise<ListToolsResult>> })._requestHandlers;
  const listTools = handlers.get("tools/list")!;
  server.server.setRequestHandler(ListToolsRequestSchema, async (req, extra) => {
    const listed = await listTools(req, extra);
    return { ...listed, tools: listed.tools.map((t) => (t.name === "json_schema_2020_12_tool" ? { ...t, inputSchema: JSON_SCHEMA_2020_12 } : t)) };
  });
  return server;
}

/** Only loopback names: the runner's DNS-rebinding scenario sends another Host and Origin and expects a 4xx. */
function loopbackOnly(req: IncomingMessage): boolean {
  const local = (host: string) => /^(localhost|127\.0\.0\.1|\[::1\])(:\d+)?$/i.test(host);
  const origin = req.headers.origin;
  return local(req.headers.host ?? "") && (origin === undefined || local(origin.replace(/^https?:\/\//i, "")));
}

/** Starts the target on a free loopback port. */
export async function startMcpConformanceServer(): Promise<McpConformanceServer> {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const http = await startLoopbackServer(async (req, raw, res) => {
    if (!loopbackOnly(req)) {
      res.writeHead(403, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: "Host or Origin is not a loopback name" }, id: null }));
      return;
    }
    const body: unknown = raw.length === 0 ? undefined : JSON.parse(raw.toString("utf8"));
    const sid = req.headers["mcp-session-id"];
    let transport = typeof sid === "string" ? transports.get(sid) : undefined;
    if (!transport) {
      if (typeof sid === "string" || req.method !== "POST" || !isInitializeRequest(body)) {
        res.writeHead(typeof sid === "string" ? 404 : 400, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: "No valid session" }, id: null }));
        return;
      }
      const t = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), eventStore: memoryEventStore(), retryInterval: 500, onsessioninitialized: (id) => void transports.set(id, t) });
      t.onclose = () => void (t.sessionId !== undefined && transports.delete(t.sessionId));
      transport = t;
      await build(transports).connect(t);
    }
    await transport.handleRequest(req, res, body);
  });
  return {
    url: `${http.origin}/mcp`,
    stop: async () => {
      await Promise.all([...transports.values()].map((t) => t.close()));
      await http.close();
    },
  };
}
