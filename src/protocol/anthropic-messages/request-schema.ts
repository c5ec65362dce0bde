import { z } from "zod";
import { echo } from "../../errors/echo.ts";

/**
 * Anthropic Messages request body, as far as Sluice carries it. Objects are strict: a parameter
 * Sluice does not carry is refused by name rather than silently dropped. Server tools are refused
 * before this schema runs (decode-request.ts), so that the error can name the tool.
 */

/** Error text for a discriminated union whose `type` (or `role`) matched no option. */
function unsupported(what: string, accepted: string, hint: (value: string) => string | undefined = () => undefined) {
  return (issue: { code?: string; input?: unknown; note?: string; discriminator?: string }): string | undefined => {
    if (issue.code !== "invalid_union" || issue.note !== "No matching discriminator") return undefined;
    const key = issue.discriminator ?? "type";
    const input = issue.input as Record<string, unknown> | undefined;
    const value = typeof input === "object" && input !== null ? input[key] : undefined;
    if (typeof value !== "string") return `'${key}' must be one of ${accepted}.`;
    return hint(value) ?? `${what} '${echo(value)}' is not supported; Sluice accepts ${accepted}.`;
  };
}

const cacheControl = z.strictObject({ type: z.literal("ephemeral"), ttl: z.enum(["5m", "1h"]).optional() }).nullable().optional();

// Responses carry `citations: null` on text blocks and clients send response content back as it
// came, so an empty citation list is accepted; actual citations are not carried.
const textBlock = z.strictObject({
  type: z.literal("text"),
  text: z.string(),
  cache_control: cacheControl,
  citations: z.array(z.unknown()).max(0, "citations are not supported").nullable().optional(),
});

const imageBlock = z.strictObject({
  type: z.literal("image"),
  source: z.discriminatedUnion(
    "type",
    [
      z.strictObject({
        type: z.literal("base64"),
        media_type: z.enum(["image/jpeg", "image/png", "image/gif", "image/webp"]),
        data: z.string().min(1),
      }),
      z.strictObject({ type: z.literal("url"), url: z.string().min(1) }),
    ],
    { error: unsupported("image source", "'base64' and 'url' sources") },
  ),
  cache_control: cacheControl,
});

const documentHint = (type: string) =>
  type === "document"
    ? "document blocks are not supported by Sluice; send the document's text as a text block, or its pages as images."
    : undefined;

const toolResultBlock = z.strictObject({
  type: z.literal("tool_result"),
  tool_use_id: z.string().min(1),
  content: z
    .union([
      z.string(),
      z.array(z.discriminatedUnion("type", [textBlock, imageBlock], { error: unsupported("tool_result content block", "text and image blocks", documentHint) })),
    ])
    .optional(),
  is_error: z.boolean().optional(),
  cache_control: cacheControl,
});

const toolUseBlock = z.strictObject({
  type: z.literal("tool_use"),
  id: z.string().min(1),
  name: z.string().min(1),
  input: z.record(z.string(), z.unknown()),
  cache_control: cacheControl,
  // Responses say who called the tool; only the model itself ("direct") is carried.
  caller: z.strictObject({ type: z.literal("direct") }).optional(),
});

const thinkingBlock = z.strictObject({ type: z.literal("thinking"), thinking: z.string(), signature: z.string() });
const redactedThinkingBlock = z.strictObject({ type: z.literal("redacted_thinking"), data: z.string().min(1) });

const userBlock = z.discriminatedUnion("type", [textBlock, imageBlock, toolResultBlock], {
  error: unsupported("content block", "text, image and tool_result blocks in user messages", documentHint),
});
const assistantBlock = z.discriminatedUnion("type", [textBlock, toolUseBlock, thinkingBlock, redactedThinkingBlock], {
  error: unsupported("content block", "text, tool_use, thinking and redacted_thinking blocks in assistant messages"),
});

export const anthropicMessageSchema = z.discriminatedUnion(
  "role",
  [
    z.strictObject({ role: z.literal("user"), content: z.union([z.string(), z.array(userBlock).min(1)]) }),
    z.strictObject({ role: z.literal("assistant"), content: z.union([z.string(), z.array(assistantBlock)]) }),
    // A system message in the conversation (text only), kept where it stands.
    z.strictObject({ role: z.literal("system"), content: z.union([z.string(), z.array(textBlock)]) }),
  ],
  { error: unsupported("role", "'user', 'assistant' and 'system'") },
);

