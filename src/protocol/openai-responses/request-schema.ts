import { z } from "zod";
import { echo } from "../../errors/echo.ts";
import { OPENAI_SERVICE_TIERS, REASONING_EFFORTS } from "../neutral.ts";

/**
 * OpenAI Responses request body (`POST /v1/responses`), as far as Sluice carries it. Sluice is
 * stateless: nothing is stored, so every field that refers to server-side state is refused with a
 * message saying so. Objects are strict: a field Sluice does not carry is refused by name rather
 * than silently dropped. docs/protocols/openai-responses.md lists every field.
 */

const STATELESS = "Sluice does not store responses; send the whole conversation in 'input' with 'store' false or absent";

const inputText = z.strictObject({ type: z.literal("input_text"), text: z.string() });
const inputImage = z.strictObject({
  type: z.literal("input_image"),
  // Before image_url, so an image given by file id is refused for that reason first.
  file_id: z.null({ error: "file_id images are not supported (Sluice stores no files); send the image as an https or data URL in 'image_url'" }).optional(),
  image_url: z.string().min(1, { error: "an image needs an https or data URL" }),
  detail: z.enum(["auto", "low", "high"]).nullable().optional(),
});
const outputText = z.strictObject({
  type: z.literal("output_text"),
  text: z.string(),
  // Echoed back by clients that replay an earlier response's output; carried no further.
  annotations: z.array(z.unknown()).optional(),
  logprobs: z.array(z.unknown()).nullable().optional(),
});
const refusal = z.strictObject({ type: z.literal("refusal"), refusal: z.string() });

/** Content part types Sluice refuses where they appear, with the reason shown to the client. */
function partError(where: string) {
  const reason = (type: unknown): string => {
    switch (type) {
      case "input_file":
        return "file inputs ('input_file') are not supported";
      case "input_audio":
        return "audio inputs ('input_audio') are not supported";
      default:
        return `content parts of type '${echo(type)}' are not supported in ${where}`;
    }
  };
  return { error: (iss: { code: string; input?: unknown }) => (iss.code === "invalid_union" ? reason((iss.input as { type?: unknown } | undefined)?.type) : undefined) };
}

/**
 * Content is a string or a list of parts; the string becomes one text part before validation
 * (an empty string none), so an invalid part is reported by its own path rather than as a failed
 * union of the two forms.
 */
function textOrParts<T extends z.ZodType>(part: T, textType: "input_text" | "output_text") {
  return z.preprocess((v) => (typeof v === "string" ? (v === "" ? [] : [{ type: textType, text: v }]) : v), z.array(part));
}

const userContent = textOrParts(z.discriminatedUnion("type", [inputText, inputImage], partError("user messages")), "input_text");
const instructionContent = textOrParts(z.discriminatedUnion("type", [inputText], partError("system and developer messages (text only)")), "input_text");
const assistantContent = textOrParts(z.discriminatedUnion("type", [outputText, refusal], partError("assistant messages (use 'output_text' or 'refusal')")), "output_text");
const toolOutput = textOrParts(z.discriminatedUnion("type", [inputText, inputImage], partError("function call outputs")), "input_text");

const itemStatus = z.enum(["in_progress", "completed", "incomplete"]).nullable().optional();
const messageBase = { type: z.literal("message").optional(), id: z.string().nullable().optional(), status: itemStatus };

const messageItem = z.discriminatedUnion("role", [
  z.strictObject({ ...messageBase, role: z.literal("user"), content: userContent }),
  z.strictObject({ ...messageBase, role: z.literal("system"), content: instructionContent }),
  z.strictObject({ ...messageBase, role: z.literal("developer"), content: instructionContent }),
  z.strictObject({
    ...messageBase,
    role: z.literal("assistant"),
    content: assistantContent,
    // A hint for some OpenAI models; no other protocol has a place for it (dropped, documented).
    phase: z.enum(["commentary", "final_answer"]).nullable().optional(),
  }),
]);

const functionCallItem = z.strictObject({
  type: z.literal("function_call"),
  call_id: z.string().min(1),
  name: z.string().min(1),
  arguments: z.string(),
  id: z.string().nullable().optional(),
  status: itemStatus,
});

const functionCallOutputItem = z.strictObject({
  type: z.literal("function_call_output"),
  call_id: z.string().min(1),
  output: toolOutput,
  id: z.string().nullable().optional(),
  status: itemStatus,
});

const reasoningItem = z.strictObject({
  type: z.literal("reasoning"),
  id: z.string().nullable().optional(),
  summary: z.array(z.strictObject({ type: z.literal("summary_text"), text: z.string() })),
  content: z.array(z.strictObject({ type: z.literal("reasoning_text"), text: z.string() })).nullable().optional(),
  // Opaque to everyone but the OpenAI deployment that wrote it: accepted, never forwarded.
  encrypted_content: z.string().nullable().optional(),
  status: itemStatus,
});

function unsupportedItem(type: unknown): string {
  if (type === "item_reference") return `stored items cannot be referenced: ${STATELESS}`;
  return `input items of type '${echo(type)}' are not supported; Sluice carries messages, function_call, function_call_output and reasoning items`;
}

