import { z } from "zod";
import { GatewayError } from "../../errors/gateway-error.ts";
import type { ResponseStamp } from "../codec.ts";
import { everyItem, isCount, isNullishString, isOptCount, isOptString, isRecord } from "../fast-guard.ts";
import type { NeutralResponse, StopReason, TokenLogprob, Usage } from "../neutral.ts";

/** OpenAI `finish_reason` ↔ neutral stop reason. "stop" covers both a natural end and a stop sequence. */
export function stopFromFinish(reason: string | null | undefined): StopReason {
  switch (reason) {
    case "stop":
      return "end_turn";
    case "length":
      return "max_tokens";
    case "tool_calls":
    case "function_call":
      return "tool_use";
    case "content_filter":
      return "content_filter";
    default:
      return "other";
  }
}

export function finishFromStop(reason: StopReason): string {
  switch (reason) {
    case "end_turn":
    case "stop_sequence":
    case "other":
      return "stop";
    case "max_tokens":
      return "length";
    case "tool_use":
      return "tool_calls";
    case "content_filter":
      return "content_filter";
  }
}

export const wireUsageSchema = z.looseObject({
  prompt_tokens: z.number().int().min(0),
  completion_tokens: z.number().int().min(0),
  total_tokens: z.number().int().min(0).optional(),
  prompt_tokens_details: z
    .looseObject({ cached_tokens: z.number().int().min(0).optional(), cache_write_tokens: z.number().int().min(0).optional() })
    .nullable()
    .optional(),
  completion_tokens_details: z.looseObject({ reasoning_tokens: z.number().int().min(0).optional() }).nullable().optional(),
});

export type ChatWireUsage = z.infer<typeof wireUsageSchema>;

/** Exactly `wireUsageSchema` (see fast-guard.ts): usage arrives in every stream's last chunk. */
export function isChatWireUsage(u: unknown): u is ChatWireUsage {
  if (!isRecord(u) || !isCount(u.prompt_tokens) || !isCount(u.completion_tokens) || !isOptCount(u.total_tokens)) return false;
  const p = u.prompt_tokens_details;
  if (p !== undefined && p !== null && !(isRecord(p) && isOptCount(p.cached_tokens) && isOptCount(p.cache_write_tokens))) return false;
  const c = u.completion_tokens_details;
  return c === undefined || c === null || (isRecord(c) && isOptCount(c.reasoning_tokens));
}

export function usageFromWire(u: ChatWireUsage): Usage {
  return {
    inputTokens: u.prompt_tokens,
    outputTokens: u.completion_tokens,
    cachedInputTokens: u.prompt_tokens_details?.cached_tokens,
    // Like cached_tokens, a part of prompt_tokens (which counts all input).
    cacheWriteInputTokens: u.prompt_tokens_details?.cache_write_tokens,
    reasoningTokens: u.completion_tokens_details?.reasoning_tokens,
    source: "provider",
  };
}

export function usageToWire(u: Usage): Record<string, unknown> {
  const out: Record<string, unknown> = {
    prompt_tokens: u.inputTokens,
    completion_tokens: u.outputTokens,
    total_tokens: u.inputTokens + u.outputTokens,
  };
  // Each breakdown figure is written only when known (the SDK's type makes both optional).
  const details: Record<string, number> = {};
  if (u.cachedInputTokens !== undefined) details.cached_tokens = u.cachedInputTokens;
  if (u.cacheWriteInputTokens !== undefined) details.cache_write_tokens = u.cacheWriteInputTokens;
  if (Object.keys(details).length > 0) out.prompt_tokens_details = details;
  if (u.reasoningTokens !== undefined) out.completion_tokens_details = { reasoning_tokens: u.reasoningTokens };
  return out;
}

// Providers add fields freely (system_fingerprint, service_tier, logprobs, ...): the response side
// is loose, and only what Sluice carries is read.
export const chatResponseSchema = z.looseObject({
  id: z.string().optional(),
  choices: z
    .array(
      z.looseObject({
        message: z.looseObject({
          content: z.string().nullable().optional(),
          refusal: z.string().nullable().optional(),
          tool_calls: z
            .array(z.looseObject({ id: z.string(), function: z.looseObject({ name: z.string(), arguments: z.string() }) }))
            .nullable()
            .optional(),
        }),
        finish_reason: z.string().nullable().optional(),
      }),
    )
    .min(1),
  usage: wireUsageSchema.nullable().optional(),
});

export type ChatWireResponse = z.infer<typeof chatResponseSchema>;

function isToolCall(c: unknown): boolean {
  if (!isRecord(c) || typeof c.id !== "string") return false;
  const f = c.function;
  return isRecord(f) && typeof f.name === "string" && typeof f.arguments === "string";
}

