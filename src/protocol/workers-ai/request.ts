import type { UpstreamOptions } from "../codec.ts";
import { openAiContent, textOf } from "../content-parts.ts";
import type { ContentPart, NeutralMessage, NeutralRequest } from "../neutral.ts";

/*
 * Workers AI text generation inputs (`env.AI.run(model, inputs)`): scoped prompts (`messages`),
 * `max_tokens`, sampling (`temperature`, `top_p`, `top_k`, `seed`, the penalties), `tools` in
 * OpenAI's function form, `response_format` (JSON mode) and `stream`. The model is run()'s first
 * argument, never part of the inputs.
 */

type WirePart = { type: "text"; text: string } | { type: "image_url"; image_url: { url: string } };

/**
 * A message's content: plain text, its text parts joined by a newline (a scoped prompt's content
 * is one string); with images, OpenAI's part objects, which Workers AI's vision models take.
 * Replayed reasoning is left out, as for every OpenAI-shaped wire.
 */
function content(parts: readonly ContentPart[]): string | WirePart[] {
  if (!parts.some((p) => p.type === "image")) return parts.flatMap((p) => (p.type === "text" ? [p.text] : [])).join("\n");
  return openAiContent<WirePart>(
    parts,
    (p) => ({ type: "text", text: p.text }),
    (p) => ({ type: "image_url", image_url: { url: p.url } }),
  );
}

function wireMessage(m: NeutralMessage): Record<string, unknown> {
  switch (m.role) {
    case "system":
    case "developer":
      // Workers AI's roles are system, user, assistant and tool: developer instructions are the system's.
      return m.name === undefined ? { role: "system", content: content(m.content) } : { role: "system", content: content(m.content), name: m.name };
    case "user":
      return m.name === undefined ? { role: "user", content: content(m.content) } : { role: "user", content: content(m.content), name: m.name };
    case "assistant": {
      // The binding refuses a null content, even beside tool calls: an empty turn goes as "".
      const out: Record<string, unknown> = { role: "assistant", content: textOf(m.content) };
      const calls = m.toolCalls ?? [];
      if (calls.length) out.tool_calls = calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } }));
      if (m.name !== undefined) out.name = m.name;
      return out;
    }
    case "tool":
      return { role: "tool", tool_call_id: m.toolCallId, content: textOf(m.content) };
  }
}

/**
 * Neutral request → Workers AI inputs. Only the features the codec declares it carries reach
 * here (the rest were refused or downgraded before encoding); cache hints, end-user ids and
 * metadata have no field and are left out (they never change the answer).
 */
export function encodeWorkersAiRequest(req: NeutralRequest, _upstreamModel: string, _options: UpstreamOptions): Record<string, unknown> {
  const inputs: Record<string, unknown> = { messages: req.messages.map(wireMessage) };
  // Usage arrives in a stream's last event unasked: there is no stream option to set.
  if (req.stream) inputs.stream = true;
  if (req.maxOutputTokens !== undefined) inputs.max_tokens = req.maxOutputTokens;
  if (req.temperature !== undefined) inputs.temperature = req.temperature;
  if (req.topP !== undefined) inputs.top_p = req.topP;
  if (req.topK !== undefined) inputs.top_k = req.topK;
  if (req.seed !== undefined) inputs.seed = req.seed;
  if (req.presencePenalty !== undefined) inputs.presence_penalty = req.presencePenalty;
  if (req.frequencyPenalty !== undefined) inputs.frequency_penalty = req.frequencyPenalty;
  if (req.tools !== undefined) {
    inputs.tools = req.tools.map((t) => ({
      type: "function",
      function: { name: t.name, ...(t.description !== undefined ? { description: t.description } : {}), ...(t.parameters !== undefined ? { parameters: t.parameters } : {}) },
    }));
  }
  if (req.toolChoice !== undefined) {
    inputs.tool_choice = req.toolChoice.type === "tool" ? { type: "function", function: { name: req.toolChoice.name } } : req.toolChoice.type;
  }
  const f = req.responseFormat;
  // JSON mode: Workers AI takes the bare JSON Schema under `json_schema` (no OpenAI name/strict envelope).
  if (f?.type === "json_object") inputs.response_format = { type: "json_object" };
  else if (f?.type === "json_schema") inputs.response_format = { type: "json_schema", json_schema: f.schema ?? {} };
  return inputs;
}
