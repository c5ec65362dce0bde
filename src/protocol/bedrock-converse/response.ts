import { z } from "zod";
import { GatewayError } from "../../errors/gateway-error.ts";
import { redactedSignature } from "../anthropic-messages/thinking.ts";
import type { NeutralResponse, StopReason, ToolCall, Usage } from "../neutral.ts";

/*
 * The Converse answer: `output.message.content` (text, toolUse with an `input` object, and
 * reasoningContent — reasoningText with its signature, or redactedContent), `stopReason`, and
 * `usage` (inputTokens, outputTokens, totalTokens, cacheReadInputTokens, cacheWriteInputTokens).
 */

/** The path of a Converse call: the model id (an id, an inference profile or an ARN) is one encoded segment. */
export function conversePath(modelId: string, stream: boolean): string {
  return `/model/${encodeURIComponent(modelId)}/${stream ? "converse-stream" : "converse"}`;
}

/** Converse's stop reasons, in neutral terms. */
export function stopFromConverse(reason: string | undefined): StopReason {
  switch (reason) {
    case "end_turn":
      return "end_turn";
    case "tool_use":
      return "tool_use";
    case "max_tokens":
    // The context window filled: the answer was cut for length, as with a limit.
    case "model_context_window_exceeded":
      return "max_tokens";
    case "stop_sequence":
      return "stop_sequence";
    case "content_filtered":
    case "guardrail_intervened":
      return "content_filter";
    default:
      return "other";
  }
}

export const converseUsageSchema = z.looseObject({
  inputTokens: z.number().int().min(0),
  outputTokens: z.number().int().min(0),
  totalTokens: z.number().int().min(0).optional(),
  cacheReadInputTokens: z.number().int().min(0).nullable().optional(),
  cacheWriteInputTokens: z.number().int().min(0).nullable().optional(),
});

/**
 * Converse usage → neutral usage. `inputTokens` counts only the input read neither from nor into
 * the prompt cache (as Anthropic's does: `totalTokens` is the sum of all four), so the neutral
 * input, which counts all of it, adds the cache reads and writes back.
 */
export function usageFromConverse(u: z.infer<typeof converseUsageSchema>): Usage {
  const read = u.cacheReadInputTokens ?? 0;
  const write = u.cacheWriteInputTokens ?? 0;
  return {
    inputTokens: u.inputTokens + read + write,
    outputTokens: u.outputTokens,
    ...(read > 0 ? { cachedInputTokens: read } : {}),
    ...(write > 0 ? { cacheWriteInputTokens: write } : {}),
    source: "provider",
  };
}

const blockSchema = z.looseObject({
  text: z.string().optional(),
  toolUse: z.looseObject({ toolUseId: z.string().min(1), name: z.string().min(1), input: z.unknown().optional() }).optional(),
  reasoningContent: z
    .looseObject({
      reasoningText: z.looseObject({ text: z.string(), signature: z.string().nullable().optional() }).optional(),
      redactedContent: z.string().optional(),
    })
    .optional(),
});

const responseSchema = z.looseObject({
  output: z.looseObject({ message: z.looseObject({ role: z.string().optional(), content: z.array(blockSchema) }) }),
  stopReason: z.string(),
  usage: converseUsageSchema.nullable().optional(),
});

/** A Converse answer → neutral response. Throws GatewayError("upstream_protocol_error"). */
export function decodeConverseResponse(body: unknown): NeutralResponse {
  const parsed = responseSchema.safeParse(body);
  if (!parsed.success) {
    throw new GatewayError("upstream_protocol_error", "The provider returned a response the gateway could not read.", { cause: parsed.error });
  }
  const r = parsed.data;
  let text = "";
  const toolCalls: ToolCall[] = [];
  const reasoning: { text: string; signature?: string }[] = [];
  for (const b of r.output.message.content) {
    if (b.text !== undefined) text += b.text;
    if (b.toolUse) toolCalls.push({ id: b.toolUse.toolUseId, name: b.toolUse.name, arguments: JSON.stringify(b.toolUse.input ?? {}) });
    const rc = b.reasoningContent;
    if (rc?.reasoningText) reasoning.push(rc.reasoningText.signature ? { text: rc.reasoningText.text, signature: rc.reasoningText.signature } : { text: rc.reasoningText.text });
    else if (rc?.redactedContent !== undefined) reasoning.push({ text: "", signature: redactedSignature(rc.redactedContent) });
  }
  return {
    text,
    ...(reasoning.length > 0 ? { reasoning } : {}),
    toolCalls,
    stopReason: stopFromConverse(r.stopReason),
    usage: r.usage ? usageFromConverse(r.usage) : undefined,
  };
}
