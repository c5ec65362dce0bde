/**
 * OpenAI Responses (`POST /v1/responses`): request validation with OpenAI's error
 * messages, and rendering of `response` objects and their typed SSE events.
 *
 * Nothing is stored: `store` is accepted and echoed, and a `previous_response_id` or
 * `conversation` is answered as not found, which is what the API says for ids it does
 * not know.
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
  invalidValue,
  isObject,
  isResult,
  malformedJson,
  missing,
  parseInteger,
  renderError,
  wrongType,
} from "./openai-shared.ts";
import type { Json } from "./openai-shared.ts";

/** The API refuses smaller output caps. */
const MIN_OUTPUT_TOKENS = 16;

const MESSAGE_ROLES = ["assistant", "system", "developer", "user"] as const;
const TEXT_PARTS = new Set(["input_text", "output_text"]);
const MEDIA_PARTS = new Set(["input_image", "input_file", "input_audio"]);
const PART_TYPES = ["input_text", "input_image", "input_file", "input_audio", "output_text", "refusal"];
const FORMAT_TYPES = ["text", "json_object", "json_schema"];

/** What the response object echoes from the request. */
interface Echo {
  readonly instructions: string | null;
  readonly maxOutputTokens: number | null;
  readonly metadata: Json;
  readonly parallelToolCalls: boolean;
  readonly reasoning: Json;
  readonly store: boolean;
  readonly temperature: number;
  readonly text: Json;
  readonly toolChoice: unknown;
  readonly tools: readonly unknown[];
  readonly topP: number;
  readonly user: string | null;
  /** `stream_options.include_obfuscation` (default true). */
  readonly obfuscation: boolean;
}

// ---------------------------------------------------------------------------------------
// Request

/** Text and media of a message's `content` (string or parts) or a tool output. */
function flattenContent(at: string, content: unknown): { text: string; media: number } | ParseResult {
  if (typeof content === "string") return { text: content, media: 0 };
  if (!Array.isArray(content)) return wrongType(at, "a string or an array of content parts", content);
  for (let j = 0; j < content.length; j++) {
    const part: unknown = content[j];
    if (!isObject(part)) return wrongType(`${at}[${j}]`, "an object", part);
    const type = part["type"];
    if (typeof type !== "string" || !(TEXT_PARTS.has(type) || MEDIA_PARTS.has(type) || type === "refusal")) {
      return invalidValue(`${at}[${j}].type`, type, PART_TYPES);
    }
  }
  return flattenParts(content) ?? wrongType(at, "an array of content parts", content);
}

/**
 * Input items as neutral turns, shaped like the equivalent Chat conversation so the
 * text and prompt count match: a `function_call` joins the assistant turn right before
 * it (Chat puts tool calls on the assistant message), a `function_call_output` is a
 * `tool` turn. Reasoning items and other item types are accepted and not counted.
 */
function parseInput(value: unknown, out: NeutralMessage[]): ParseResult | undefined {
  if (value === undefined || value === null) return missing("input");
  if (typeof value === "string") {
    out.push({ role: "user", text: value, media: 0 });
    return undefined;
  }
  if (!Array.isArray(value)) return wrongType("input", "a string or an array of input items", value);
  for (let i = 0; i < value.length; i++) {
    const at = `input[${i}]`;
    const item: unknown = value[i];
    if (!isObject(item)) return wrongType(at, "an object", item);
    const type = item["type"] ?? ("role" in item ? "message" : undefined);
    if (type === undefined) return missing(`${at}.type`);
    if (typeof type !== "string") return wrongType(`${at}.type`, "a string", type);
    if (type === "message") {
      const role = item["role"];
      if (role === undefined) return missing(`${at}.role`);
      if (typeof role !== "string" || !(MESSAGE_ROLES as readonly string[]).includes(role)) {
        return invalidValue(`${at}.role`, role, MESSAGE_ROLES);
      }
      if (item["content"] === undefined) return missing(`${at}.content`);
      const flat = flattenContent(`${at}.content`, item["content"]);
      if (isResult(flat)) return flat;
      out.push({ role, text: flat.text, media: flat.media });
    } else if (type === "function_call") {
      for (const field of ["call_id", "name", "arguments"]) {
        if (item[field] === undefined) return missing(`${at}.${field}`);
        if (typeof item[field] !== "string") return wrongType(`${at}.${field}`, "a string", item[field]);
      }
      const call = `${String(item["name"])}${String(item["arguments"])}`;
      const last = out.at(-1);
      if (last !== undefined && last.role === "assistant") out[out.length - 1] = { ...last, text: last.text + call };
      else out.push({ role: "assistant", text: call, media: 0 });
    } else if (type === "function_call_output") {
      if (item["call_id"] === undefined) return missing(`${at}.call_id`);
      if (item["output"] === undefined) return missing(`${at}.output`);
      const flat = flattenContent(`${at}.output`, item["output"]);
      if (isResult(flat)) return flat;
      out.push({ role: "tool", text: flat.text, media: flat.media });
    }
    // reasoning, item_reference and hosted-tool items: accepted, not part of the count.
  }
  return undefined;
}

