import { z } from "zod";
import { GatewayError } from "../../errors/gateway-error.ts";
import type { ResponseStamp } from "../codec.ts";
import type { NeutralResponse, StopReason, ToolCall, Usage } from "../neutral.ts";
import { redactedData, redactedSignature } from "./thinking.ts";

/**
 * Anthropic `stop_reason` → neutral stop reason. `model_context_window_exceeded` cut the answer
 * short exactly like `max_tokens`; `pause_turn` (a server-tool pause) and anything unknown are
 * "other".
 */
export function stopFromAnthropic(reason: string | null | undefined): StopReason {
  switch (reason) {
    case "end_turn":
      return "end_turn";
    case "max_tokens":
    case "model_context_window_exceeded":
      return "max_tokens";
    case "stop_sequence":
      return "stop_sequence";
    case "tool_use":
      return "tool_use";
    case "refusal":
      return "content_filter";
    default:
      return "other";
  }
}

/**
 * Neutral stop reason → Anthropic `stop_reason`. Anthropic has no "other": such an answer did end,
 * so it reports `end_turn`. A finished answer that holds tool calls reports `tool_use` whatever the
 * provider said (some OpenAI-compatible servers finish tool calls with "stop"), because Anthropic
 * clients run tools on that reason.
 */
export function anthropicFromStop(reason: StopReason, hasToolCalls: boolean): string {
  switch (reason) {
    case "end_turn":
    case "other":
      return hasToolCalls ? "tool_use" : "end_turn";
    case "max_tokens":
      return "max_tokens";
    case "stop_sequence":
      return "stop_sequence";
    case "tool_use":
      return "tool_use";
    case "content_filter":
      return "refusal";
  }
}

const count = z.number().int().min(0);

export const wireUsageSchema = z.looseObject({
  input_tokens: count,
  output_tokens: count,
  cache_creation_input_tokens: count.nullable().optional(),
  cache_read_input_tokens: count.nullable().optional(),
  output_tokens_details: z.looseObject({ thinking_tokens: count.optional() }).nullable().optional(),
});

/** Anthropic usage → neutral. Anthropic's `input_tokens` excludes cache reads and writes; neutral includes them. */
export function usageFromWire(u: z.infer<typeof wireUsageSchema>): Usage {
  const read = u.cache_read_input_tokens ?? undefined;
  const write = u.cache_creation_input_tokens ?? undefined;
  return {
    inputTokens: u.input_tokens + (read ?? 0) + (write ?? 0),
    outputTokens: u.output_tokens,
    cachedInputTokens: read,
    cacheWriteInputTokens: write,
    reasoningTokens: u.output_tokens_details?.thinking_tokens ?? undefined,
    source: "provider",
  };
}

/**
 * Neutral usage → Anthropic. `input_tokens` is what remains after cache reads and writes; a cache
 * figure the provider did not report is `null` (Anthropic's own "not applicable"), never 0.
 */
export function usageToWire(u: Usage): Record<string, unknown> {
  const read = u.cachedInputTokens;
  const write = u.cacheWriteInputTokens;
  const out: Record<string, unknown> = {
    input_tokens: Math.max(0, u.inputTokens - (read ?? 0) - (write ?? 0)),
    cache_creation_input_tokens: write ?? null,
    cache_read_input_tokens: read ?? null,
    output_tokens: u.outputTokens,
  };
  if (u.reasoningTokens !== undefined) out.output_tokens_details = { thinking_tokens: u.reasoningTokens };
  return out;
}

// Providers add fields freely (container, stop_details, service_tier, …): the response side is
// loose and reads only what Sluice carries. Block types Sluice never asks for (server tools'
// blocks) are skipped.
const blockSchemas = {
  text: z.looseObject({ text: z.string() }),
  thinking: z.looseObject({ thinking: z.string(), signature: z.string().nullable().optional() }),
  redacted_thinking: z.looseObject({ data: z.string() }),
  tool_use: z.looseObject({ id: z.string().min(1), name: z.string().min(1), input: z.unknown() }),
};

const responseSchema = z.looseObject({
  id: z.string().optional(),
  content: z.array(z.looseObject({ type: z.string() })),
  stop_reason: z.string().nullable().optional(),
  stop_sequence: z.string().nullable().optional(),
  usage: wireUsageSchema.nullable().optional(),
});

function unreadable(cause: unknown): GatewayError {
  return new GatewayError("upstream_protocol_error", "The provider returned a response the gateway could not read.", { cause });
}

