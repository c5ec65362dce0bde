import { z } from "zod";
import {
  guardOf,
  isCount,
  isNullishCount,
  isNullishString,
  isOptCount,
  isOptString,
  isRecord,
  readersOf,
  type Guards,
  type Readers,
} from "../fast-guard.ts";

const count = z.number().int().min(0);
const index = z.number().int().min(0);

// Every figure is optional here: message_start carries the input side, message_delta the
// cumulative output side (and, from newer servers, the input side again).
const streamUsageSchema = z.looseObject({
  input_tokens: count.nullable().optional(),
  output_tokens: count.nullable().optional(),
  cache_creation_input_tokens: count.nullable().optional(),
  cache_read_input_tokens: count.nullable().optional(),
  output_tokens_details: z.looseObject({ thinking_tokens: count.optional() }).nullable().optional(),
});
export type StreamUsage = z.infer<typeof streamUsageSchema>;

/** The stream's events by `type`, as far as the decoder reads them; Anthropic adds fields freely. */
export const anthropicEventSchemas = {
  message_start: z.looseObject({ message: z.looseObject({ usage: streamUsageSchema.nullable().optional() }) }),
  content_block_start: z.looseObject({ index, content_block: z.looseObject({ type: z.string() }) }),
  content_block_delta: z.looseObject({ index, delta: z.looseObject({ type: z.string() }) }),
  content_block_stop: z.looseObject({ index }),
  message_delta: z.looseObject({
    delta: z.looseObject({ stop_reason: z.string().nullable().optional(), stop_sequence: z.string().nullable().optional() }),
    usage: streamUsageSchema.nullable().optional(),
  }),
  error: z.looseObject({ error: z.looseObject({ type: z.string().optional() }).nullable().optional() }),
};

/** A content block's start by its `type`. */
export const anthropicBlockSchemas = {
  text: z.looseObject({ text: z.string().optional() }),
  thinking: z.looseObject({ thinking: z.string().optional(), signature: z.string().nullable().optional() }),
  redacted_thinking: z.looseObject({ data: z.string() }),
  tool_use: z.looseObject({ id: z.string().min(1), name: z.string().min(1), input: z.unknown() }),
};

/** A content block's delta by its `type`. */
export const anthropicDeltaSchemas = {
  text_delta: z.looseObject({ text: z.string() }),
  input_json_delta: z.looseObject({ partial_json: z.string() }),
  thinking_delta: z.looseObject({ thinking: z.string() }),
  signature_delta: z.looseObject({ signature: z.string() }),
};

/** Everything the stream decoder validates, one reader per schema. */
export interface AnthropicStreamReaders {
  readonly events: Readers<typeof anthropicEventSchemas>;
  readonly blocks: Readers<typeof anthropicBlockSchemas>;
  readonly deltas: Readers<typeof anthropicDeltaSchemas>;
}

// The guards: each one exactly its schema above, written by hand because zod on every stream
// event (a content block delta every few tokens) was a measured hot spot. The rule every guard
// keeps is in fast-guard.ts. Rare events (error, redacted_thinking, tool_use) stay with zod alone.

function isStreamUsage(u: unknown): boolean {
  if (u === undefined || u === null) return true;
  if (!isRecord(u)) return false;
  if (!isNullishCount(u.input_tokens) || !isNullishCount(u.output_tokens)) return false;
  if (!isNullishCount(u.cache_creation_input_tokens) || !isNullishCount(u.cache_read_input_tokens)) return false;
  const d = u.output_tokens_details;
  return d === undefined || d === null || (isRecord(d) && isOptCount(d.thinking_tokens));
}

/** Block starts and deltas alike: an `index` and a `type`d object under `key`. */
function isIndexedTyped(e: unknown, key: "content_block" | "delta"): boolean {
  if (!isRecord(e) || !isCount(e.index)) return false;
  const inner = e[key];
  return isRecord(inner) && typeof inner.type === "string";
}

export const anthropicEventGuards: Guards<typeof anthropicEventSchemas> = {
  message_start: guardOf((e) => isRecord(e) && isRecord(e.message) && isStreamUsage(e.message.usage)),
  content_block_start: guardOf((e) => isIndexedTyped(e, "content_block")),
  content_block_delta: guardOf((e) => isIndexedTyped(e, "delta")),
  content_block_stop: guardOf((e) => isRecord(e) && isCount(e.index)),
  message_delta: guardOf(
    (e) =>
      isRecord(e) && isRecord(e.delta) && isNullishString(e.delta.stop_reason) && isNullishString(e.delta.stop_sequence) && isStreamUsage(e.usage),
  ),
};

export const anthropicBlockGuards: Guards<typeof anthropicBlockSchemas> = {
  text: guardOf((b) => isRecord(b) && isOptString(b.text)),
  thinking: guardOf((b) => isRecord(b) && isOptString(b.thinking) && isNullishString(b.signature)),
};

export const anthropicDeltaGuards: Guards<typeof anthropicDeltaSchemas> = {
  text_delta: guardOf((d) => isRecord(d) && typeof d.text === "string"),
  input_json_delta: guardOf((d) => isRecord(d) && typeof d.partial_json === "string"),
  thinking_delta: guardOf((d) => isRecord(d) && typeof d.thinking === "string"),
  signature_delta: guardOf((d) => isRecord(d) && typeof d.signature === "string"),
};

/** What the decoder runs: the guard first, zod for whatever the guard does not vouch for. */
export const anthropicStreamReaders: AnthropicStreamReaders = {
  events: readersOf(anthropicEventSchemas, anthropicEventGuards),
  blocks: readersOf(anthropicBlockSchemas, anthropicBlockGuards),
  deltas: readersOf(anthropicDeltaSchemas, anthropicDeltaGuards),
};
