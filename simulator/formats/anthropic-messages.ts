/**
 * Anthropic Messages (`POST /v1/messages`): request validation with Anthropic's error
 * messages, `message` objects and the named SSE events of a streamed message.
 *
 * Usage follows Anthropic's split: `input_tokens` excludes cache reads, so with the
 * `cached-tokens` knob at N, `input_tokens` = prompt − N and `cache_read_input_tokens` = N.
 * `output_tokens` includes thinking (reasoning) tokens, as the API bills them.
 */

import type { IncomingHttpHeaders } from "node:http";
import type {
  Completion,
  ErrorKind,
  GenerationRequest,
  JsonCall,
  JsonEndpoint,
  NeutralMessage,
  ParseResult,
  Rejected,
  SimError,
  StreamScript,
  ToolChoice,
  ToolSpec,
  Usage,
  WireFormat,
} from "../wire-format.ts";
import { conversationHash, countPromptTokens, hashTexts, lastUserText } from "../generate.ts";

type Json = Readonly<Record<string, unknown>>;

const ERROR_TYPES: Record<ErrorKind, string> = {
  invalid_request: "invalid_request_error",
  authentication: "authentication_error",
  billing: "billing_error",
  permission: "permission_error",
  not_found: "not_found_error",
  too_large: "request_too_large",
  rate_limit: "rate_limit_error",
  server: "api_error",
  timeout: "timeout_error",
  overloaded: "overloaded_error",
};

/** Anthropic's own wording for simulated failures of these kinds. */
const MESSAGES: Partial<Record<ErrorKind, string>> = {
  overloaded: "Overloaded",
  server: "Internal server error",
};

const STOP_REASONS: Record<Completion["finish"], string> = {
  stop: "end_turn",
  length: "max_tokens",
  tool: "tool_use",
  stop_sequence: "stop_sequence",
};

/** Minimum `thinking.budget_tokens` the API accepts. */
const MIN_THINKING_BUDGET = 1024;

/** Content block types a message may carry; image and document count as media. */
const MEDIA_BLOCKS = new Set(["image", "document"]);
const IGNORED_BLOCKS = new Set([
  "thinking",
  "redacted_thinking",
  "server_tool_use",
  "web_search_tool_result",
  "web_fetch_tool_result",
  "code_execution_tool_result",
  "search_result",
  "container_upload",
]);
const BLOCK_TYPES = ["text", "image", "document", "tool_use", "tool_result", ...IGNORED_BLOCKS];

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function invalid(message: string): ParseResult {
  return { ok: false, error: { status: 400, kind: "invalid_request", message, param: null, code: null } };
}

function isResult<T>(value: T | ParseResult): value is ParseResult {
  return isObject(value) && typeof (value as { ok?: unknown }).ok === "boolean";
}

// ---------------------------------------------------------------------------------------
// Request

/** Text of `system` (a string or text blocks). */
function parseSystem(value: unknown): string | undefined | ParseResult {
  if (value === undefined || value === null) return undefined;
  if (typeof value === "string") return value;
  if (!Array.isArray(value)) return invalid("system: Input should be a valid string or a valid list");
  let text = "";
  for (let i = 0; i < value.length; i++) {
    const block: unknown = value[i];
    if (!isObject(block) || block["type"] !== "text") return invalid(`system.${i}.type: Input should be 'text'`);
    if (typeof block["text"] !== "string") return invalid(`system.${i}.text: Field required`);
    text += block["text"];
  }
  return text;
}

/** Text and media of a `tool_result` content (a string or text/image blocks). */
function toolResultContent(at: string, content: unknown): { text: string; media: number } | ParseResult {
  if (content === undefined || content === null) return { text: "", media: 0 };
  if (typeof content === "string") return { text: content, media: 0 };
  if (!Array.isArray(content)) return invalid(`${at}: Input should be a valid string or a valid list`);
  let text = "";
  let media = 0;
  for (const block of content) {
    if (!isObject(block)) return invalid(`${at}: Input should be a valid list of content blocks`);
    if (typeof block["text"] === "string") text += block["text"];
    else media++;
  }
  return { text, media };
}