const inputItem = z.discriminatedUnion("type", [messageItem, functionCallItem, functionCallOutputItem, reasoningItem], {
  error: (iss) => (iss.code === "invalid_union" ? unsupportedItem((iss.input as { type?: unknown } | undefined)?.type) : undefined),
});

const functionTool = z.strictObject({
  type: z.literal("function"),
  name: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, "function names are 1-64 letters, digits, '_' or '-'"),
  description: z.string().nullable().optional(),
  parameters: z.record(z.string(), z.unknown()).nullable().optional(),
  strict: z.boolean().nullable().optional(),
});

const toolSchema = z.discriminatedUnion("type", [functionTool], {
  error: (iss) =>
    iss.code === "invalid_union"
      ? `the built-in tool '${echo((iss.input as { type?: unknown } | undefined)?.type)}' is not supported; Sluice carries function tools only`
      : undefined,
});

const toolChoiceSchema = z.union(
  [z.enum(["auto", "none", "required"]), z.strictObject({ type: z.literal("function"), name: z.string().min(1) })],
  { error: "tool_choice must be 'auto', 'none', 'required' or {\"type\": \"function\", \"name\": ...}" },
);

const formatSchema = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("text") }),
  z.strictObject({ type: z.literal("json_object") }),
  z.strictObject({
    type: z.literal("json_schema"),
    name: z.string().min(1),
    schema: z.record(z.string(), z.unknown()),
    description: z.string().optional(),
    strict: z.boolean().nullable().optional(),
  }),
]);

const tokenCount = z.number().int().min(1);

export const responsesRequestSchema = z.strictObject({
  model: z.string().min(1),
  // A string is one user message.
  input: z.preprocess((v) => (typeof v === "string" ? [{ role: "user", content: v }] : v), z.array(inputItem).min(1)),
  instructions: z.string().nullable().optional(),
  tools: z.array(toolSchema).optional(),
  tool_choice: toolChoiceSchema.optional(),
  parallel_tool_calls: z.boolean().nullable().optional(),
  max_output_tokens: tokenCount.nullable().optional(),
  temperature: z.number().min(0).max(2).nullable().optional(),
  top_p: z.number().min(0).max(1).nullable().optional(),
  text: z
    .strictObject({
      format: formatSchema.optional(),
      verbosity: z.enum(["low", "medium", "high"]).nullable().optional(),
    })
    .optional(),
  reasoning: z
    .strictObject({
      effort: z
        .enum(REASONING_EFFORTS, { error: `supported reasoning efforts are ${REASONING_EFFORTS.map((e) => `'${e}'`).join(", ")}` })
        .nullable()
        .optional(),
      // Accepted: reasoning text is passed on whenever a backend returns it (documented).
      summary: z.enum(["auto", "concise", "detailed"]).nullable().optional(),
      generate_summary: z.enum(["auto", "concise", "detailed"]).nullable().optional(),
    })
    .nullable()
    .optional(),
  metadata: z.record(z.string(), z.string()).nullable().optional(),
  user: z.string().optional(),
  // Cache routing hints and the end-user id: no effect on the answer (docs/protocols/openai-responses.md).
  prompt_cache_key: z.string().nullable().optional(),
  prompt_cache_retention: z.enum(["in_memory", "24h"]).nullable().optional(),
  safety_identifier: z.string().nullable().optional(),
  // Changes the price: carried to OpenAI backends only (feature openai_service_tier).
  service_tier: z.enum(OPENAI_SERVICE_TIERS).nullable().optional(),
  stream: z.boolean().nullable().optional(),
  stream_options: z.strictObject({ include_obfuscation: z.boolean().optional() }).nullable().optional(),
  // Stateless only: accepted solely at the values that keep nothing on the server.
  store: z.literal(false, { error: `stored responses are not supported: ${STATELESS}` }).nullable().optional(),
  previous_response_id: z.null({ error: `stored responses are not supported, so there is no previous response to continue: ${STATELESS}` }).optional(),
  conversation: z.null({ error: `stored conversations are not supported: ${STATELESS}` }).optional(),
  background: z.literal(false, { error: "background responses are not supported (they are stored to be fetched later); use 'stream' instead" }).nullable().optional(),
  truncation: z.literal("disabled", { error: "only 'disabled' is supported: Sluice never drops input items to fit a context window" }).nullable().optional(),
  // Stateless clients (store: false) ask for encrypted reasoning to replay it next turn. Sluice
  // accepts the ask and returns no encrypted reasoning; replayed reasoning items are accepted
  // without it. Any other include is refused by name.
  include: z
    .array(
      z.string().refine((v) => v === "reasoning.encrypted_content", {
        error: (iss) => `'${echo(iss.input)}' is not supported: Sluice returns no extra output data`,
      }),
    )
    .nullable()
    .optional(),
});

export type ResponsesRequestBody = z.infer<typeof responsesRequestSchema>;
export type ResponsesInputItem = z.infer<typeof inputItem>;
