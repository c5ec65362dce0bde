import { z } from "zod";
import { echo } from "../../errors/echo.ts";
import { GatewayError } from "../../errors/gateway-error.ts";
import { invalidRequestFromZod } from "../invalid-request.ts";
import type { CacheControl, ContentPart, NeutralMessage, NeutralRequest, ResponseFormat, ToolCall, ToolChoice } from "../neutral.ts";
import {
  anthropicCountRequestSchema,
  anthropicRequestSchema,
  type AnthropicCacheControl,
  type AnthropicCountRequestBody,
  type AnthropicImageBlock,
  type AnthropicMessageBody,
  type AnthropicRequestBody,
  type AnthropicTextBlock,
} from "./request-schema.ts";
import { redactedSignature } from "./thinking.ts";

/**
 * Sluice forwards only client tools (a name, a description and an input schema). A server or
 * built-in tool (`web_search_…`, `bash_…`, `computer_…`, …) would run at the provider, out of the
 * gateway's sight, and has no equivalent on other protocols: it is refused by name.
 */
function refuseServerTools(body: unknown): void {
  if (typeof body !== "object" || body === null) return;
  const tools = (body as { tools?: unknown }).tools;
  if (!Array.isArray(tools)) return;
  tools.forEach((tool: unknown, i) => {
    if (typeof tool !== "object" || tool === null) return;
    const { type, name } = tool as { type?: unknown; name?: unknown };
    if (type === undefined || type === null || type === "custom") return;
    const label = typeof name === "string" ? `'${echo(name)}' (type '${echo(type)}')` : `of type '${echo(type)}'`;
    throw new GatewayError(
      "invalid_request",
      `Invalid value for 'tools[${i}]': the tool ${label} is a server tool; Sluice forwards only client tools (name, description, input_schema).`,
      { param: `tools[${i}]` },
    );
  });
}

/**
 * zod reports a value that fails every option of a plain union (string | blocks) as one vague
 * "Invalid input". When exactly one option accepted the value's shape at its root, that option's
 * own first issue is the useful one: it is re-rooted at the union's path.
 */
function sharpen(issue: z.core.$ZodIssue): z.core.$ZodIssue {
  if (issue.code !== "invalid_union" || issue.errors.length === 0) return issue;
  const matching = issue.errors.filter((branch) => branch.length > 0 && branch.every((i) => i.path.length > 0));
  const inner = matching.length === 1 ? matching[0]![0] : undefined;
  if (!inner) return issue;
  return sharpen({ ...inner, path: [...issue.path, ...inner.path] });
}

function cacheControl(c: AnthropicCacheControl): CacheControl | undefined {
  if (c === null || c === undefined) return undefined;
  return c.ttl === undefined ? { type: "ephemeral" } : { type: "ephemeral", ttl: c.ttl };
}

function textPart(b: AnthropicTextBlock): ContentPart {
  const cc = cacheControl(b.cache_control);
  return cc ? { type: "text", text: b.text, cacheControl: cc } : { type: "text", text: b.text };
}

function imagePart(b: AnthropicImageBlock): ContentPart {
  const url = b.source.type === "base64" ? `data:${b.source.media_type};base64,${b.source.data}` : b.source.url;
  const cc = cacheControl(b.cache_control);
  return cc ? { type: "image", url, cacheControl: cc } : { type: "image", url };
}

const stringParts = (s: string): ContentPart[] => (s === "" ? [] : [{ type: "text", text: s }]);

type UserBlock = Extract<Exclude<Extract<AnthropicMessageBody, { role: "user" }>["content"], string>[number], { type: "tool_result" }>;

/**
 * A tool result's content. The neutral tool message has no cache breakpoint of its own, so a
 * `cache_control` on the tool_result block moves to its last content part (the same prefix ends
 * there); on a result with no content it has nowhere to go and is dropped (documented).
 */
function toolResultContent(b: UserBlock): ContentPart[] {
  const parts = b.content === undefined ? [] : typeof b.content === "string" ? stringParts(b.content) : b.content.map((p) => (p.type === "text" ? textPart(p) : imagePart(p)));
  const cc = cacheControl(b.cache_control);
  const last = parts.at(-1);
  if (cc && last && last.type !== "reasoning" && last.cacheControl === undefined) parts[parts.length - 1] = { ...last, cacheControl: cc };
  return parts;
}

/**
 * One Anthropic message → neutral messages. A user message's tool_result blocks become neutral
 * tool messages (in order), its other blocks one user message after them (Anthropic requires the
 * results first anyway). An assistant message's tool_use blocks become its tool calls.
 */