function isChoice(c: unknown): boolean {
  if (!isRecord(c) || !isNullishString(c.finish_reason)) return false;
  const m = c.message;
  if (!isRecord(m) || !isNullishString(m.content) || !isNullishString(m.refusal)) return false;
  const calls = m.tool_calls;
  if (calls === undefined || calls === null) return true;
  return Array.isArray(calls) && everyItem(calls, isToolCall);
}

/**
 * Exactly `chatResponseSchema`, checked by hand in front of zod because every buffered answer
 * passes here (zod was a measured hot spot; the rule is in fast-guard.ts). Every choice is
 * checked, as zod checks every one, though only the first is read.
 */
export function fastChatResponse(body: unknown): ChatWireResponse | undefined {
  if (!isRecord(body) || !isOptString(body.id)) return undefined;
  const choices = body.choices;
  if (!Array.isArray(choices) || choices.length < 1 || !everyItem(choices, isChoice)) return undefined;
  const usage = body.usage;
  if (usage !== undefined && usage !== null && !isChatWireUsage(usage)) return undefined;
  return body as ChatWireResponse;
}

/** Provider body → neutral response. Throws GatewayError("upstream_protocol_error"). */
export function decodeChatResponse(body: unknown): NeutralResponse {
  const fast = fastChatResponse(body);
  if (fast !== undefined) return chatResponseToNeutral(fast);
  const parsed = chatResponseSchema.safeParse(body);
  if (!parsed.success) {
    throw new GatewayError("upstream_protocol_error", "The provider returned a response the gateway could not read.", {
      cause: parsed.error,
    });
  }
  return chatResponseToNeutral(parsed.data);
}

/** A validated provider body → neutral response (the part of decoding after validation). */
export function chatResponseToNeutral(r: ChatWireResponse): NeutralResponse {
  const choice = r.choices[0]!;
  return {
    providerId: r.id,
    text: choice.message.content ?? choice.message.refusal ?? "",
    toolCalls: (choice.message.tool_calls ?? []).map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })),
    stopReason: stopFromFinish(choice.finish_reason),
    usage: r.usage ? usageFromWire(r.usage) : undefined,
    logprobs: logprobsOf(choice.logprobs),
  };
}

/** A token and its log-probability as the wire has them, or undefined when either is the wrong type. */
function tokenOf(raw: unknown): { token: string; logprob: number } | undefined {
  if (typeof raw !== "object" || raw === null) return undefined;
  const { token, logprob } = raw as { token?: unknown; logprob?: unknown };
  return typeof token === "string" && typeof logprob === "number" ? { token, logprob } : undefined;
}

/**
 * A choice's `logprobs.content`, read only when it has the documented shape: a provider that
 * returns none (or something else there) leaves the answer without log-probabilities, which a
 * looper's confidence score reads as unknown, never as a confident answer. Read by hand rather
 * than through a schema: it runs on every token of every Looper step, and a schema's parse and
 * copy cost more there than the rest of the body's decode.
 */
function logprobsOf(raw: unknown): TokenLogprob[] | undefined {
  if (typeof raw !== "object" || raw === null) return undefined;
  const content = (raw as { content?: unknown }).content;
  if (!Array.isArray(content)) return undefined;
  const out: TokenLogprob[] = new Array(content.length);
  for (let i = 0; i < content.length; i++) {
    const item: unknown = content[i];
    const t = tokenOf(item);
    if (t === undefined) return undefined;
    const alternatives = (item as { top_logprobs?: unknown }).top_logprobs;
    const top: { token: string; logprob: number }[] = [];
    if (alternatives !== undefined) {
      if (!Array.isArray(alternatives)) return undefined;
      for (const a of alternatives) {
        const alt = tokenOf(a);
        if (alt === undefined) return undefined;
        top.push(alt);
      }
    }
    out[i] = { token: t.token, logprob: t.logprob, top };
  }
  return out;
}

/** Neutral response → OpenAI Chat Completions body, stamped with the gateway's id and public model. */
export function encodeChatResponse(res: NeutralResponse, stamp: ResponseStamp): Record<string, unknown> {
  const message: Record<string, unknown> = {
    role: "assistant",
    content: res.text === "" && res.toolCalls.length > 0 ? null : res.text,
    refusal: null,
  };
  if (res.toolCalls.length > 0) {
    message.tool_calls = res.toolCalls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } }));
  }
  const body: Record<string, unknown> = {
    id: `chatcmpl-${stamp.id}`,
    object: "chat.completion",
    created: stamp.created,
    model: stamp.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: finishFromStop(res.stopReason) }],
  };
  // Unknown usage is left out rather than reported as zero.
  if (res.usage) body.usage = usageToWire(res.usage);
  return body;
}