const toolSchema = z.strictObject({
  type: z.literal("custom").nullable().optional(),
  name: z.string().regex(/^[a-zA-Z0-9_-]{1,128}$/, "tool names are 1-128 letters, digits, '_' or '-'"),
  description: z.string().optional(),
  input_schema: z.record(z.string(), z.unknown()),
  cache_control: cacheControl,
  strict: z.boolean().optional(),
});

const parallel = { disable_parallel_tool_use: z.boolean().optional() };
const toolChoiceSchema = z.discriminatedUnion(
  "type",
  [
    z.strictObject({ type: z.literal("auto"), ...parallel }),
    z.strictObject({ type: z.literal("any"), ...parallel }),
    z.strictObject({ type: z.literal("tool"), name: z.string().min(1), ...parallel }),
    z.strictObject({ type: z.literal("none") }),
  ],
  { error: unsupported("tool_choice type", "'auto', 'any', 'tool' and 'none'") },
);

const display = z.enum(["summarized", "omitted"]).nullable().optional();
const thinkingSchema = z.discriminatedUnion(
  "type",
  [
    z.strictObject({ type: z.literal("enabled"), budget_tokens: z.number().int().min(1024), display }),
    z.strictObject({ type: z.literal("adaptive"), display }),
    z.strictObject({ type: z.literal("between_tools") }),
    z.strictObject({ type: z.literal("disabled") }),
  ],
  { error: unsupported("thinking type", "'enabled' (with budget_tokens), 'adaptive', 'between_tools' and 'disabled'") },
);

const outputConfigSchema = z.strictObject({
  effort: z.enum(["low", "medium", "high", "xhigh", "max"]).nullable().optional(),
  // Structured output: a JSON schema, passed on as it is (the provider checks which keywords it supports).
  format: z.strictObject({ type: z.literal("json_schema"), schema: z.record(z.string(), z.unknown()) }).nullable().optional(),
});

export const anthropicRequestSchema = z.strictObject({
  model: z.string().min(1),
  max_tokens: z.number().int().min(1),
  messages: z.array(anthropicMessageSchema).min(1),
  system: z.union([z.string(), z.array(textBlock)]).optional(),
  metadata: z.strictObject({ user_id: z.string().nullable().optional() }).optional(),
  stop_sequences: z.array(z.string()).optional(),
  stream: z.boolean().optional(),
  // Current SDK types no longer list temperature, top_p and top_k; older clients still send them.
  temperature: z.number().min(0).max(1).optional(),
  top_p: z.number().min(0).max(1).optional(),
  top_k: z.number().int().min(0).optional(),
  tools: z.array(toolSchema).optional(),
  tool_choice: toolChoiceSchema.optional(),
  thinking: thinkingSchema.optional(),
  output_config: outputConfigSchema.optional(),
  // Request-level cache breakpoint: a cache hint, like the per-block ones.
  cache_control: cacheControl,
  // Change capacity, price or where inference runs: carried to Anthropic backends only (features).
  service_tier: z.enum(["auto", "standard_only"]).optional(),
  speed: z.enum(["standard", "fast"]).nullable().optional(),
  inference_geo: z.string().min(1).nullable().optional(),
  container: z.null({ error: "containers are not supported: Sluice keeps no code-execution state and forwards no server tools" }).optional(),
  diagnostics: z
    .null({ error: "diagnostics are not supported: the message ids Sluice returns are its own, not the provider's, and no diagnostics are returned" })
    .optional(),
});

/**
 * A token-count body (`POST /v1/messages/count_tokens`): a Messages body whose output cap is not
 * required, since nothing is generated. Output-only parameters are accepted (a client may pass the
 * parameters of the message it is about to send) and not counted.
 */
export const anthropicCountRequestSchema = anthropicRequestSchema.extend({ max_tokens: z.number().int().min(1).optional() });

export type AnthropicRequestBody = z.infer<typeof anthropicRequestSchema>;
export type AnthropicCountRequestBody = z.infer<typeof anthropicCountRequestSchema>;
export type AnthropicMessageBody = z.infer<typeof anthropicMessageSchema>;
export type AnthropicTextBlock = z.infer<typeof textBlock>;
export type AnthropicImageBlock = z.infer<typeof imageBlock>;
export type AnthropicCacheControl = z.infer<typeof cacheControl>;