function messages(m: AnthropicMessageBody): NeutralMessage[] {
  if (m.role === "system") return system(m.content);
  if (m.role === "user") {
    if (typeof m.content === "string") return [{ role: "user", content: stringParts(m.content) }];
    const out: NeutralMessage[] = [];
    const rest: ContentPart[] = [];
    for (const b of m.content) {
      switch (b.type) {
        case "tool_result": {
          const tool: NeutralMessage = { role: "tool", toolCallId: b.tool_use_id, content: toolResultContent(b) };
          out.push(b.is_error === undefined ? tool : { ...tool, isError: b.is_error });
          break;
        }
        case "text":
          rest.push(textPart(b));
          break;
        case "image":
          rest.push(imagePart(b));
          break;
      }
    }
    if (rest.length > 0) out.push({ role: "user", content: rest });
    return out;
  }
  if (typeof m.content === "string") return [{ role: "assistant", content: stringParts(m.content) }];
  const content: ContentPart[] = [];
  const toolCalls: ToolCall[] = [];
  for (const b of m.content) {
    switch (b.type) {
      case "text":
        content.push(textPart(b));
        break;
      case "thinking":
        content.push(b.signature === "" ? { type: "reasoning", text: b.thinking } : { type: "reasoning", text: b.thinking, signature: b.signature });
        break;
      case "redacted_thinking":
        content.push({ type: "reasoning", text: "", signature: redactedSignature(b.data) });
        break;
      case "tool_use":
        // cache_control on a tool_use block has no neutral place and is dropped (documented).
        toolCalls.push({ id: b.id, name: b.name, arguments: JSON.stringify(b.input) });
        break;
    }
  }
  return [toolCalls.length > 0 ? { role: "assistant", content, toolCalls } : { role: "assistant", content }];
}

function system(s: AnthropicRequestBody["system"]): NeutralMessage[] {
  if (s === undefined) return [];
  const content = typeof s === "string" ? stringParts(s) : s.map(textPart);
  return content.length === 0 ? [] : [{ role: "system", content }];
}

function toolChoice(c: AnthropicRequestBody["tool_choice"]): ToolChoice | undefined {
  if (c === undefined) return undefined;
  switch (c.type) {
    case "auto":
    case "none":
      return { type: c.type };
    case "any":
      return { type: "required" };
    case "tool":
      return { type: "tool", name: c.name };
  }
}

/** `thinking` → the neutral budget and display (`disabled` is no thinking: nothing). */
function thinking(t: AnthropicRequestBody["thinking"]): Pick<NeutralRequest, "reasoningBudgetTokens" | "reasoningDisplay"> {
  switch (t?.type) {
    case undefined:
    case "disabled":
      return {};
    case "between_tools":
      return { reasoningBudgetTokens: "between_tools" };
    case "enabled":
      return { reasoningBudgetTokens: t.budget_tokens, reasoningDisplay: t.display ?? undefined };
    case "adaptive":
      return { reasoningBudgetTokens: "adaptive", reasoningDisplay: t.display ?? undefined };
  }
}

/**
 * `output_config.format` → a neutral JSON schema format. Anthropic always holds the output to the
 * schema, so it is strict; it has no name (OpenAI encoders supply one, documented).
 */
function responseFormat(schema: Record<string, unknown>): ResponseFormat {
  return { type: "json_schema", schema, strict: true };
}

/** The body checked against `schema`: server tools refused by name, the first issue made sharp. */
function parseWith<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> {
  refuseServerTools(body);
  // reportInput: the error text needs `input` to tell a missing parameter from a wrong one.
  const parsed = schema.safeParse(body, { reportInput: true });
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    throw invalidRequestFromZod(first ? new z.ZodError([sharpen(first)]) : parsed.error);
  }
  return parsed.data;
}

/** Anthropic Messages body → neutral request. Throws GatewayError("invalid_request"). */
export function decodeAnthropicRequest(body: unknown): NeutralRequest {
  return neutralOf(parseWith(anthropicRequestSchema, body));
}

/**
 * Anthropic token-count body → the neutral request whose input is counted: never streamed, and
 * without an output cap unless the client sent one. Throws GatewayError("invalid_request").
 */
export function decodeAnthropicCountRequest(body: unknown): NeutralRequest {
  return { ...neutralOf(parseWith(anthropicCountRequestSchema, body)), stream: false, streamUsage: false };
}

function neutralOf(b: AnthropicCountRequestBody): NeutralRequest {
  const tools = b.tools?.map((t) => {
    const cc = cacheControl(t.cache_control);
    return { name: t.name, description: t.description, parameters: t.input_schema, strict: t.strict, ...(cc ? { cacheControl: cc } : {}) };
  });
  const choice = toolChoice(b.tool_choice);
  if (choice?.type === "tool" && !tools?.some((t) => t.name === choice.name)) {
    throw new GatewayError("invalid_request", `tool_choice names '${echo(choice.name)}', which is not in 'tools'.`, { param: "tool_choice.name" });
  }
  // disable_parallel_tool_use: true → no parallel calls; an explicit false is kept as "parallel
  // allowed" so an Anthropic backend receives exactly what the client sent.
  const disable = b.tool_choice !== undefined && "disable_parallel_tool_use" in b.tool_choice ? b.tool_choice.disable_parallel_tool_use : undefined;
  const stream = b.stream === true;
  return {
    model: b.model,
    messages: [...system(b.system), ...b.messages.flatMap(messages)],
    tools,
    toolChoice: choice,
    parallelToolCalls: disable === undefined ? undefined : !disable,
    maxOutputTokens: b.max_tokens,
    temperature: b.temperature,
    topP: b.top_p,
    topK: b.top_k,
    stop: b.stop_sequences,
    ...thinking(b.thinking),
    reasoningEffort: b.output_config?.effort ?? undefined,
    responseFormat: b.output_config?.format ? responseFormat(b.output_config.format.schema) : undefined,
    cacheControl: cacheControl(b.cache_control),
    anthropicServiceTier: b.service_tier,
    speed: b.speed ?? undefined,
    inferenceGeo: b.inference_geo ?? undefined,
    user: b.metadata?.user_id ?? undefined,
    stream,
    // Anthropic streams always report usage; the encoder always writes it.
    streamUsage: stream,
  };
}