/**
 * Messages as neutral turns, shaped like the equivalent Chat conversation so text and
 * prompt count match: `tool_use` blocks join their assistant turn as name + JSON input
 * (Chat's tool call), each `tool_result` becomes a `tool` turn placed where Chat puts tool
 * messages (before the rest of that user turn). Thinking blocks are not counted: the API
 * drops earlier turns' thinking from the context.
 */
function parseMessages(value: unknown): NeutralMessage[] | ParseResult {
  if (value === undefined || value === null) return invalid("messages: Field required");
  if (!Array.isArray(value)) return invalid("messages: Input should be a valid list");
  if (value.length === 0) return invalid("messages: at least one message is required");
  const out: NeutralMessage[] = [];
  for (let i = 0; i < value.length; i++) {
    const at = `messages.${i}`;
    const message: unknown = value[i];
    if (!isObject(message)) return invalid(`${at}: Input should be a valid dictionary`);
    const role = message["role"];
    if (role === undefined) return invalid(`${at}.role: Field required`);
    if (role === "system") {
      return invalid(
        'messages: Unexpected role "system". The Messages API accepts a top-level `system` parameter, not "system" as an input message role.',
      );
    }
    if (role !== "user" && role !== "assistant") return invalid(`${at}.role: Input should be 'user' or 'assistant'`);
    const content = message["content"];
    if (content === undefined) return invalid(`${at}.content: Field required`);
    if (typeof content === "string") {
      out.push({ role, text: content, media: 0 });
      continue;
    }
    if (!Array.isArray(content)) return invalid(`${at}.content: Input should be a valid string or a valid list`);
    let text = "";
    let media = 0;
    for (let j = 0; j < content.length; j++) {
      const where = `${at}.content.${j}`;
      const block: unknown = content[j];
      if (!isObject(block)) return invalid(`${where}: Input should be a valid dictionary or object to extract fields from`);
      const type = block["type"];
      if (typeof type !== "string" || !BLOCK_TYPES.includes(type)) {
        return invalid(
          `${where}: Input tag '${String(type)}' found using 'type' does not match any of the expected tags: ${BLOCK_TYPES.map((t) => `'${t}'`).join(", ")}`,
        );
      }
      if (type === "text") {
        if (typeof block["text"] !== "string") return invalid(`${where}.text: Field required`);
        if (block["text"] === "") return invalid("messages: text content blocks must be non-empty");
        text += block["text"];
      } else if (MEDIA_BLOCKS.has(type)) {
        if (!isObject(block["source"])) return invalid(`${where}.${type}.source: Field required`);
        media++;
      } else if (type === "tool_use") {
        for (const field of ["id", "name"]) {
          if (typeof block[field] !== "string") return invalid(`${where}.tool_use.${field}: Field required`);
        }
        if (!isObject(block["input"])) return invalid(`${where}.tool_use.input: Input should be a valid dictionary`);
        text += `${String(block["name"])}${JSON.stringify(block["input"])}`;
      } else if (type === "tool_result") {
        if (typeof block["tool_use_id"] !== "string") return invalid(`${where}.tool_result.tool_use_id: Field required`);
        const result = toolResultContent(`${where}.tool_result.content`, block["content"]);
        if (isResult(result)) return result;
        out.push({ role: "tool", text: result.text, media: result.media });
      }
    }
    // A user turn of tool results only is the Chat tool messages and nothing more.
    if (text !== "" || media > 0 || !content.some((b) => isObject(b) && b["type"] === "tool_result")) {
      out.push({ role, text, media });
    }
  }
  return out;
}

