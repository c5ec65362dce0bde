import { echo } from "../../errors/echo.ts";
import { GatewayError } from "../../errors/gateway-error.ts";
import { invalidRequestFromZod } from "../invalid-request.ts";
import type { ContentPart, NeutralMessage, NeutralRequest, ResponseFormat, ToolCall, ToolChoice } from "../neutral.ts";
import { responsesRequestSchema, type ResponsesRequestBody } from "./request-schema.ts";
import { reasoningItemText } from "./response.ts";

type InputPart = { type: "input_text"; text: string } | { type: "input_image"; image_url: string; detail?: "auto" | "low" | "high" | null | undefined };
type AssistantPart = { type: "output_text"; text: string } | { type: "refusal"; refusal: string };

function inputParts(content: readonly InputPart[]): ContentPart[] {
  return content.map((p): ContentPart =>
    p.type === "input_text" ? { type: "text", text: p.text } : { type: "image", url: p.image_url, detail: p.detail ?? undefined },
  );
}

function assistantParts(content: readonly AssistantPart[]): ContentPart[] {
  // A refusal is what the model said: it stays text, as the Chat codec keeps it.
  return content.map((p): ContentPart => ({ type: "text", text: p.type === "output_text" ? p.text : p.refusal }));
}

/**
 * Input items → neutral messages. The Responses API spreads one assistant turn over several items
 * (reasoning, message, function_call …); consecutive ones become one neutral assistant message
 * whose content precedes its tool calls. A reasoning item or message that follows a message or a
 * call starts a new turn, so the order the model produced them in survives.
 */
function messages(input: ResponsesRequestBody["input"], instructions: string | null | undefined): NeutralMessage[] {
  const out: NeutralMessage[] = [];
  if (instructions) out.push({ role: "system", content: [{ type: "text", text: instructions }] });
  let turn: { content: ContentPart[]; toolCalls: ToolCall[]; message: boolean } | undefined;
  const flush = () => {
    const t = turn;
    turn = undefined;
    // A turn of replayed reasoning alone carries nothing a backend can use.
    if (!t || (!t.message && t.toolCalls.length === 0)) return;
    out.push({ role: "assistant", content: t.content, toolCalls: t.toolCalls.length > 0 ? t.toolCalls : undefined });
  };
  const contentTurn = () => {
    if (turn && (turn.message || turn.toolCalls.length > 0)) flush();
    turn ??= { content: [], toolCalls: [], message: false };
    return turn;
  };
  for (const item of input) {
    switch (item.type) {
      case "function_call":
        (turn ??= { content: [], toolCalls: [], message: false }).toolCalls.push({ id: item.call_id, name: item.name, arguments: item.arguments });
        break;
      case "reasoning": {
        // Readable text only: encrypted_content belongs to the OpenAI deployment that wrote it.
        const text = reasoningItemText(item);
        const t = contentTurn();
        if (text !== "") t.content.push({ type: "reasoning", text });
        break;
      }
      case "function_call_output":
        flush();
        out.push({ role: "tool", toolCallId: item.call_id, content: inputParts(item.output) });
        break;
      default:
        // A message item (its `type` is optional).
        if (item.role === "assistant") {
          const t = contentTurn();
          t.content.push(...assistantParts(item.content));
          t.message = true;
          break;
        }
        flush();
        out.push(item.role === "user" ? { role: "user", content: inputParts(item.content) } : { role: item.role, content: inputParts(item.content) });
    }
  }
  flush();
  return out;
}

function toolChoice(c: ResponsesRequestBody["tool_choice"]): ToolChoice | undefined {
  if (c === undefined) return undefined;
  if (typeof c === "string") return { type: c };
  return { type: "tool", name: c.name };
}

function responseFormat(f: NonNullable<ResponsesRequestBody["text"]>["format"]): ResponseFormat | undefined {
  if (f === undefined) return undefined;
  if (f.type !== "json_schema") return { type: f.type };
  return { type: "json_schema", name: f.name, schema: f.schema, strict: f.strict ?? undefined, description: f.description };
}

/** OpenAI Responses body → neutral request. Throws GatewayError("invalid_request"). */
export function decodeResponsesRequest(body: unknown): NeutralRequest {
  // reportInput: the error text tells a missing parameter from a present one of the wrong type.
  const parsed = responsesRequestSchema.safeParse(body, { reportInput: true });
  if (!parsed.success) throw invalidRequestFromZod(parsed.error);
  const b = parsed.data;
  const tools = b.tools?.map((t) => ({
    name: t.name,
    description: t.description ?? undefined,
    parameters: t.parameters ?? undefined,
    strict: t.strict ?? undefined,
  }));
  const choice = toolChoice(b.tool_choice);
  if (choice?.type === "tool" && !tools?.some((t) => t.name === choice.name)) {
    throw new GatewayError("invalid_request", `tool_choice names '${echo(choice.name)}', which is not in 'tools'.`, { param: "tool_choice" });
  }
  const stream = b.stream === true;
  if (!stream && b.stream_options != null) {
    throw new GatewayError("invalid_request", "'stream_options' is only allowed when 'stream' is true.", { param: "stream_options" });
  }
  return {
    model: b.model,
    messages: messages(b.input, b.instructions),
    tools,
    toolChoice: choice,
    parallelToolCalls: b.parallel_tool_calls ?? undefined,
    maxOutputTokens: b.max_output_tokens ?? undefined,
    temperature: b.temperature ?? undefined,
    topP: b.top_p ?? undefined,
    responseFormat: responseFormat(b.text?.format),
    reasoningEffort: b.reasoning?.effort ?? undefined,
    verbosity: b.text?.verbosity ?? undefined,
    promptCacheKey: b.prompt_cache_key ?? undefined,
    promptCacheRetention: b.prompt_cache_retention ?? undefined,
    safetyIdentifier: b.safety_identifier ?? undefined,
    openAiServiceTier: b.service_tier ?? undefined,
    metadata: b.metadata ?? undefined,
    user: b.user,
    stream,
    // A Responses stream always ends with `response.completed` carrying usage.
    streamUsage: stream,
  };
}