function parseTools(value: unknown): { specs: ToolSpec[]; echo: unknown[] } | ParseResult {
  if (value === undefined || value === null) return { specs: [], echo: [] };
  if (!Array.isArray(value)) return wrongType("tools", "an array of objects", value);
  const specs: ToolSpec[] = [];
  const echo: unknown[] = [];
  for (let i = 0; i < value.length; i++) {
    const tool: unknown = value[i];
    if (!isObject(tool)) return wrongType(`tools[${i}]`, "an object", tool);
    if (tool["type"] === undefined) return missing(`tools[${i}].type`);
    // Hosted and custom tools (web_search, file_search, …) are accepted and never called.
    if (tool["type"] !== "function") {
      echo.push(tool);
      continue;
    }
    const name = tool["name"];
    if (name === undefined) return missing(`tools[${i}].name`);
    if (typeof name !== "string") return wrongType(`tools[${i}].name`, "a string", name);
    const description = typeof tool["description"] === "string" ? tool["description"] : undefined;
    const parameters = tool["parameters"] ?? null;
    specs.push({ name, description, parameters: parameters ?? undefined });
    // The API echoes function tools with their defaults filled in (strict defaults to true).
    echo.push({ type: "function", name, description: description ?? null, parameters, strict: tool["strict"] ?? true });
  }
  return { specs, echo };
}

function parseToolChoice(value: unknown): ToolChoice | ParseResult {
  if (value === undefined || value === null) return { type: "auto" };
  if (value === "auto" || value === "none" || value === "required") return { type: value };
  if (typeof value === "string") return invalidValue("tool_choice", value, ["none", "auto", "required"]);
  if (!isObject(value)) return wrongType("tool_choice", "a string or an object", value);
  const type = value["type"];
  if (type === "function") {
    const name = value["name"];
    if (typeof name !== "string") return missing("tool_choice.name");
    return { type: "function", name };
  }
  if (type === "allowed_tools") return { type: value["mode"] === "required" ? "required" : "auto" };
  if (typeof type !== "string") return missing("tool_choice.type");
  return { type: "auto" }; // a hosted tool type: never called here
}

/** A number parameter within [min, max], or absent/null. */
function parseNumber(body: Json, param: string, min: number, max: number): number | undefined | ParseResult {
  const value = body[param];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number") return wrongType(param, "a decimal", value);
  if (value < min) {
    return invalid(
      `Invalid '${param}': decimal below minimum value. Expected a value >= ${min}, but got ${value} instead.`,
      param,
      "decimal_below_min_value",
    );
  }
  if (value > max) {
    return invalid(
      `Invalid '${param}': decimal above maximum value. Expected a value <= ${max}, but got ${value} instead.`,
      param,
      "decimal_above_max_value",
    );
  }
  return value;
}

function parseBoolean(body: Json, param: string): boolean | undefined | ParseResult {
  const value = body[param];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "boolean") return wrongType(param, "a boolean", value);
  return value;
}

