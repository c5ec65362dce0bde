/** What one request of each workload looks like, and what counts as a complete, correct answer. */
import { ECHO_TOOL, MCP_PATH, MCP_VERSION } from "../simulator/mcp.ts";

export type WorkloadName = "buffered" | "streaming" | "mcp" | "embeddings";

/** A chat completion, buffered or streamed. */
export interface ChatWorkload {
  readonly name: "buffered" | "streaming";
  readonly stream: boolean;
  /** Output tokens the simulator generates per response. */
  readonly tokens: number;
  /** The client's protocol (default OpenAI Chat Completions); Anthropic Messages at `/v1/messages`. */
  readonly client?: "openai-chat" | "anthropic-messages" | undefined;
}

/** An MCP `tools/call` of the simulator's echo tool, in the 2026-07-28 revision. */
export interface McpWorkload {
  readonly name: "mcp";
  readonly stream: false;
}

/** An embedding of the chat workload's prompt (`POST /v1/embeddings`): what a similarity signal asks for. */
export interface EmbeddingsWorkload {
  readonly name: "embeddings";
  readonly stream: false;
}

export type Workload = ChatWorkload | McpWorkload | EmbeddingsWorkload;

export const MCP_WORKLOAD: McpWorkload = { name: "mcp", stream: false };

export const EMBEDDINGS_WORKLOAD: EmbeddingsWorkload = { name: "embeddings", stream: false };

/** The name the simulator's MCP endpoint has in the bench's gateway config: Sluice serves it at `/mcp/<name>`. */
export const MCP_SERVER = "sim";

/** The prompt avoids the demo config's routing keywords, so Sluice takes its default route. */
export const PROMPT = "Hello from the benchmark. Please answer briefly.";

/** What the echo tool is asked to say back: a short sentence, like a small tool argument. */
const ECHO_TEXT = "Hello from the benchmark.";

const CHAT_PATH = "/v1/chat/completions";
const MESSAGES_PATH = "/v1/messages";
const EMBEDDINGS_PATH = "/v1/embeddings";

/** Where a request of `w` goes on a gateway (Sluice, or the null gateway, which serves the same paths). */
export function gatewayPath(w: Workload): string {
  return w.name === "mcp" ? `${MCP_PATH}/${MCP_SERVER}` : w.name === "embeddings" ? EMBEDDINGS_PATH : messagesClient(w) ? MESSAGES_PATH : CHAT_PATH;
}

/** Whether `w` is a chat asked in Anthropic Messages. */
function messagesClient(w: Workload): boolean {
  return (w.name === "buffered" || w.name === "streaming") && w.client === "anthropic-messages";
}

/** Where a request of `w` goes on the simulator itself. */
export function simulatorPath(w: Workload): string {
  return w.name === "mcp" ? MCP_PATH : w.name === "embeddings" ? EMBEDDINGS_PATH : messagesClient(w) ? MESSAGES_PATH : CHAT_PATH;
}

/** The JSON body of one request for `model` (which an MCP call does not name). */
export function requestBody(w: Workload, model: string): string {
  if (w.name === "mcp") {
    return JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: {
        name: ECHO_TOOL,
        arguments: { text: ECHO_TEXT },
        _meta: { "io.modelcontextprotocol/protocolVersion": MCP_VERSION, "io.modelcontextprotocol/clientCapabilities": {} },
      },
    });
  }
  if (w.name === "embeddings") return JSON.stringify({ model, input: PROMPT });
  // The simulator's answer size is its own setting; max_tokens only has to allow it.
  if (messagesClient(w)) return JSON.stringify({ model, max_tokens: 8192, messages: [{ role: "user", content: PROMPT }], ...(w.stream ? { stream: true } : {}) });
  return JSON.stringify({
    model,
    messages: [{ role: "user", content: PROMPT }],
    ...(w.stream ? { stream: true, stream_options: { include_usage: true } } : {}),
  });
}

/**
 * Every header of one request of `w`, `base` (the target's credential) included. An MCP request
 * of the 2026-07-28 revision repeats its method, tool name and version in headers, and accepts
 * JSON and an event stream.
 */