function parseTools(value: unknown): ToolSpec[] | ParseResult {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) return invalid("tools: Input should be a valid list");
  const out: ToolSpec[] = [];
  for (let i = 0; i < value.length; i++) {
    const tool: unknown = value[i];
    if (!isObject(tool)) return invalid(`tools.${i}: Input should be a valid dictionary`);
    // Server tools (web_search_20250305, bash_20250124, …) are accepted and never called.
    const type = tool["type"];
    if (type !== undefined && type !== null && type !== "custom") continue;
    if (typeof tool["name"] !== "string") return invalid(`tools.${i}.custom.name: Field required`);
    if (!isObject(tool["input_schema"])) return invalid(`tools.${i}.custom.input_schema: Field required`);
    const description = typeof tool["description"] === "string" ? tool["description"] : undefined;
    out.push({ name: tool["name"], description, parameters: tool["input_schema"] });
  }
  return out;
}

function parseToolChoice(value: unknown, hasTools: boolean): ToolChoice | ParseResult {
  if (value === undefined || value === null) return { type: "auto" };
  if (!isObject(value)) return invalid("tool_choice: Input should be a valid dictionary");
  if (!hasTools) return invalid("tool_choice: tool_choice may only be specified while providing tools");
  switch (value["type"]) {
    case "auto":
      return { type: "auto" };
    case "none":
      return { type: "none" };
    case "any":
      return { type: "required" };
    case "tool":
      if (typeof value["name"] !== "string") return invalid("tool_choice.tool.name: Field required");
      return { type: "function", name: value["name"] };
    default:
      return invalid(
        `tool_choice: Input tag '${String(value["type"])}' found using 'type' does not match any of the expected tags: 'auto', 'any', 'tool', 'none'`,
      );
  }
}

function parseNumber(body: Json, param: string, min: number, max: number): ParseResult | undefined {
  const value = body[param];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number") return invalid(`${param}: Input should be a valid number`);
  if (value < min) return invalid(`${param}: Input should be greater than or equal to ${min}`);
  if (value > max) return invalid(`${param}: Input should be less than or equal to ${max}`);
  return undefined;
}

/** `thinking`: whether reasoning is shown as a thinking block; validates the budget (against the cap, when there is one). */
function parseThinking(value: unknown, maxTokens: number | undefined): boolean | ParseResult {
  if (value === undefined || value === null) return false;
  if (!isObject(value)) return invalid("thinking: Input should be a valid dictionary");
  const type = value["type"];
  if (type === "disabled") return false;
  if (type === "adaptive") return true;
  if (type !== "enabled") {
    return invalid(`thinking: Input tag '${String(type)}' found using 'type' does not match any of the expected tags: 'enabled', 'disabled', 'adaptive'`);
  }
  const budget = value["budget_tokens"];
  if (budget === undefined) return invalid("thinking.enabled.budget_tokens: Field required");
  if (typeof budget !== "number" || !Number.isInteger(budget)) return invalid("thinking.enabled.budget_tokens: Input should be a valid integer");
  if (budget < MIN_THINKING_BUDGET) {
    return invalid(`thinking.enabled.budget_tokens: Input should be greater than or equal to ${MIN_THINKING_BUDGET}`);
  }
  if (maxTokens !== undefined && maxTokens <= budget) {
    return invalid(
      "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size",
    );
  }
  return true;
}

/**
 * A Messages body, or (`counting`) a token-count body, which has no output cap: `max_tokens` is
 * then not required, and the thinking budget is not held against it.
 */
