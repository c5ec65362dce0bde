import { z } from "zod";
import { guardOf, isCount, isOptCount, isOptString, isRecord, readersOf, type Guards, type Readers } from "../fast-guard.ts";
import { incompleteDetailsSchema, wireMessageSchema, wireReasoningSchema, wireUsageSchema } from "./response.ts";

const index = z.number().int().min(0);

/** The provider events the stream decoder validates, as far as it reads them; servers add fields freely. */
export const responsesEventSchemas = {
  /** Every event: its `type` (or the SSE event name when the JSON has none). */
  typed: z.looseObject({ type: z.string().optional() }),
  /** Text, refusal, reasoning and argument deltas. */
  delta: z.looseObject({
    output_index: index,
    item_id: z.string().optional(),
    summary_index: index.optional(),
    content_index: index.optional(),
    delta: z.string(),
  }),
  /** `response.output_item.added` / `.done`. */
  itemEvent: z.looseObject({ output_index: index, item: z.looseObject({ type: z.string(), id: z.string().optional() }) }),
  /** A function-call item. */
  callItem: z.looseObject({ call_id: z.string().min(1), name: z.string().min(1), arguments: z.string().optional() }),
  /** `response.completed` / `response.incomplete`. */
  lifecycle: z.looseObject({
    response: z.looseObject({
      status: z.string().nullable().optional(),
      output: z.array(z.looseObject({ type: z.string() })).nullable().optional(),
      incomplete_details: incompleteDetailsSchema,
      usage: wireUsageSchema.nullable().optional(),
    }),
  }),
  /** A message item whose text arrived only in `response.output_item.done`. */
  message: wireMessageSchema,
  /** A reasoning item whose text arrived only in `response.output_item.done`. */
  reasoning: wireReasoningSchema,
};

export type ResponsesCallItem = z.infer<typeof responsesEventSchemas.callItem>;
export type ResponsesLifecycle = z.infer<typeof responsesEventSchemas.lifecycle>;

/** Everything the stream decoder validates, one reader per schema. */
export type ResponsesStreamReaders = Readers<typeof responsesEventSchemas>;

/**
 * Hand-written checks, each exactly its schema above. zod ran on every event at least twice (its
 * `type`, then its body), and that per-event work was a measured hot spot; the rule every guard
 * keeps is in fast-guard.ts. Events seen once or twice per response (the lifecycle's end, message
 * and reasoning items) stay with zod alone.
 */
export const responsesEventGuards: Guards<typeof responsesEventSchemas> = {
  typed: guardOf((e) => isRecord(e) && isOptString(e.type)),
  delta: guardOf(
    (e) =>
      isRecord(e) &&
      isCount(e.output_index) &&
      isOptString(e.item_id) &&
      isOptCount(e.summary_index) &&
      isOptCount(e.content_index) &&
      typeof e.delta === "string",
  ),
  itemEvent: guardOf((e) => isRecord(e) && isCount(e.output_index) && isRecord(e.item) && typeof e.item.type === "string" && isOptString(e.item.id)),
  callItem: guardOf(
    (c) => isRecord(c) && typeof c.call_id === "string" && c.call_id.length >= 1 && typeof c.name === "string" && c.name.length >= 1 && isOptString(c.arguments),
  ),
};

/** What the decoder runs: the guard first, zod for whatever the guard does not vouch for. */
export const responsesStreamReaders: ResponsesStreamReaders = readersOf(responsesEventSchemas, responsesEventGuards);
