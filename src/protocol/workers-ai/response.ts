import { z } from "zod";
import { GatewayError } from "../../errors/gateway-error.ts";
import { isRecord } from "../fast-guard.ts";
import type { NeutralResponse, StopReason, ToolCall } from "../neutral.ts";
import { decodeChatResponse, stopFromFinish, usageFromWire, wireUsageSchema } from "../openai-chat/response.ts";

/*
 * Workers AI text generation outputs. Most models answer in the native shape,
 * `{ response, tool_calls?, usage? }`: `response` is the text (an object when JSON mode parsed it),
 * `tool_calls` either OpenAI's `{ id, type, function: { name, arguments } }` or the older
 * `{ name, arguments }` whose arguments are an object, and `usage` OpenAI's token counts. Newer
 * models answer with an OpenAI chat completion (`choices`), which the Chat decoder reads.
 */

/** Arguments as the raw JSON text the neutral model carries: a string as sent, an object written out. */
export const argumentsText = (args: unknown): string => (typeof args === "string" ? args : JSON.stringify(args ?? {}));

/**
 * An id for a tool call the model made without one (the older shape has none). The client sends
 * it back with the tool's result; Workers AI matched no id of its own, so any unique one serves.
 */
export function generatedCallId(): string {
  return `call_${crypto.randomUUID().replaceAll("-", "")}`;
}

/** The tool call shapes of an answer (a stream's pieces have their own, see stream.ts). */
const toolCallSchema = z
  .looseObject({
    id: z.string().nullable().optional(),
    function: z.looseObject({ name: z.string().min(1), arguments: z.unknown().optional() }).optional(),
    name: z.string().min(1).optional(),
    arguments: z.unknown().optional(),
  })
  .refine((c) => c.function !== undefined || c.name !== undefined, "a tool call without a name");

const nativeResponseSchema = z
  .looseObject({
    response: z.union([z.string(), z.number(), z.record(z.string(), z.unknown()), z.array(z.unknown())]).nullable().optional(),
    tool_calls: z.array(toolCallSchema).nullable().optional(),
    usage: wireUsageSchema.nullable().optional(),
    finish_reason: z.string().nullable().optional(),
  })
  // An answer says something: text (possibly empty) or tool calls.
  .refine((r) => r.response !== undefined || r.tool_calls !== undefined, "neither response nor tool_calls");

/** One tool call of an answer, in neutral form. */
function neutralCall(c: z.infer<typeof toolCallSchema>): ToolCall {
  const id = typeof c.id === "string" && c.id !== "" ? c.id : generatedCallId();
  return c.function ? { id, name: c.function.name, arguments: argumentsText(c.function.arguments) } : { id, name: c.name!, arguments: argumentsText(c.arguments) };
}

/**
 * Why a native answer stopped: its `finish_reason` where the model gives one; otherwise a tool
 * call, or a finished turn (the native shape says nothing more).
 */
export function nativeStop(finishReason: string | null | undefined, madeToolCalls: boolean): StopReason {
  if (finishReason) return stopFromFinish(finishReason);
  return madeToolCalls ? "tool_use" : "end_turn";
}

/** A Workers AI output → neutral response. Throws GatewayError("upstream_protocol_error"). */
export function decodeWorkersAiResponse(body: unknown): NeutralResponse {
  if (isRecord(body) && Array.isArray(body.choices)) return decodeChatResponse(body);
  const parsed = nativeResponseSchema.safeParse(body);
  if (!parsed.success) {
    throw new GatewayError("upstream_protocol_error", "The provider returned a response the gateway could not read.", { cause: parsed.error });
  }
  const r = parsed.data;
  const toolCalls = (r.tool_calls ?? []).map(neutralCall);
  const text = r.response === undefined || r.response === null ? "" : typeof r.response === "string" ? r.response : JSON.stringify(r.response);
  return {
    text,
    toolCalls,
    stopReason: nativeStop(r.finish_reason, toolCalls.length > 0),
    usage: r.usage ? usageFromWire(r.usage) : undefined,
  };
}