function parseBody(body: unknown, counting: boolean): ParseResult {
  if (!isObject(body)) return invalid("Input should be a valid dictionary or object to extract fields from");
  const model = body["model"];
  if (model === undefined || model === null) return invalid("model: Field required");
  if (typeof model !== "string" || model === "") return invalid("model: Input should be a valid string");
  const maxTokens = body["max_tokens"];
  let cap: number | undefined;
  if (maxTokens === undefined || maxTokens === null) {
    if (!counting) return invalid("max_tokens: Field required");
  } else {
    if (typeof maxTokens !== "number" || !Number.isInteger(maxTokens)) return invalid("max_tokens: Input should be a valid integer");
    if (maxTokens < 1) return invalid("max_tokens: Input should be greater than or equal to 1");
    cap = maxTokens;
  }

  const system = parseSystem(body["system"]);
  if (isResult(system)) return system;
  const turns = parseMessages(body["messages"]);
  if (isResult(turns)) return turns;
  // The separate system prompt is a first system turn, as in the equivalent Chat conversation.
  const messages = system === undefined ? turns : [{ role: "system", text: system, media: 0 }, ...turns];

  const tools = parseTools(body["tools"]);
  if (isResult(tools)) return tools;
  const toolChoice = parseToolChoice(body["tool_choice"], Array.isArray(body["tools"]) && body["tools"].length > 0);
  if (isResult(toolChoice)) return toolChoice;

  const stops = body["stop_sequences"];
  if (stops !== undefined && stops !== null && !(Array.isArray(stops) && stops.every((s) => typeof s === "string"))) {
    return invalid("stop_sequences: Input should be a valid list of strings");
  }
  for (const [param, min, max] of [["temperature", 0, 1], ["top_p", 0, 1], ["top_k", 0, Number.MAX_SAFE_INTEGER]] as const) {
    const error = parseNumber(body, param, min, max);
    if (error) return error;
  }
  const stream = body["stream"];
  if (stream !== undefined && stream !== null && typeof stream !== "boolean") return invalid("stream: Input should be a valid boolean");
  const metadata = body["metadata"];
  if (metadata !== undefined && metadata !== null && !isObject(metadata)) return invalid("metadata: Input should be a valid dictionary");
  const thinking = parseThinking(body["thinking"], cap);
  if (isResult(thinking)) return thinking;

  const request: GenerationRequest = {
    model,
    messages,
    tools,
    toolChoice,
    maxTokens: cap,
    stream: stream === true,
    streamUsage: true,
    directiveText: lastUserText(messages),
    stopSequences: Array.isArray(stops) ? (stops as string[]) : [],
    reasoningText: thinking,
  };
  return { ok: true, request };
}

function parse(body: unknown): ParseResult {
  return parseBody(body, false);
}

/** `anthropic-version` is required, whatever its value (SDKs send dates the simulator cannot vet). */
function checkHeaders(headers: IncomingHttpHeaders): SimError | undefined {
  const version = headers["anthropic-version"];
  if (typeof version === "string" && version.trim() !== "") return undefined;
  return { status: 400, kind: "invalid_request", message: "anthropic-version: header is required", param: null, code: null };
}

// ---------------------------------------------------------------------------------------
// Response

/** Anthropic's split: input excludes cache reads; output includes thinking. */
function usageJson(usage: Usage, outputTokens: number): Json {
  return {
    input_tokens: usage.promptTokens - usage.cachedTokens,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: usage.cachedTokens,
    cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 },
    output_tokens: outputTokens,
    service_tier: "standard",
  };
}

/** A stable placeholder signature for a thinking block. */
function signature(completion: Completion): string {
  return Buffer.from(`sluice-simulator:${completion.uid}:${completion.reasoning.length}`).toString("base64");
}

/** The tool input as an object; arguments cut by max_tokens do not parse and give `{}`. */
function toolInput(args: string): unknown {
  try {
    return JSON.parse(args);
  } catch {
    return {};
  }
}

function contentBlocks(completion: Completion): Json[] {
  const blocks: Json[] = [];
  if (completion.reasoning.length > 0) {
    blocks.push({ type: "thinking", thinking: completion.reasoning.join(""), signature: signature(completion) });
  }
  const call = completion.toolCall;
  if (call) blocks.push({ type: "tool_use", id: `toolu_${call.uid}`, name: call.name, input: toolInput(call.arguments) });
  else if (completion.tokens.length > 0) blocks.push({ type: "text", text: completion.tokens.join("") });
  return blocks;
}