function parseText(value: unknown): Json | ParseResult {
  if (value === undefined || value === null) return { format: { type: "text" }, verbosity: "medium" };
  if (!isObject(value)) return wrongType("text", "an object", value);
  const format = value["format"] ?? { type: "text" };
  if (!isObject(format)) return wrongType("text.format", "an object", format);
  const type = format["type"];
  if (typeof type !== "string" || !FORMAT_TYPES.includes(type)) return invalidValue("text.format.type", type, FORMAT_TYPES);
  if (type === "json_schema") {
    if (typeof format["name"] !== "string") return missing("text.format.name");
    if (!isObject(format["schema"])) return missing("text.format.schema");
  }
  return { format, verbosity: value["verbosity"] ?? "medium" };
}

function parse(body: unknown): ParseResult {
  if (!isObject(body)) return wrongType("body", "an object", body);
  const model = body["model"];
  if (model === undefined || model === null) return missing("model");
  if (typeof model !== "string") return wrongType("model", "a string", model);
  if (model === "") {
    return invalid("Invalid 'model': empty string. Expected a string with minimum length 1, but got an empty string instead.", "model", "empty_string");
  }
  const previous = body["previous_response_id"];
  if (typeof previous === "string") {
    return invalid(`Previous response with id '${previous}' not found.`, "previous_response_id", "previous_response_not_found");
  }
  const conversation = body["conversation"];
  if (conversation !== undefined && conversation !== null) {
    const id = isObject(conversation) ? String(conversation["id"]) : String(conversation);
    return { ok: false, error: { status: 404, kind: "not_found", message: `Conversation with id '${id}' not found.`, param: "conversation", code: null } };
  }

  const instructions = body["instructions"];
  if (instructions !== undefined && instructions !== null && typeof instructions !== "string") {
    return wrongType("instructions", "a string", instructions);
  }
  // Instructions are a system turn placed first, as in the equivalent Chat conversation.
  const messages: NeutralMessage[] = typeof instructions === "string" ? [{ role: "system", text: instructions, media: 0 }] : [];
  const inputError = parseInput(body["input"], messages);
  if (inputError !== undefined) return inputError;

  const tools = parseTools(body["tools"]);
  if (isResult(tools)) return tools;
  const toolChoice = parseToolChoice(body["tool_choice"]);
  if (isResult(toolChoice)) return toolChoice;
  const maxOutputTokens = parseInteger(body, "max_output_tokens", MIN_OUTPUT_TOKENS);
  if (isResult(maxOutputTokens)) return maxOutputTokens;
  const temperature = parseNumber(body, "temperature", 0, 2);
  if (isResult(temperature)) return temperature;
  const topP = parseNumber(body, "top_p", 0, 1);
  if (isResult(topP)) return topP;
  const text = parseText(body["text"]);
  if (isResult(text)) return text;

  const flags: Record<string, boolean | undefined> = {};
  for (const param of ["stream", "store", "parallel_tool_calls", "background"]) {
    const value = parseBoolean(body, param);
    if (isResult(value)) return value;
    flags[param] = value;
  }
  const streamOptions = body["stream_options"];
  if (streamOptions !== undefined && streamOptions !== null) {
    if (flags["stream"] !== true) {
      return invalid("The 'stream_options' parameter is only allowed when 'stream' is enabled.", "stream_options", null);
    }
    if (!isObject(streamOptions)) return wrongType("stream_options", "an object", streamOptions);
  }
  const metadata = body["metadata"];
  if (metadata !== undefined && metadata !== null && !isObject(metadata)) return wrongType("metadata", "an object", metadata);
  const reasoning = body["reasoning"];
  if (reasoning !== undefined && reasoning !== null && !isObject(reasoning)) return wrongType("reasoning", "an object", reasoning);

  const echo: Echo = {
    instructions: typeof instructions === "string" ? instructions : null,
    maxOutputTokens: maxOutputTokens ?? null,
    metadata: isObject(metadata) ? metadata : {},
    parallelToolCalls: flags["parallel_tool_calls"] ?? true,
    reasoning: { effort: isObject(reasoning) ? (reasoning["effort"] ?? null) : null, summary: isObject(reasoning) ? (reasoning["summary"] ?? null) : null },
    store: flags["store"] ?? true,
    temperature: temperature ?? 1,
    text,
    toolChoice: body["tool_choice"] ?? "auto",
    tools: tools.echo,
    topP: topP ?? 1,
    user: typeof body["user"] === "string" ? body["user"] : null,
    obfuscation: !(isObject(streamOptions) && streamOptions["include_obfuscation"] === false),
  };
  const request: GenerationRequest = {
    model,
    messages,
    tools: tools.specs,
    toolChoice,
    maxTokens: maxOutputTokens,
    stream: flags["stream"] === true,
    streamUsage: true,
    directiveText: lastUserText(messages),
    echo,
  };
  return { ok: true, request };
}

