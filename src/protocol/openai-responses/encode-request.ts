import type { UpstreamOptions } from "../codec.ts";
import { DEFAULT_SCHEMA_NAME } from "../openai-chat/encode-request.ts";
import { openAiContent, textOf } from "../content-parts.ts";
import type { ContentPart, NeutralMessage, NeutralRequest } from "../neutral.ts";

type WirePart = { type: "input_text"; text: string } | { type: "input_image"; image_url: string; detail: string };

// Replayed reasoning is dropped from history: a Responses reasoning item is only accepted back
// with the id and encrypted_content its own deployment issued, which no neutral part carries.
const wireParts = (content: readonly ContentPart[]): string | WirePart[] =>
  openAiContent<WirePart>(
    content,
    (p) => ({ type: "input_text", text: p.text }),
    (p) => ({ type: "input_image", image_url: p.url, detail: p.detail ?? "auto" }),
  );

/**
 * One neutral message → its input items, in order. System and developer messages stay where they
 * are, with their role, rather than being hoisted into `instructions`: that keeps their order
 * and their number exactly. Message `name`s have no place in the Responses API and are dropped.
 */
function inputItems(m: NeutralMessage): Record<string, unknown>[] {
  switch (m.role) {
    case "system":
    case "developer":
    case "user":
      return [{ type: "message", role: m.role, content: wireParts(m.content) }];
    case "assistant": {
      const calls = m.toolCalls ?? [];
      const text = textOf(m.content);
      const out: Record<string, unknown>[] = [];
      if (text !== "" || calls.length === 0) out.push({ type: "message", role: "assistant", content: text });
      for (const c of calls) out.push({ type: "function_call", call_id: c.id, name: c.name, arguments: c.arguments });
      return out;
    }
    case "tool":
      return [{ type: "function_call_output", call_id: m.toolCallId, output: wireParts(m.content) }];
  }
}

/** Neutral request → OpenAI Responses body for the provider's model id; never asks the provider to store anything. */
export function encodeResponsesRequest(req: NeutralRequest, upstreamModel: string, _options: UpstreamOptions): Record<string, unknown> {
  const body: Record<string, unknown> = { model: upstreamModel, input: req.messages.flatMap(inputItems), store: false };
  // Usage always arrives in `response.completed`: there is no stream option to ask for it.
  if (req.stream) body.stream = true;
  if (req.maxOutputTokens !== undefined) body.max_output_tokens = req.maxOutputTokens;
  if (req.temperature !== undefined) body.temperature = req.temperature;
  if (req.topP !== undefined) body.top_p = req.topP;
  if (req.tools !== undefined) {
    // The Responses API treats a missing `strict` as "make strict if the schema allows"; the
    // neutral default (the Chat and Anthropic one) is not strict, so it is said explicitly.
    body.tools = req.tools.map((t) => ({
      type: "function",
      name: t.name,
      description: t.description,
      parameters: t.parameters ?? null,
      strict: t.strict ?? false,
    }));
  }
  if (req.toolChoice !== undefined) {
    body.tool_choice = req.toolChoice.type === "tool" ? { type: "function", name: req.toolChoice.name } : req.toolChoice.type;
  }
  if (req.parallelToolCalls !== undefined) body.parallel_tool_calls = req.parallelToolCalls;
  const text: Record<string, unknown> = {};
  if (req.responseFormat !== undefined) {
    const f = req.responseFormat;
    text.format =
      f.type === "json_schema"
        ? { type: "json_schema", name: f.name ?? DEFAULT_SCHEMA_NAME, description: f.description, schema: f.schema, strict: f.strict }
        : { type: f.type };
  }
  if (req.verbosity !== undefined) text.verbosity = req.verbosity;
  if (Object.keys(text).length > 0) body.text = text;
  // The Responses API has every neutral effort value (OpenAI's union is the neutral one).
  if (req.reasoningEffort !== undefined) body.reasoning = { effort: req.reasoningEffort };
  if (req.metadata !== undefined) body.metadata = req.metadata;
  if (req.user !== undefined) body.user = req.user;
  if (req.safetyIdentifier !== undefined) body.safety_identifier = req.safetyIdentifier;
  if (req.promptCacheKey !== undefined) body.prompt_cache_key = req.promptCacheKey;
  if (req.promptCacheRetention !== undefined) body.prompt_cache_retention = req.promptCacheRetention;
  if (req.openAiServiceTier !== undefined) body.service_tier = req.openAiServiceTier;
  // Seed, penalties, top_k, reasoning budgets and tool error flags are features this protocol does
  // not carry: the executor refuses or drops them before this runs. Stop sequences have no
  // Responses field and no feature to refuse them by, so they are dropped here
  // (docs/protocols/openai-responses.md).
  return body;
}
