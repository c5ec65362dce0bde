import { GatewayError } from "../../errors/gateway-error.ts";
import type { UpstreamOptions } from "../codec.ts";
import { openAiContent, textOf } from "../content-parts.ts";
import type { ContentPart, NeutralMessage, NeutralRequest } from "../neutral.ts";

type WirePart = { type: "text"; text: string } | { type: "image_url"; image_url: { url: string; detail?: string } };

// Chat Completions has no place for replayed reasoning: it is dropped from history (documented).
const wireParts = (content: readonly ContentPart[]): string | WirePart[] =>
  openAiContent<WirePart>(
    content,
    (p) => ({ type: "text", text: p.text }),
    (p) => ({ type: "image_url", image_url: p.detail ? { url: p.url, detail: p.detail } : { url: p.url } }),
  );

function wireMessage(m: NeutralMessage): Record<string, unknown> {
  switch (m.role) {
    case "system":
    case "developer":
      // Several text parts stay several parts: joining them would change the prompt.
      return m.name === undefined ? { role: m.role, content: wireParts(m.content) } : { role: m.role, content: wireParts(m.content), name: m.name };
    case "user":
      return m.name === undefined ? { role: "user", content: wireParts(m.content) } : { role: "user", content: wireParts(m.content), name: m.name };
    case "assistant": {
      // null content is valid only beside tool_calls; an empty assistant turn goes as "".
      const calls = m.toolCalls ?? [];
      const text = textOf(m.content);
      const out: Record<string, unknown> = { role: "assistant", content: text !== "" || !calls.length ? text : null };
      if (calls.length) {
        out.tool_calls = calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } }));
      }
      if (m.name !== undefined) out.name = m.name;
      return out;
    }
    case "tool":
      return { role: "tool", tool_call_id: m.toolCallId, content: wireParts(m.content) };
  }
}

/**
 * The `json_schema.name` sent for a schema that arrived without one (Anthropic clients have no
 * name field; OpenAI requires it). A label only: it does not change the answer.
 */
export const DEFAULT_SCHEMA_NAME = "response";

/** Neutral request → OpenAI Chat Completions body for the provider's model id. */
export function encodeChatRequest(req: NeutralRequest, upstreamModel: string, options: UpstreamOptions): Record<string, unknown> {
  const body: Record<string, unknown> = { model: upstreamModel, messages: req.messages.map(wireMessage) };
  if (req.stream) {
    body.stream = true;
    // Usage is always requested upstream: the gateway needs it to account, whether or not the
    // client asked to see it (the encoder drops it for clients that did not).
    if (options.streamUsage) body.stream_options = { include_usage: true };
  }
  if (req.maxOutputTokens !== undefined) body.max_completion_tokens = req.maxOutputTokens;
  if (req.temperature !== undefined) body.temperature = req.temperature;
  if (req.topP !== undefined) body.top_p = req.topP;
  if (req.presencePenalty !== undefined) body.presence_penalty = req.presencePenalty;
  if (req.frequencyPenalty !== undefined) body.frequency_penalty = req.frequencyPenalty;
  if (req.seed !== undefined) body.seed = req.seed;
  if (req.logprobs !== undefined) {
    body.logprobs = true;
    body.top_logprobs = req.logprobs;
  }
  if (req.stop !== undefined) body.stop = req.stop;
  if (req.tools !== undefined) {
    body.tools = req.tools.map((t) => ({
      type: "function",
      function: { name: t.name, description: t.description, parameters: t.parameters, strict: t.strict },
    }));
  }
  if (req.toolChoice !== undefined) {
    body.tool_choice =
      req.toolChoice.type === "tool" ? { type: "function", function: { name: req.toolChoice.name } } : req.toolChoice.type;
  }
  if (req.parallelToolCalls !== undefined) body.parallel_tool_calls = req.parallelToolCalls;
  if (req.responseFormat !== undefined) {
    const f = req.responseFormat;
    body.response_format =
      f.type === "json_schema"
        ? { type: "json_schema", json_schema: { name: f.name ?? DEFAULT_SCHEMA_NAME, description: f.description, schema: f.schema, strict: f.strict } }
        : { type: f.type };
  }
  // Chat has every neutral effort value (OpenAI's union is the neutral one).
  if (req.reasoningEffort !== undefined) body.reasoning_effort = req.reasoningEffort;
  if (req.verbosity !== undefined) body.verbosity = req.verbosity;
  if (req.metadata !== undefined) body.metadata = req.metadata;
  if (req.user !== undefined) body.user = req.user;
  if (req.safetyIdentifier !== undefined) body.safety_identifier = req.safetyIdentifier;
  if (req.promptCacheKey !== undefined) body.prompt_cache_key = req.promptCacheKey;
  if (req.promptCacheRetention !== undefined) body.prompt_cache_retention = req.promptCacheRetention;
  if (req.openAiServiceTier !== undefined) {
    // 'ultrafast' exists in the Responses API only; mapping it to another tier would change the price.
    if (req.openAiServiceTier === "ultrafast") {
      throw new GatewayError("invalid_request", "service tier 'ultrafast' is not supported by this model's backend.");
    }
    body.service_tier = req.openAiServiceTier;
  }
  // Cache-control hints (per block and request-level) are left out: OpenAI caches automatically.
  return body;
}
