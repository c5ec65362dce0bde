/**
 * OpenAI Chat Completions (`POST /v1/chat/completions`): request validation with OpenAI's
 * error messages, and rendering of `chat.completion` / `chat.completion.chunk` objects.
 */

import type {
  Completion,
  GenerationRequest,
  NeutralMessage,
  ParseResult,
  SimError,
  StreamScript,
  ToolChoice,
  ToolSpec,
  Usage,
  WireFormat,
} from "../wire-format.ts";
import { lastUserText } from "../generate.ts";
import {
  authError,
  flattenParts,
  invalid,
  isObject,
  isResult,
  malformedJson,
  missing,
  modelRequired,
  openaiErrorType,
  parseInteger,
  renderError,
  wrongType,
} from "./openai-shared.ts";
import type { Json } from "./openai-shared.ts";

const ROLES = new Set(["system", "developer", "user", "assistant", "tool", "function"]);

const FINISH: Record<Completion["finish"], string> = { stop: "stop", length: "length", tool: "tool_calls", stop_sequence: "stop" };

/** Fixed so responses stay byte-stable apart from ids and timestamps. */
const FINGERPRINT = "fp_sluicesim";

/** Text and media count of a `content` value (string, parts array or null). */
function flattenContent(content: unknown): { text: string; media: number } | undefined {
  if (content === null || content === undefined) return { text: "", media: 0 };
  if (typeof content === "string") return { text: content, media: 0 };
  if (!Array.isArray(content)) return undefined;
  return flattenParts(content);
}

function parseMessages(value: unknown): NeutralMessage[] | ParseResult {
  if (value === undefined) return missing("messages");
  if (!Array.isArray(value)) return wrongType("messages", "an array of objects", value);
  if (value.length === 0) {
    return invalid(
      "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
      "messages",
      "empty_array",
    );
  }
  const out: NeutralMessage[] = [];
  for (let i = 0; i < value.length; i++) {
    const at = `messages[${i}]`;
    const message: unknown = value[i];
    if (!isObject(message)) return wrongType(at, "an object", message);
    const role = message["role"];
    if (role === undefined) return missing(`${at}.role`);
    if (typeof role !== "string" || !ROLES.has(role)) {
      return invalid(
        `Invalid value: '${String(role)}'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.`,
        `${at}.role`,
        "invalid_value",
      );
    }
    const content = message["content"];
    if (content === undefined && role !== "assistant") return missing(`${at}.content`);
    const flat = flattenContent(content);
    if (flat === undefined) return wrongType(`${at}.content`, "a string or an array of content parts", content);
    let text = flat.text;
    const toolCalls = message["tool_calls"];
    if (Array.isArray(toolCalls)) {
      for (const call of toolCalls) {
        const fn = isObject(call) ? call["function"] : undefined;
        if (isObject(fn)) text += `${String(fn["name"] ?? "")}${String(fn["arguments"] ?? "")}`;
      }
    }
    out.push({ role, text, media: flat.media });
  }
  return out;
}

function parseTools(value: unknown): ToolSpec[] | ParseResult {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) return wrongType("tools", "an array of objects", value);
  const out: ToolSpec[] = [];
  for (let i = 0; i < value.length; i++) {
    const tool: unknown = value[i];
    if (!isObject(tool)) return wrongType(`tools[${i}]`, "an object", tool);
    // Non-function tool types (custom, …) are accepted and never called.
    if (tool["type"] !== undefined && tool["type"] !== "function") continue;
    const fn = tool["function"];
    if (!isObject(fn)) return missing(`tools[${i}].function`);
    if (typeof fn["name"] !== "string") return missing(`tools[${i}].function.name`);
    const description = typeof fn["description"] === "string" ? fn["description"] : undefined;
    out.push({ name: fn["name"], description, parameters: fn["parameters"] });
  }
  return out;
}

function parseToolChoice(value: unknown, hasTools: boolean): ToolChoice | ParseResult {
  if (value === undefined || value === null) return { type: "auto" };
  if (!hasTools) {
    return invalid(
      "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
      "tool_choice",
      null,
    );
  }
  if (value === "auto" || value === "none" || value === "required") return { type: value };
  if (isObject(value) && value["type"] === "function" && isObject(value["function"])) {
    const name = value["function"]["name"];
    if (typeof name === "string") return { type: "function", name };
  }
  return invalid(
    `Invalid value for 'tool_choice': expected 'none', 'auto', 'required' or a named function.`,
    "tool_choice",
    "invalid_value",
  );
}