function messageObject(completion: Completion, content: Json[], stopReason: string | null, usage: Json | undefined): Json {
  const message: Record<string, unknown> = {
    id: `msg_${completion.uid}`,
    type: "message",
    role: "assistant",
    model: completion.model,
    content,
    stop_reason: stopReason,
    stop_sequence: stopReason === null ? null : (completion.stopSequence ?? null),
    stop_details: null,
  };
  if (usage !== undefined) message["usage"] = usage;
  return message;
}

function renderBuffered(completion: Completion): string {
  const usage = completion.usage ? usageJson(completion.usage, completion.usage.completionTokens) : undefined;
  return JSON.stringify(messageObject(completion, contentBlocks(completion), STOP_REASONS[completion.finish], usage));
}

function event(type: string, data: Json): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
}

const PING = 'event: ping\ndata: {"type": "ping"}\n\n';

/**
 * message_start (empty content, input usage, output_tokens 1), one content block per
 * thinking / text / tool_use with a ping after the first block starts, one
 * content_block_delta per token or argument piece, then message_delta (stop reason,
 * cumulative usage) and message_stop. `omit-usage` leaves usage out of message_start
 * and message_delta alike.
 */
function renderStream(completion: Completion): StreamScript {
  const usage = completion.usage;
  const startUsage = usage ? usageJson(usage, Math.min(1, usage.completionTokens)) : undefined;
  let head = event("message_start", { message: messageObject(completion, [], null, startUsage) });
  let index = 0;
  let pinged = false;
  const ping = (): string => {
    if (pinged) return "";
    pinged = true;
    return PING;
  };

  if (completion.reasoning.length > 0) {
    head += event("content_block_start", { index, content_block: { type: "thinking", thinking: "", signature: "" } });
    head += ping();
    head += event("content_block_delta", { index, delta: { type: "thinking_delta", thinking: completion.reasoning.join("") } });
    head += event("content_block_delta", { index, delta: { type: "signature_delta", signature: signature(completion) } });
    head += event("content_block_stop", { index });
    index++;
  }

  const call = completion.toolCall;
  let pieces: string[] = [];
  let open = false;
  if (call) {
    head += event("content_block_start", { index, content_block: { type: "tool_use", id: `toolu_${call.uid}`, name: call.name, input: {} } });
    head += ping();
    head += event("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: "" } });
    pieces = call.pieces.map((p) => event("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: p } }));
    open = true;
  } else if (completion.tokens.length > 0) {
    head += event("content_block_start", { index, content_block: { type: "text", text: "" } });
    head += ping();
    pieces = completion.tokens.map((t) => event("content_block_delta", { index, delta: { type: "text_delta", text: t } }));
    open = true;
  } else {
    head += ping();
  }

  let tail = open ? event("content_block_stop", { index }) : "";
  const delta: Record<string, unknown> = {
    delta: { stop_reason: STOP_REASONS[completion.finish], stop_sequence: completion.stopSequence ?? null, stop_details: null },
  };
  if (usage) {
    delta["usage"] = {
      input_tokens: usage.promptTokens - usage.cachedTokens,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: usage.cachedTokens,
      output_tokens: usage.completionTokens,
    };
  }
  tail += event("message_delta", delta);
  tail += event("message_stop", {});

  // A failure after the headers is an `error` event, after which the stream ends.
  const error = (e: SimError): string => event("error", { error: { type: ERROR_TYPES[e.kind], message: MESSAGES[e.kind] ?? e.message } });
  return { head, pieces, tail, error };
}

function renderError(error: SimError, requestId: string): string {
  return JSON.stringify({
    type: "error",
    error: { type: ERROR_TYPES[error.kind], message: MESSAGES[error.kind] ?? error.message },
    request_id: requestId,
  });
}

function malformedJson(): SimError {
  return { status: 400, kind: "invalid_request", message: "The request body is not valid JSON.", param: null, code: null };
}

function authError(given: string | undefined): SimError {
  const message = given === undefined ? "x-api-key header is required" : "invalid x-api-key";
  return { status: 401, kind: "authentication", message, param: null, code: null };
}

/** The Anthropic Messages wire format. */
export const anthropicMessages: WireFormat = {
  name: "anthropic-messages",
  path: "/v1/messages",
  requestIdHeader: "request-id",
  heartbeat: PING,
  checkHeaders,
  parse,
  malformedJson,
  authError,
  renderError,
  renderBuffered,
  renderStream,
};

// ---------------------------------------------------------------------------------------
// Token counting

const COUNT_TOKENS_PATH = "/v1/messages/count_tokens";

/**
 * A token-count body is a Messages body without `max_tokens`; the answer is the `input_tokens`
 * the same conversation's message would report with no cache reads (the prompt count), so a test
 * can predict it with `countPromptTokens`. Output-only parameters are accepted and ignored.
 */
function parseCount(body: unknown): { readonly ok: true; readonly call: JsonCall } | Rejected {
  const parsed = parseBody(body, true);
  if (!parsed.ok) return parsed;
  const request = parsed.request;
  const inputTokens = countPromptTokens(request);
  return {
    ok: true,
    call: {
      model: request.model,
      directiveText: request.directiveText,
      // Apart from the message of the same conversation, so `times` counts each endpoint on its own.
      seed: hashTexts([COUNT_TOKENS_PATH, conversationHash(request.messages).toString(16)]),
      render: () => JSON.stringify({ input_tokens: inputTokens }),
    },
  };
}

/** `POST /v1/messages/count_tokens`, in Anthropic's envelope (and needing `anthropic-version`). */
export const anthropicCountTokens: JsonEndpoint = { path: COUNT_TOKENS_PATH, envelope: anthropicMessages, parse: parseCount };

// ---------------------------------------------------------------------------------------
// Models

/** Fixed so listings are byte-stable across runs (the OpenAI listing's `created`). */
const CREATED_AT = new Date(1_700_000_000_000).toISOString().replace(".000Z", "Z");

function modelInfo(id: string): Json {
  return { type: "model", id, display_name: id, created_at: CREATED_AT };
}

/**
 * `GET /v1/models` for Anthropic clients: `{ data, has_more, first_id, last_id }`, paged
 * by `limit` (default 20, 1–1000), `after_id` and `before_id`.
 */
export function renderAnthropicModelList(ids: readonly string[], query: URLSearchParams): string | SimError {
  const limitText = query.get("limit");
  const limit = limitText === null ? 20 : Number(limitText);
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
    return { status: 400, kind: "invalid_request", message: "limit: Input should be greater than or equal to 1 and less than or equal to 1000", param: null, code: null };
  }
  const after = query.get("after_id");
  const before = query.get("before_id");
  let page: readonly string[];
  let hasMore: boolean;
  if (before !== null) {
    const end = Math.max(0, ids.indexOf(before));
    const start = Math.max(0, end - limit);
    page = ids.slice(start, end);
    hasMore = start > 0;
  } else {
    const start = after === null ? 0 : ids.indexOf(after) + 1;
    page = after !== null && start === 0 ? [] : ids.slice(start, start + limit);
    hasMore = start + limit < ids.length && page.length > 0;
  }
  return JSON.stringify({ data: page.map(modelInfo), has_more: hasMore, first_id: page[0] ?? null, last_id: page.at(-1) ?? null });
}

/** `GET /v1/models/{id}` for Anthropic clients. */
export function renderAnthropicModel(id: string): string {
  return JSON.stringify(modelInfo(id));
}

/** Anthropic's answer for a model id it does not list. */
export function anthropicModelNotFound(id: string): SimError {
  return { status: 404, kind: "not_found", message: `model: ${id}`, param: null, code: null };
}
