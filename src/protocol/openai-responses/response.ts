import { z } from "zod";
import { GatewayError } from "../../errors/gateway-error.ts";
import type { ResponseStamp } from "../codec.ts";
import type { NeutralRequest, NeutralResponse, StopReason, ToolCall, Usage } from "../neutral.ts";

// ---- Shared ------------------------------------------------------------------------------------

/** A reasoning item's readable text: its summary parts, else its raw reasoning text, one paragraph each. */
export function reasoningItemText(item: { summary: readonly { text: string }[]; content?: readonly { text: string }[] | null | undefined }): string {
  const summary = item.summary.map((s) => s.text).filter((t) => t !== "");
  if (summary.length > 0) return summary.join("\n\n");
  return (item.content ?? [])
    .map((c) => c.text)
    .filter((t) => t !== "")
    .join("\n\n");
}

// ---- Client side: the Response object -------------------------------------------------------

/** A finished response's status, and why it is incomplete when it is. */
export interface Outcome {
  readonly status: "completed" | "incomplete";
  readonly incompleteReason?: "max_output_tokens" | "content_filter" | undefined;
}

/** Neutral stop → Responses status. Only a token limit and a content filter make a response incomplete. */
export function outcomeOf(reason: StopReason): Outcome {
  switch (reason) {
    case "max_tokens":
      return { status: "incomplete", incompleteReason: "max_output_tokens" };
    case "content_filter":
      return { status: "incomplete", incompleteReason: "content_filter" };
    case "end_turn":
    case "stop_sequence":
    case "tool_use":
    case "other":
      return { status: "completed" };
  }
}

export const responseId = (stamp: ResponseStamp): string => `resp_${stamp.id}`;
/** Output item ids: unique per response (the stamp) and per position in `output`. */
export const itemId = (prefix: "msg" | "fc" | "rs", stamp: ResponseStamp, outputIndex: number): string => `${prefix}_${stamp.id}_${outputIndex}`;

type ItemStatus = "in_progress" | "completed" | "incomplete";

export function outputTextPart(text: string): Record<string, unknown> {
  return { type: "output_text", text, annotations: [] };
}

export function messageItem(id: string, status: ItemStatus, text: string | undefined): Record<string, unknown> {
  return { id, type: "message", status, role: "assistant", content: text === undefined ? [] : [outputTextPart(text)] };
}

export function functionCallItem(id: string, status: ItemStatus, call: ToolCall): Record<string, unknown> {
  return { id, type: "function_call", status, arguments: call.arguments, call_id: call.id, name: call.name };
}

/** Neutral reasoning goes out as one reasoning summary part (what Responses clients display). */
export function reasoningItem(id: string, text: string | undefined): Record<string, unknown> {
  return { id, type: "reasoning", summary: text === undefined ? [] : [{ type: "summary_text", text }] };
}

/**
 * The Responses wire usage. The SDK's type requires both breakdowns, so a breakdown the provider
 * did not report is 0; unknown usage as a whole is left out by the callers, never zeroed.
 */
export function usageToWire(u: Usage): Record<string, unknown> {
  return {
    input_tokens: u.inputTokens,
    input_tokens_details: { cached_tokens: u.cachedInputTokens ?? 0, cache_write_tokens: u.cacheWriteInputTokens ?? 0 },
    output_tokens: u.outputTokens,
    output_tokens_details: { reasoning_tokens: u.reasoningTokens ?? 0 },
    total_tokens: u.inputTokens + u.outputTokens,
  };
}

function formatToWire(f: NeutralRequest["responseFormat"]): Record<string, unknown> {
  if (f === undefined) return { type: "text" };
  if (f.type !== "json_schema") return { type: f.type };
  return { type: "json_schema", name: f.name, description: f.description, schema: f.schema, strict: f.strict };
}

export interface ResponseState {
  readonly status: "in_progress" | "completed" | "incomplete" | "failed";
  readonly output: readonly Record<string, unknown>[];
  readonly incompleteReason?: Outcome["incompleteReason"];
  readonly usage?: Usage | undefined;
  readonly errorMessage?: string | undefined;
}

