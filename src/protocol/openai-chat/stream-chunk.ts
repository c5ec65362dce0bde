import { z } from "zod";
import { everyItem, guarded, isCount, isNullishString, isOptString, isRecord, type Reader } from "../fast-guard.ts";
import { isChatWireUsage, wireUsageSchema } from "./response.ts";

/** One Chat Completions stream chunk, as far as the decoder reads it; providers add fields freely. */
export const chatChunkSchema = z.looseObject({
  choices: z
    .array(
      z.looseObject({
        delta: z
          .looseObject({
            role: z.string().nullable().optional(),
            content: z.string().nullable().optional(),
            reasoning_content: z.string().nullable().optional(),
            tool_calls: z
              .array(
                z.looseObject({
                  index: z.number().int().min(0),
                  id: z.string().nullable().optional(),
                  function: z
                    .looseObject({ name: z.string().nullable().optional(), arguments: z.string().nullable().optional() })
                    .nullable()
                    .optional(),
                }),
              )
              .nullable()
              .optional(),
          })
          .nullable()
          .optional(),
        finish_reason: z.string().nullable().optional(),
      }),
    )
    .optional(),
  usage: wireUsageSchema.nullable().optional(),
  error: z.looseObject({ message: z.string().optional() }).optional(),
});

export type ChatChunk = z.infer<typeof chatChunkSchema>;

function isToolCallDelta(t: unknown): boolean {
  if (!isRecord(t) || !isCount(t.index) || !isNullishString(t.id)) return false;
  const f = t.function;
  return f === undefined || f === null || (isRecord(f) && isNullishString(f.name) && isNullishString(f.arguments));
}

function isChoice(c: unknown): boolean {
  if (!isRecord(c) || !isNullishString(c.finish_reason)) return false;
  const d = c.delta;
  if (d === undefined || d === null) return true;
  if (!isRecord(d) || !isNullishString(d.role) || !isNullishString(d.content) || !isNullishString(d.reasoning_content)) return false;
  const calls = d.tool_calls;
  if (calls === undefined || calls === null) return true;
  return Array.isArray(calls) && everyItem(calls, isToolCallDelta);
}

/**
 * Exactly `chatChunkSchema`, by hand. zod on every chunk (some 35 per streamed answer) was the
 * largest part of zod's measured share of the isolate's time; the equivalence rule is in
 * fast-guard.ts. Every choice is checked, not only the first the decoder reads, because zod
 * rejects a chunk whose later choice is malformed. `error` is not nullable in the schema, so a
 * `null` one is refused here too.
 */
export function fastChatChunk(json: unknown): ChatChunk | undefined {
  if (!isRecord(json)) return undefined;
  const choices = json.choices;
  if (choices !== undefined) {
    if (!Array.isArray(choices) || !everyItem(choices, isChoice)) return undefined;
  }
  const usage = json.usage;
  if (usage !== undefined && usage !== null && !isChatWireUsage(usage)) return undefined;
  const error = json.error;
  if (error !== undefined && !(isRecord(error) && isOptString(error.message))) return undefined;
  return json as ChatChunk;
}

/** A parsed chunk, or `undefined` when it is not a chunk: the guard first, zod for the rest. */
export const readChatChunk: Reader<ChatChunk> = guarded(chatChunkSchema, fastChatChunk);
