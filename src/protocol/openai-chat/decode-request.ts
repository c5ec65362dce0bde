import { echo } from "../../errors/echo.ts";
import { GatewayError } from "../../errors/gateway-error.ts";
import { invalidRequestFromZod } from "../invalid-request.ts";
import type { ContentPart, NeutralMessage, NeutralRequest, ResponseFormat, ToolChoice } from "../neutral.ts";
import { fastChatRequest } from "./request-guard.ts";
import { chatRequestSchema, type ChatMessageBody, type ChatRequestBody } from "./request-schema.ts";

type Parts = string | readonly ({ type: "text"; text: string } | { type: "image_url"; image_url: { url: string; detail?: "auto" | "low" | "high" | undefined } } | { type: "refusal"; refusal: string })[] | null | undefined;

function parts(content: Parts): ContentPart[] {
  if (content === null || content === undefined) return [];
  if (typeof content === "string") return content === "" ? [] : [{ type: "text", text: content }];
  return content.map((p): ContentPart => {
    switch (p.type) {
      case "text":
        return { type: "text", text: p.text };
      case "image_url":
        return { type: "image", url: p.image_url.url, detail: p.image_url.detail };
      case "refusal":
        return { type: "text", text: p.refusal };
    }
  });
}

function message(m: ChatMessageBody, index: number): NeutralMessage {
  switch (m.role) {
    case "system":
    case "developer":
      return { role: m.role, content: parts(m.content), name: m.name };
    case "user":
      return { role: "user", content: parts(m.content), name: m.name };
    case "assistant": {
      const toolCalls = m.tool_calls?.map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments }));
      if (!toolCalls?.length && (m.content === null || m.content === undefined)) {
        throw new GatewayError("invalid_request", `Invalid value for 'messages[${index}]': an assistant message needs content or tool_calls.`, {
          param: `messages[${index}]`,
        });
      }
      return { role: "assistant", content: parts(m.content), toolCalls, name: m.name };
    }
    case "tool":
      return { role: "tool", toolCallId: m.tool_call_id, content: parts(m.content) };
  }
}

function toolChoice(c: ChatRequestBody["tool_choice"]): ToolChoice | undefined {
  if (c === undefined) return undefined;
  if (typeof c === "string") return { type: c };
  return { type: "tool", name: c.function.name };
}

function responseFormat(f: ChatRequestBody["response_format"]): ResponseFormat | undefined {
  if (f === undefined) return undefined;
  if (f.type !== "json_schema") return { type: f.type };
  const s = f.json_schema;
  return { type: "json_schema", name: s.name, schema: s.schema, strict: s.strict ?? undefined, description: s.description };
}

/** OpenAI Chat Completions body → neutral request. Throws GatewayError("invalid_request"). */
export function decodeChatRequest(body: unknown): NeutralRequest {
  // The common request skips zod (request-guard.ts); zod decides everything else and words the errors.
  const fast = fastChatRequest(body);
  if (fast !== undefined) return chatRequestToNeutral(fast);
  // reportInput: zod drops `input` from issues otherwise, and the error text needs it to tell a
  // missing parameter from a present one of the wrong type.
  const parsed = chatRequestSchema.safeParse(body, { reportInput: true });
  if (!parsed.success) throw invalidRequestFromZod(parsed.error);
  return chatRequestToNeutral(parsed.data);
}

/** A validated body → neutral request (the part of decoding after validation); throws GatewayError("invalid_request"). */
export function chatRequestToNeutral(b: ChatRequestBody): NeutralRequest {
  if (b.max_tokens != null && b.max_completion_tokens != null && b.max_tokens !== b.max_completion_tokens) {
    throw new GatewayError("invalid_request", "Set either 'max_tokens' or 'max_completion_tokens', not both.", {
      param: "max_tokens",
    });
  }
  const tools = b.tools?.map((t) => ({
    name: t.function.name,
    description: t.function.description,
    parameters: t.function.parameters,
    strict: t.function.strict ?? undefined,
  }));
  const choice = toolChoice(b.tool_choice);
  if (choice?.type === "tool" && !tools?.some((t) => t.name === choice.name)) {
    throw new GatewayError("invalid_request", `tool_choice names '${echo(choice.name)}', which is not in 'tools'.`, {
      param: "tool_choice",
    });
  }
  const stream = b.stream === true;
  if (!stream && b.stream_options != null) {
    throw new GatewayError("invalid_request", "'stream_options' is only allowed when 'stream' is true.", { param: "stream_options" });
  }
  return {
    model: b.model,
    messages: b.messages.map(message),
    tools,
    toolChoice: choice,
    parallelToolCalls: b.parallel_tool_calls,
    maxOutputTokens: b.max_completion_tokens ?? b.max_tokens ?? undefined,
    temperature: b.temperature ?? undefined,
    topP: b.top_p ?? undefined,
    presencePenalty: b.presence_penalty ?? undefined,
    frequencyPenalty: b.frequency_penalty ?? undefined,
    seed: b.seed ?? undefined,
    stop: b.stop == null ? undefined : typeof b.stop === "string" ? [b.stop] : b.stop,
    responseFormat: responseFormat(b.response_format),
    reasoningEffort: b.reasoning_effort ?? undefined,
    verbosity: b.verbosity ?? undefined,
    promptCacheKey: b.prompt_cache_key ?? undefined,
    promptCacheRetention: b.prompt_cache_retention ?? undefined,
    safetyIdentifier: b.safety_identifier ?? undefined,
    openAiServiceTier: b.service_tier ?? undefined,
    metadata: b.metadata ?? undefined,
    user: b.user,
    stream,
    streamUsage: stream && b.stream_options?.include_usage === true,
  };
}