/**
 * A Response object, stamped with the gateway's id and the public model name. The request's
 * settings are echoed when the caller has them (streams); a buffered answer has no request at hand
 * (the codec contract passes none), so those fields hold the API's defaults there.
 */
export function responseObject(stamp: ResponseStamp, request: NeutralRequest | undefined, state: ResponseState): Record<string, unknown> {
  const body: Record<string, unknown> = {
    id: responseId(stamp),
    object: "response",
    created_at: stamp.created,
    status: state.status,
    background: false,
    // ResponseError codes are a closed list; the gateway's own code rides in the `error` event.
    error: state.status === "failed" ? { code: "server_error", message: state.errorMessage ?? "The response failed." } : null,
    incomplete_details: state.incompleteReason ? { reason: state.incompleteReason } : null,
    // Instructions became the leading system message and cannot be told apart from one.
    instructions: null,
    max_output_tokens: request?.maxOutputTokens ?? null,
    model: stamp.model,
    output: state.output,
    parallel_tool_calls: request?.parallelToolCalls ?? true,
    previous_response_id: null,
    reasoning: { effort: request?.reasoningEffort ?? null, summary: null },
    store: false,
    temperature: request?.temperature ?? null,
    text: { format: formatToWire(request?.responseFormat) },
    tool_choice: request?.toolChoice === undefined ? "auto" : request.toolChoice.type === "tool" ? { type: "function", name: request.toolChoice.name } : request.toolChoice.type,
    tools: (request?.tools ?? []).map((t) => ({
      type: "function",
      name: t.name,
      description: t.description ?? null,
      parameters: t.parameters ?? null,
      strict: t.strict ?? null,
    })),
    top_p: request?.topP ?? null,
    truncation: "disabled",
    metadata: request?.metadata ?? {},
    access_programs: null,
  };
  if (request?.user !== undefined) body.user = request.user;
  // Unknown usage is left out rather than reported as zero.
  if (state.usage) body.usage = usageToWire(state.usage);
  return body;
}

/** Neutral response → OpenAI Responses body. */
export function encodeResponsesResponse(res: NeutralResponse, stamp: ResponseStamp): Record<string, unknown> {
  const outcome = outcomeOf(res.stopReason);
  const status: ItemStatus = outcome.status;
  const output: Record<string, unknown>[] = [];
  for (const r of res.reasoning ?? []) {
    if (r.text !== "") output.push(reasoningItem(itemId("rs", stamp, output.length), r.text));
  }
  // An answer made only of tool calls has no message item, as OpenAI's own answers do not.
  if (res.text !== "" || res.toolCalls.length === 0) output.push(messageItem(itemId("msg", stamp, output.length), status, res.text));
  for (const c of res.toolCalls) output.push(functionCallItem(itemId("fc", stamp, output.length), status, c));
  return responseObject(stamp, undefined, { status: outcome.status, incompleteReason: outcome.incompleteReason, output, usage: res.usage });
}

// ---- Backend side: reading a provider's Response object -------------------------------------

export const wireUsageSchema = z.looseObject({
  input_tokens: z.number().int().min(0),
  output_tokens: z.number().int().min(0),
  total_tokens: z.number().int().min(0).optional(),
  input_tokens_details: z
    .looseObject({ cached_tokens: z.number().int().min(0).optional(), cache_write_tokens: z.number().int().min(0).optional() })
    .nullable()
    .optional(),
  output_tokens_details: z.looseObject({ reasoning_tokens: z.number().int().min(0).optional() }).nullable().optional(),
});

export function usageFromWire(u: z.infer<typeof wireUsageSchema>): Usage {
  return {
    // Responses input_tokens already include cached ones, as the neutral figure does.
    inputTokens: u.input_tokens,
    outputTokens: u.output_tokens,
    cachedInputTokens: u.input_tokens_details?.cached_tokens,
    cacheWriteInputTokens: u.input_tokens_details?.cache_write_tokens,
    reasoningTokens: u.output_tokens_details?.reasoning_tokens,
    source: "provider",
  };
}