// ---------------------------------------------------------------------------------------
// Response

function usageJson(usage: Usage): Json {
  return {
    input_tokens: usage.promptTokens,
    input_tokens_details: { cached_tokens: usage.cachedTokens },
    output_tokens: usage.completionTokens,
    output_tokens_details: { reasoning_tokens: usage.reasoningTokens },
    total_tokens: usage.promptTokens + usage.completionTokens,
  };
}

type Status = "completed" | "incomplete";

/** Output item ids, stable within one response. */
function ids(completion: Completion) {
  return { response: `resp_${completion.uid}`, message: `msg_${completion.uid}`, call: `fc_${completion.uid}`, reasoning: `rs_${completion.uid}` };
}

/** A reasoning item is listed first when the model spent reasoning tokens (no summary asked). */
function reasoningItem(completion: Completion): Json | undefined {
  return completion.reasoningTokens > 0 ? { id: ids(completion).reasoning, type: "reasoning", summary: [] } : undefined;
}

function textPart(text: string): Json {
  return { type: "output_text", annotations: [], logprobs: [], text };
}

/** The message or function_call item as it stands with `text` / `args` produced, with `status`. */
function answerItem(completion: Completion, status: "in_progress" | Status, produced: string): Json {
  const id = ids(completion);
  const call = completion.toolCall;
  if (call) {
    return { id: id.call, type: "function_call", status, arguments: produced, call_id: `call_${call.uid}`, name: call.name };
  }
  return { id: id.message, type: "message", status, content: status === "in_progress" ? [] : [textPart(produced)], role: "assistant" };
}

function finalStatus(completion: Completion): Status {
  return completion.finish === "length" ? "incomplete" : "completed";
}

function produced(completion: Completion): string {
  return completion.toolCall ? completion.toolCall.arguments : completion.tokens.join("");
}

/** The response object in one of its lifecycle states. */
function responseObject(
  completion: Completion,
  request: GenerationRequest,
  state: "in_progress" | "completed" | "incomplete" | "failed",
  output: readonly Json[],
  error: Json | null,
): Json {
  const echo = request.echo as Echo;
  const done = state === "completed" || state === "incomplete";
  return {
    id: ids(completion).response,
    object: "response",
    created_at: completion.created,
    status: state,
    access_programs: null,
    background: false,
    completed_at: state === "completed" ? completion.created : null,
    error,
    incomplete_details: state === "incomplete" ? { reason: "max_output_tokens" } : null,
    instructions: echo.instructions,
    max_output_tokens: echo.maxOutputTokens,
    max_tool_calls: null,
    model: completion.model,
    output,
    parallel_tool_calls: echo.parallelToolCalls,
    previous_response_id: null,
    prompt_cache_key: null,
    reasoning: echo.reasoning,
    safety_identifier: null,
    service_tier: "default",
    store: echo.store,
    temperature: echo.temperature,
    text: echo.text,
    tool_choice: echo.toolChoice,
    tools: echo.tools,
    top_logprobs: 0,
    top_p: echo.topP,
    truncation: "disabled",
    usage: done && completion.usage ? usageJson(completion.usage) : null,
    user: echo.user,
    metadata: echo.metadata,
  };
}

function finalOutput(completion: Completion): Json[] {
  const reasoning = reasoningItem(completion);
  const answer = answerItem(completion, finalStatus(completion), produced(completion));
  return reasoning ? [reasoning, answer] : [answer];
}

