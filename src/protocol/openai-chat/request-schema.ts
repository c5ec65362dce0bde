import { z } from "zod";
import { REASONING_EFFORTS } from "../neutral.ts";

/**
 * OpenAI Chat Completions request body, as far as Sluice carries it. Top-level objects are strict:
 * a parameter Sluice does not carry is refused by name rather than silently dropped.
 */

const textPart = z.strictObject({ type: z.literal("text"), text: z.string() });
const imagePart = z.strictObject({
  type: z.literal("image_url"),
  image_url: z.strictObject({ url: z.string().min(1), detail: z.enum(["auto", "low", "high"]).optional() }),
});
const refusalPart = z.strictObject({ type: z.literal("refusal"), refusal: z.string() });

const userContent = z.union([z.string(), z.array(z.discriminatedUnion("type", [textPart, imagePart])).min(1)]);
const textContent = z.union([z.string(), z.array(textPart).min(1)]);

const toolCallSchema = z.strictObject({
  id: z.string().min(1),
  type: z.literal("function"),
  function: z.strictObject({ name: z.string().min(1), arguments: z.string() }),
});

export const chatMessageSchema = z.discriminatedUnion("role", [
  z.strictObject({ role: z.literal("system"), content: textContent, name: z.string().optional() }),
  z.strictObject({ role: z.literal("developer"), content: textContent, name: z.string().optional() }),
  z.strictObject({ role: z.literal("user"), content: userContent, name: z.string().optional() }),
  z.strictObject({
    role: z.literal("assistant"),
    content: z.union([z.string(), z.array(z.discriminatedUnion("type", [textPart, refusalPart])), z.null()]).optional(),
    name: z.string().optional(),
    tool_calls: z.array(toolCallSchema).optional(),
    refusal: z.string().nullable().optional(),
  }),
  z.strictObject({ role: z.literal("tool"), content: textContent, tool_call_id: z.string().min(1) }),
]);

const toolSchema = z.strictObject({
  type: z.literal("function"),
  function: z.strictObject({
    name: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, "function names are 1-64 letters, digits, '_' or '-'"),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
    strict: z.boolean().nullable().optional(),
  }),
});

const toolChoiceSchema = z.union([
  z.enum(["auto", "none", "required"]),
  z.strictObject({ type: z.literal("function"), function: z.strictObject({ name: z.string().min(1) }) }),
]);

const responseFormatSchema = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("text") }),
  z.strictObject({ type: z.literal("json_object") }),
  z.strictObject({
    type: z.literal("json_schema"),
    json_schema: z.strictObject({
      name: z.string().min(1),
      description: z.string().optional(),
      schema: z.record(z.string(), z.unknown()).optional(),
      strict: z.boolean().nullable().optional(),
    }),
  }),
]);

const tokenCount = z.number().int().min(1);

export const chatRequestSchema = z.strictObject({
  model: z.string().min(1),
  messages: z.array(chatMessageSchema).min(1),
  stream: z.boolean().nullable().optional(),
  stream_options: z
    .strictObject({ include_usage: z.boolean().optional(), include_obfuscation: z.boolean().optional() })
    .nullable()
    .optional(),
  max_tokens: tokenCount.nullable().optional(),
  max_completion_tokens: tokenCount.nullable().optional(),
  temperature: z.number().min(0).max(2).nullable().optional(),
  top_p: z.number().min(0).max(1).nullable().optional(),
  presence_penalty: z.number().min(-2).max(2).nullable().optional(),
  frequency_penalty: z.number().min(-2).max(2).nullable().optional(),
  seed: z.number().int().nullable().optional(),
  stop: z.union([z.string(), z.array(z.string()).max(4)]).nullable().optional(),
  tools: z.array(toolSchema).optional(),
  tool_choice: toolChoiceSchema.optional(),
  parallel_tool_calls: z.boolean().optional(),
  response_format: responseFormatSchema.optional(),
  reasoning_effort: z.enum(REASONING_EFFORTS).nullable().optional(),
  verbosity: z.enum(["low", "medium", "high"]).nullable().optional(),
  // Cache routing hints and the end-user id: no effect on the answer (docs/protocols/openai-chat.md).
  prompt_cache_key: z.string().nullable().optional(),
  prompt_cache_retention: z.enum(["in_memory", "24h"]).nullable().optional(),
  safety_identifier: z.string().nullable().optional(),
  // Changes the price: carried to OpenAI backends only (feature openai_service_tier).
  service_tier: z.enum(["auto", "default", "flex", "scale", "priority", "fast"]).nullable().optional(),
  metadata: z.record(z.string(), z.string()).nullable().optional(),
  user: z.string().optional(),
  // Accepted only at their defaults: Sluice returns one choice, no logprobs, and stores nothing.
  n: z.literal(1, { error: "only n=1 is supported" }).nullable().optional(),
  logprobs: z.literal(false, { error: "logprobs are not supported" }).nullable().optional(),
  store: z.literal(false, { error: "stored completions are not supported" }).nullable().optional(),
});

export type ChatRequestBody = z.infer<typeof chatRequestSchema>;
export type ChatMessageBody = z.infer<typeof chatMessageSchema>;