export function requestHeaders(w: Workload, base: Readonly<Record<string, string>>): Record<string, string> {
  const headers = { ...base, "content-type": "application/json" };
  if (w.name !== "mcp") return headers;
  return { ...headers, accept: "application/json, text/event-stream", "mcp-protocol-version": MCP_VERSION, "mcp-method": "tools/call", "mcp-name": ECHO_TOOL };
}

/**
 * Why a 2xx response body is not a complete answer, or `undefined` when it is. A stream must end
 * with `data: [DONE]` and carry a usage chunk (the request asks for one); a buffered answer must
 * be a chat completion with text; an MCP answer a JSON-RPC result (not an error, not a tool's
 * failure) whose text is what the echo tool was asked to say.
 */
export function invalidBody(w: Workload, text: string): string | undefined {
  if (w.name === "mcp") return invalidToolResult(text);
  if (w.name === "embeddings") return invalidEmbedding(text);
  if (messagesClient(w)) return invalidMessage(w.stream, text);
  if (w.stream) {
    if (!text.trimEnd().endsWith("data: [DONE]")) return "incomplete stream (no [DONE])";
    if (!text.includes('"usage":{')) return "stream without usage chunk";
    if (!text.includes('"content":"')) return "stream without content";
    return undefined;
  }
  const json = parsed<{ object?: unknown; choices?: { message?: { content?: unknown } }[] }>(text);
  if (json === undefined) return "body is not JSON";
  if (json.object !== "chat.completion") return "body is not a chat.completion";
  const content = json.choices?.[0]?.message?.content;
  if (typeof content !== "string" || content === "") return "completion without text";
  return undefined;
}

/** An Anthropic Messages answer: a stream ends with `message_stop` after text and usage; a buffered one is a message with text. */
function invalidMessage(stream: boolean, text: string): string | undefined {
  if (stream) {
    if (!text.trimEnd().endsWith('data: {"type":"message_stop"}')) return "incomplete stream (no message_stop)";
    if (!text.includes('"output_tokens":')) return "stream without usage";
    if (!text.includes('"text_delta"')) return "stream without content";
    return undefined;
  }
  const json = parsed<{ type?: unknown; content?: { text?: unknown }[] }>(text);
  if (json === undefined) return "body is not JSON";
  if (json.type !== "message") return "body is not a message";
  const content = json.content?.[0]?.text;
  if (typeof content !== "string" || content === "") return "message without text";
  return undefined;
}

function invalidToolResult(text: string): string | undefined {
  const json = parsed<{ jsonrpc?: unknown; error?: { code?: unknown }; result?: { isError?: unknown; content?: { text?: unknown }[] } }>(text);
  if (json === undefined) return "body is not JSON";
  if (json.error !== undefined) return `JSON-RPC error ${String(json.error.code)}`;
  if (json.jsonrpc !== "2.0" || json.result === undefined) return "body is not a JSON-RPC result";
  if (json.result.isError === true) return "tool result with isError";
  if (json.result.content?.[0]?.text !== ECHO_TEXT) return "tool result without the echoed text";
  return undefined;
}

function invalidEmbedding(text: string): string | undefined {
  const json = parsed<{ object?: unknown; data?: { embedding?: unknown }[] }>(text);
  if (json === undefined) return "body is not JSON";
  if (json.object !== "list") return "body is not an embedding list";
  const vector = json.data?.[0]?.embedding;
  // Base64 vectors are strings; the bench asks for floats.
  if (!Array.isArray(vector) || vector.length === 0 || json.data!.length !== 1) return "not exactly one embedding";
  return undefined;
}

/** A response header an answer must carry with exactly `value`, or (`value: null`) must not carry. */
export interface ExpectedHeader {
  /** Lower case, as Node reports it. */
  readonly name: string;
  readonly value: string | null;
}

/** Why an answer's header `expect.name` (as Node reports it) is not what was expected, or `undefined` when it is. */
export function unexpectedHeader(expect: ExpectedHeader, actual: string | string[] | undefined): string | undefined {
  const got = Array.isArray(actual) ? actual.join(", ") : actual;
  if (got === (expect.value ?? undefined)) return undefined;
  return `${expect.name}: ${got ?? "(absent)"}, want ${expect.value ?? "(absent)"}`;
}

/** `text` parsed as JSON of the shape the caller reads, or `undefined` when it is not JSON. */
function parsed<T>(text: string): T | undefined {
  try {
    return JSON.parse(text) as T;
  } catch {
    return undefined;
  }
}