export const wireMessageSchema = z.looseObject({
  type: z.literal("message"),
  content: z.array(z.looseObject({ type: z.string(), text: z.string().optional(), refusal: z.string().optional() })),
});
export const wireFunctionCallSchema = z.looseObject({
  type: z.literal("function_call"),
  id: z.string().optional(),
  call_id: z.string().min(1),
  name: z.string().min(1),
  arguments: z.string(),
});
export const wireReasoningSchema = z.looseObject({
  type: z.literal("reasoning"),
  summary: z.array(z.looseObject({ text: z.string() })).nullable().optional(),
  content: z.array(z.looseObject({ text: z.string() })).nullable().optional(),
});

/** The text of an output message: output_text parts, and refusals (what the model said instead). */
export function messageText(m: z.infer<typeof wireMessageSchema>): string {
  return m.content.map((p) => (p.type === "output_text" ? (p.text ?? "") : p.type === "refusal" ? (p.refusal ?? "") : "")).join("");
}

export function reasoningText(r: z.infer<typeof wireReasoningSchema>): string {
  return reasoningItemText({ summary: r.summary ?? [], content: r.content });
}

export const incompleteDetailsSchema = z.looseObject({ reason: z.string().nullable().optional() }).nullable().optional();

/** Responses status (+ incomplete reason) → neutral stop, for a response that finished. */
export function stopFromStatus(status: string | null | undefined, incompleteReason: string | null | undefined, hasToolCalls: boolean): StopReason {
  if (status === "incomplete") {
    if (incompleteReason === "max_output_tokens") return "max_tokens";
    if (incompleteReason === "content_filter") return "content_filter";
    return "other";
  }
  return hasToolCalls ? "tool_use" : "end_turn";
}

const responseSchema = z.looseObject({
  id: z.string().optional(),
  status: z.string().nullable().optional(),
  output: z.array(z.looseObject({ type: z.string() })),
  incomplete_details: incompleteDetailsSchema,
  usage: wireUsageSchema.nullable().optional(),
});

/** Provider output items → text, tool calls and reasoning, in their order; unknown item types are skipped. */
export function readOutput(items: readonly { type: string }[]): Pick<NeutralResponse, "text" | "toolCalls"> & { reasoning: string[] } | undefined {
  let text = "";
  const toolCalls: ToolCall[] = [];
  const reasoning: string[] = [];
  for (const item of items) {
    switch (item.type) {
      case "message": {
        const m = wireMessageSchema.safeParse(item);
        if (!m.success) return undefined;
        text += messageText(m.data);
        break;
      }
      case "function_call": {
        const c = wireFunctionCallSchema.safeParse(item);
        if (!c.success) return undefined;
        toolCalls.push({ id: c.data.call_id, name: c.data.name, arguments: c.data.arguments });
        break;
      }
      case "reasoning": {
        const r = wireReasoningSchema.safeParse(item);
        if (!r.success) return undefined;
        const t = reasoningText(r.data);
        if (t !== "") reasoning.push(t);
        break;
      }
      default:
        // Built-in tool items and the like: Sluice never asks for them.
        break;
    }
  }
  return { text, toolCalls, reasoning };
}

const unreadable = (cause: unknown) =>
  new GatewayError("upstream_protocol_error", "The provider returned a response the gateway could not read.", { cause });

/** Provider body → neutral response. Throws GatewayError("upstream_protocol_error"), or "upstream_error" for a failed response. */
export function decodeResponsesResponse(body: unknown): NeutralResponse {
  const parsed = responseSchema.safeParse(body);
  if (!parsed.success) throw unreadable(parsed.error);
  const r = parsed.data;
  switch (r.status) {
    case "failed":
    case "cancelled":
      throw new GatewayError("upstream_error", "The provider reported that the response failed.", { cause: r.status });
    case "queued":
    case "in_progress":
      // Only a background response answers unfinished, and Sluice never asks for one.
      throw unreadable(`status ${r.status}`);
    default:
      break;
  }
  const out = readOutput(r.output);
  if (!out) throw unreadable("malformed output item");
  return {
    providerId: r.id,
    text: out.text,
    reasoning: out.reasoning.length > 0 ? out.reasoning.map((text) => ({ text })) : undefined,
    toolCalls: out.toolCalls,
    stopReason: stopFromStatus(r.status, r.incomplete_details?.reason, out.toolCalls.length > 0),
    usage: r.usage ? usageFromWire(r.usage) : undefined,
  };
}
