import { z } from "zod";
import { GatewayError } from "../../errors/gateway-error.ts";
import type { NeutralResponse, StopReason, ToolCall, Usage } from "../neutral.ts";
import { geminiCallId } from "./tool-call-id.ts";

/*
 * A `GenerateContentResponse` (the whole answer, or one streamed chunk of it): `candidates` (the
 * gateway asks for one and reads the first), each with `content.parts` and `finishReason`;
 * `promptFeedback.blockReason` when the prompt itself was blocked (then there is no candidate);
 * `usageMetadata`; `responseId`. A part is text (a thought when `thought` is true), or a
 * `functionCall` with its `args` object; any part may carry a `thoughtSignature`.
 */

const count = z.number().int().min(0);

export const usageMetadataSchema = z.looseObject({
  promptTokenCount: count.optional(),
  candidatesTokenCount: count.optional(),
  cachedContentTokenCount: count.optional(),
  thoughtsTokenCount: count.optional(),
  toolUsePromptTokenCount: count.optional(),
  totalTokenCount: count.optional(),
});

export const partSchema = z.looseObject({
  text: z.string().optional(),
  thought: z.boolean().optional(),
  thoughtSignature: z.string().optional(),
  functionCall: z.looseObject({ id: z.string().optional(), name: z.string().min(1), args: z.record(z.string(), z.unknown()).nullable().optional() }).optional(),
});

export const candidateSchema = z.looseObject({
  content: z.looseObject({ role: z.string().optional(), parts: z.array(partSchema).nullable().optional() }).nullable().optional(),
  finishReason: z.string().optional(),
});

export const generateContentResponseSchema = z.looseObject({
  candidates: z.array(candidateSchema).nullable().optional(),
  promptFeedback: z.looseObject({ blockReason: z.string().optional() }).nullable().optional(),
  usageMetadata: usageMetadataSchema.nullable().optional(),
  responseId: z.string().optional(),
});

export type GeminiPart = z.infer<typeof partSchema>;
export type GeminiChunk = z.infer<typeof generateContentResponseSchema>;

/**
 * Gemini usage → neutral. `promptTokenCount` already includes the cached part
 * (`cachedContentTokenCount`); tool-use prompt tokens (what built-in tools fed back to the model)
 * are input the request is billed for, so they count as input. `candidatesTokenCount` leaves the
 * thoughts out (`thoughtsTokenCount`), which are billed as output: neutral output includes them
 * and names them as reasoning. Undefined when the answer reported no counts at all.
 */
export function usageFromMetadata(u: z.infer<typeof usageMetadataSchema> | null | undefined): Usage | undefined {
  if (!u) return undefined;
  if (u.promptTokenCount === undefined && u.candidatesTokenCount === undefined && u.thoughtsTokenCount === undefined) return undefined;
  const thoughts = u.thoughtsTokenCount ?? 0;
  const usage: { -readonly [K in keyof Usage]: Usage[K] } = {
    inputTokens: (u.promptTokenCount ?? 0) + (u.toolUsePromptTokenCount ?? 0),
    outputTokens: (u.candidatesTokenCount ?? 0) + thoughts,
    source: "provider",
  };
  if (u.cachedContentTokenCount !== undefined) usage.cachedInputTokens = u.cachedContentTokenCount;
  if (u.thoughtsTokenCount !== undefined) usage.reasoningTokens = thoughts;
  return usage;
}

/**
 * Gemini's finish reason → neutral. STOP covers both a natural end and a stop sequence (Gemini
 * does not say which); a turn that called functions ends for the tool. The safety reasons (SAFETY,
 * RECITATION, BLOCKLIST, PROHIBITED_CONTENT, SPII, IMAGE_SAFETY…) are the provider's content
 * filter; anything else (MALFORMED_FUNCTION_CALL, LANGUAGE, OTHER, new values) is `other`.
 */
export function stopFromFinish(reason: string | undefined, madeCalls: boolean): StopReason {
  switch (reason) {
    case "STOP":
    case undefined:
      return madeCalls ? "tool_use" : "end_turn";
    case "MAX_TOKENS":
      return "max_tokens";
    case "SAFETY":
    case "RECITATION":
    case "BLOCKLIST":
    case "PROHIBITED_CONTENT":
    case "SPII":
    case "IMAGE_SAFETY":
    case "IMAGE_PROHIBITED_CONTENT":
    case "IMAGE_RECITATION":
      return "content_filter";
    default:
      return madeCalls ? "tool_use" : "other";
  }
}

/** A `functionCall` part → a neutral tool call; the call's id carries its signature (tool-call-id.ts). */
export function toolCallOf(part: GeminiPart): ToolCall {
  const call = part.functionCall!;
  return { id: geminiCallId(part.thoughtSignature), name: call.name, arguments: JSON.stringify(call.args ?? {}) };
}

function unreadable(cause: unknown): GatewayError {
  return new GatewayError("upstream_protocol_error", "The provider returned a response the gateway could not read.", { cause });
}

/** A whole Gemini answer → neutral response. Throws GatewayError("upstream_protocol_error"). */
export function decodeGeminiResponse(body: unknown): NeutralResponse {
  const parsed = generateContentResponseSchema.safeParse(body);
  if (!parsed.success) throw unreadable(parsed.error);
  const r = parsed.data;
  const usage = usageFromMetadata(r.usageMetadata);
  const candidate = r.candidates?.[0];
  if (candidate === undefined) {
    // A blocked prompt has no candidate: the provider's filter stopped it before any output.
    if (r.promptFeedback?.blockReason !== undefined) return { providerId: r.responseId, text: "", toolCalls: [], stopReason: "content_filter", usage };
    throw unreadable("no candidate and no block reason");
  }
  let text = "";
  const reasoning: { text: string }[] = [];
  const toolCalls: ToolCall[] = [];
  for (const p of candidate.content?.parts ?? []) {
    if (p.functionCall !== undefined) toolCalls.push(toolCallOf(p));
    else if (p.text !== undefined) {
      if (p.thought === true) reasoning.push({ text: p.text });
      else text += p.text;
    }
  }
  return {
    providerId: r.responseId,
    text,
    ...(reasoning.length > 0 ? { reasoning } : {}),
    toolCalls,
    stopReason: stopFromFinish(candidate.finishReason, toolCalls.length > 0),
    usage,
  };
}