function parse(body: unknown): ParseResult {
  if (!isObject(body)) return wrongType("body", "an object", body);
  const model = body["model"];
  if (typeof model !== "string" || model === "") return modelRequired();

  const messages = parseMessages(body["messages"]);
  if (isResult(messages)) return messages;
  const tools = parseTools(body["tools"]);
  if (isResult(tools)) return tools;
  const toolChoice = parseToolChoice(body["tool_choice"], Array.isArray(body["tools"]) && body["tools"].length > 0);
  if (isResult(toolChoice)) return toolChoice;
  const maxCompletion = parseInteger(body, "max_completion_tokens", 1);
  if (isResult(maxCompletion)) return maxCompletion;
  const maxTokens = parseInteger(body, "max_tokens", 1);
  if (isResult(maxTokens)) return maxTokens;

  const stream = body["stream"];
  if (stream !== undefined && stream !== null && typeof stream !== "boolean") return wrongType("stream", "a boolean", stream);
  const logprobs = body["logprobs"];
  if (logprobs !== undefined && logprobs !== null && typeof logprobs !== "boolean") return wrongType("logprobs", "a boolean", logprobs);
  const topLogprobs = parseInteger(body, "top_logprobs", 0);
  if (isResult(topLogprobs)) return topLogprobs;
  if (topLogprobs !== undefined && topLogprobs > 20) return invalid(`Invalid 'top_logprobs': integer above maximum value. Expected a value <= 20, but got ${topLogprobs} instead.`, "top_logprobs", "integer_above_max_value");
  if (topLogprobs !== undefined && logprobs !== true) return invalid("Using top_logprobs requires logprobs to be set to true.", "top_logprobs", null);
  const streamOptions = body["stream_options"];
  if (streamOptions !== undefined && streamOptions !== null) {
    if (stream !== true) {
      return invalid("The 'stream_options' parameter is only allowed when 'stream' is enabled.", "stream_options", null);
    }
    if (!isObject(streamOptions)) return wrongType("stream_options", "an object", streamOptions);
  }

  const request: GenerationRequest = {
    model,
    messages,
    tools,
    toolChoice,
    maxTokens: maxCompletion ?? maxTokens,
    stream: stream === true,
    streamUsage: isObject(streamOptions) && streamOptions["include_usage"] === true,
    directiveText: lastUserText(messages),
    logprobs: logprobs === true ? (topLogprobs ?? 0) : undefined,
  };
  return { ok: true, request };
}

function usageJson(usage: Usage): Json {
  return {
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.promptTokens + usage.completionTokens,
    prompt_tokens_details: { cached_tokens: usage.cachedTokens, audio_tokens: 0 },
    completion_tokens_details: {
      reasoning_tokens: usage.reasoningTokens,
      audio_tokens: 0,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
    },
  };
}

/** A buffered choice's `logprobs`: null unless the request asked (`logprobs: true`). */
function logprobsJson(completion: Completion): unknown {
  if (completion.logprobs === undefined) return null;
  const bytes = (token: string) => [...new TextEncoder().encode(token)];
  return {
    content: completion.logprobs.map((t) => ({ token: t.token, logprob: t.logprob, bytes: bytes(t.token), top_logprobs: t.top.map((a) => ({ token: a.token, logprob: a.logprob, bytes: bytes(a.token) })) })),
    refusal: null,
  };
}

function renderBuffered(completion: Completion): string {
  const call = completion.toolCall;
  const message = call
    ? {
        role: "assistant",
        content: null,
        tool_calls: [{ id: `call_${call.uid}`, type: "function", function: { name: call.name, arguments: call.arguments } }],
        refusal: null,
        annotations: [],
      }
    : { role: "assistant", content: completion.tokens.join(""), refusal: null, annotations: [] };
  const body: Record<string, unknown> = {
    id: `chatcmpl-${completion.uid}`,
    object: "chat.completion",
    created: completion.created,
    model: completion.model,
    choices: [{ index: 0, message, logprobs: logprobsJson(completion), finish_reason: FINISH[completion.finish] }],
  };
  if (completion.usage) body["usage"] = usageJson(completion.usage);
  body["service_tier"] = "default";
  body["system_fingerprint"] = FINGERPRINT;
  return JSON.stringify(body);
}

/**
 * Chunks are built by string concatenation around a shared prefix: a stream of N tokens
 * otherwise costs N object graphs and N full serialisations.
 */
function renderStream(completion: Completion, request: GenerationRequest): StreamScript {
  const includeUsage = request.streamUsage;
  const prefix =
    `data: {"id":"chatcmpl-${completion.uid}","object":"chat.completion.chunk","created":${completion.created},` +
    `"model":${JSON.stringify(completion.model)},"service_tier":"default","system_fingerprint":"${FINGERPRINT}","choices":[`;
  const suffix = includeUsage ? `],"usage":null}\n\n` : `]}\n\n`;
  const choice = (delta: string, finish: string | null): string =>
    `${prefix}{"index":0,"delta":${delta},"logprobs":null,"finish_reason":${finish === null ? "null" : `"${finish}"`}}${suffix}`;

  const call = completion.toolCall;
  let head: string;
  let pieces: string[];
  if (call) {
    const opening =
      `[{"index":0,"id":"call_${call.uid}","type":"function","function":{"name":${JSON.stringify(call.name)},"arguments":""}}]`;
    head = choice(`{"role":"assistant","content":null,"tool_calls":${opening},"refusal":null}`, null);
    pieces = call.pieces.map((p) => choice(`{"tool_calls":[{"index":0,"function":{"arguments":${JSON.stringify(p)}}}]}`, null));
  } else {
    head = choice(`{"role":"assistant","content":"","refusal":null}`, null);
    pieces = completion.tokens.map((t) => choice(`{"content":${JSON.stringify(t)}}`, null));
  }

  let tail = choice("{}", FINISH[completion.finish]);
  if (includeUsage && completion.usage) tail += `${prefix}],"usage":${JSON.stringify(usageJson(completion.usage))}}\n\n`;
  tail += "data: [DONE]\n\n";
  // OpenAI reports a failure after the headers as a data line with an `error` object and
  // ends the stream without [DONE]; the official client raises it as an APIError.
  const error = (e: SimError): string =>
    `data: ${JSON.stringify({ error: { message: e.message, type: openaiErrorType(e.kind), param: e.param, code: e.code } })}\n\n`;
  return { head, pieces, tail, error };
}

/** The OpenAI Chat Completions wire format. */
export const openaiChat: WireFormat = {
  name: "openai-chat",
  path: "/v1/chat/completions",
  requestIdHeader: "x-request-id",
  heartbeat: ": keep-alive\n\n",
  parse,
  malformedJson,
  authError,
  renderError: (error) => renderError(error),
  renderBuffered,
  renderStream,
};