function renderBuffered(completion: Completion, request: GenerationRequest): string {
  return JSON.stringify(responseObject(completion, request, finalStatus(completion), finalOutput(completion), null));
}

/** One typed SSE event: `event:` line named after its `type`, fields after the type and sequence number. */
function frame(type: string, sequence: number, fields: Json): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence, ...fields })}\n\n`;
}

/** Padding the API adds to delta events (unless `include_obfuscation` is false); fixed here. */
const PADDING = "Zx4pQ7mW2kR9tL5v";

function obfuscation(delta: string): string {
  return PADDING.slice(0, Math.max(1, PADDING.length - delta.length));
}

/**
 * response.created, response.in_progress, [reasoning item added/done], the answer item
 * added (+ content_part.added for a message); one delta event per token or argument
 * piece; then the done events and response.completed / response.incomplete.
 */
function renderStream(completion: Completion, request: GenerationRequest): StreamScript {
  const echo = request.echo as Echo;
  const id = ids(completion);
  const call = completion.toolCall;
  let seq = 0;
  const reasoning = reasoningItem(completion);
  const index = reasoning ? 1 : 0;

  let head = frame("response.created", seq++, { response: responseObject(completion, request, "in_progress", [], null) });
  head += frame("response.in_progress", seq++, { response: responseObject(completion, request, "in_progress", [], null) });
  if (reasoning) {
    head += frame("response.output_item.added", seq++, { output_index: 0, item: reasoning });
    head += frame("response.output_item.done", seq++, { output_index: 0, item: reasoning });
  }
  head += frame("response.output_item.added", seq++, { output_index: index, item: answerItem(completion, "in_progress", "") });
  if (!call) {
    head += frame("response.content_part.added", seq++, { item_id: id.message, output_index: index, content_index: 0, part: textPart("") });
  }

  const first = seq;
  const pad = (delta: string): Json => (echo.obfuscation ? { obfuscation: obfuscation(delta) } : {});
  const pieces = call
    ? call.pieces.map((delta) =>
        frame("response.function_call_arguments.delta", seq++, { item_id: id.call, output_index: index, delta, ...pad(delta) }),
      )
    : completion.tokens.map((delta) =>
        frame("response.output_text.delta", seq++, {
          item_id: id.message,
          output_index: index,
          content_index: 0,
          delta,
          logprobs: [],
          ...pad(delta),
        }),
      );

  const all = produced(completion);
  const status = finalStatus(completion);
  let tail = "";
  if (call) {
    tail += frame("response.function_call_arguments.done", seq++, { item_id: id.call, output_index: index, arguments: all });
  } else {
    tail += frame("response.output_text.done", seq++, { item_id: id.message, output_index: index, content_index: 0, text: all, logprobs: [] });
    tail += frame("response.content_part.done", seq++, { item_id: id.message, output_index: index, content_index: 0, part: textPart(all) });
  }
  tail += frame("response.output_item.done", seq++, { output_index: index, item: answerItem(completion, status, all) });
  tail += frame(`response.${status}`, seq++, { response: responseObject(completion, request, status, finalOutput(completion), null) });

  // A failure after the headers ends the stream with response.failed: the error on the
  // response object, the output as produced so far marked incomplete.
  const error = (e: SimError, sent: number): string => {
    const so = call ? call.pieces.slice(0, sent).join("") : completion.tokens.slice(0, sent).join("");
    const output = [...(reasoning ? [reasoning] : []), answerItem(completion, "incomplete", so)];
    const failure = { code: e.kind === "rate_limit" ? "rate_limit_exceeded" : "server_error", message: e.message };
    return frame("response.failed", first + sent, { response: responseObject(completion, request, "failed", output, failure) });
  };
  return { head, pieces, tail, error };
}

/** The OpenAI Responses wire format. */
export const openaiResponses: WireFormat = {
  name: "openai-responses",
  path: "/v1/responses",
  requestIdHeader: "x-request-id",
  heartbeat: ": keep-alive\n\n",
  parse,
  malformedJson,
  authError,
  renderError: (error) => renderError(error),
  renderBuffered,
  renderStream,
};