/** Provider body → neutral response. Throws GatewayError("upstream_protocol_error"). */
export function decodeAnthropicResponse(body: unknown): NeutralResponse {
  const parsed = responseSchema.safeParse(body);
  if (!parsed.success) throw unreadable(parsed.error);
  const r = parsed.data;
  let text = "";
  const reasoning: { text: string; signature?: string | undefined }[] = [];
  const toolCalls: ToolCall[] = [];
  for (const raw of r.content) {
    switch (raw.type) {
      case "text": {
        const b = blockSchemas.text.safeParse(raw);
        if (!b.success) throw unreadable(b.error);
        text += b.data.text;
        break;
      }
      case "thinking": {
        const b = blockSchemas.thinking.safeParse(raw);
        if (!b.success) throw unreadable(b.error);
        reasoning.push(b.data.signature ? { text: b.data.thinking, signature: b.data.signature } : { text: b.data.thinking });
        break;
      }
      case "redacted_thinking": {
        const b = blockSchemas.redacted_thinking.safeParse(raw);
        if (!b.success) throw unreadable(b.error);
        reasoning.push({ text: "", signature: redactedSignature(b.data.data) });
        break;
      }
      case "tool_use": {
        const b = blockSchemas.tool_use.safeParse(raw);
        if (!b.success) throw unreadable(b.error);
        toolCalls.push({ id: b.data.id, name: b.data.name, arguments: JSON.stringify(b.data.input ?? {}) });
        break;
      }
    }
  }
  const stopReason = stopFromAnthropic(r.stop_reason);
  const out: NeutralResponse = {
    providerId: r.id,
    text,
    toolCalls,
    stopReason,
    stopSequence: r.stop_sequence ?? undefined,
    usage: r.usage ? usageFromWire(r.usage) : undefined,
  };
  return reasoning.length > 0 ? { ...out, reasoning } : out;
}

/** Gateway stamp id → Anthropic message id: `msg_` plus the stamp's unique part (its prefix dropped). */
export function messageId(stamp: ResponseStamp): string {
  return `msg_${stamp.id.replace(/^[A-Za-z]+[-_]/, "")}`;
}

/** A thinking block, or a redacted one when the signature carries redacted data (thinking.ts). */
export function thinkingBlock(text: string, signature: string | undefined): Record<string, unknown> {
  const data = signature === undefined ? undefined : redactedData(signature);
  // Reasoning from a provider that signs nothing (an OpenAI-compatible server) is shown with an
  // empty signature; sent back, it is dropped from the history an Anthropic provider sees.
  return data === undefined ? { type: "thinking", thinking: text, signature: signature ?? "" } : { type: "redacted_thinking", data };
}

/**
 * Tool call arguments → a tool_use `input` object, or undefined when they are not a JSON object
 * (a provider's malformed call). Empty arguments are a call without arguments.
 */
export function parseToolInput(args: string): Record<string, unknown> | undefined {
  if (args.trim() === "") return {};
  try {
    const v: unknown = JSON.parse(args);
    return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Neutral response → Anthropic message, stamped with the gateway's id and public model. A tool call
 * whose arguments are not a JSON object cannot be written as a tool_use block: when the answer was
 * cut by max_tokens it is the truncated last call and is left out (stop_reason tells the client);
 * otherwise the provider produced an invalid call and the response fails as a protocol error.
 */
export function encodeAnthropicResponse(res: NeutralResponse, stamp: ResponseStamp): Record<string, unknown> {
  const content: Record<string, unknown>[] = (res.reasoning ?? []).map((r) => thinkingBlock(r.text, r.signature));
  const tools: Record<string, unknown>[] = [];
  for (const c of res.toolCalls) {
    const input = parseToolInput(c.arguments);
    if (input === undefined) {
      if (res.stopReason === "max_tokens") continue;
      throw new GatewayError("upstream_protocol_error", "The provider returned a tool call whose arguments are not a JSON object.");
    }
    tools.push({ type: "tool_use", id: c.id, name: c.name, input });
  }
  if (res.text !== "" || res.toolCalls.length === 0) content.push({ type: "text", text: res.text });
  content.push(...tools);
  const body: Record<string, unknown> = {
    id: messageId(stamp),
    type: "message",
    role: "assistant",
    model: stamp.model,
    content,
    stop_reason: anthropicFromStop(res.stopReason, tools.length > 0),
    stop_sequence: res.stopSequence ?? null,
  };
  // Unknown usage is left out rather than reported as zero.
  if (res.usage) body.usage = usageToWire(res.usage);
  return body;
}
