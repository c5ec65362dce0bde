import { echo } from "../../errors/echo.ts";
import { GatewayError } from "../../errors/gateway-error.ts";
import { redactedData } from "../anthropic-messages/thinking.ts";
import type { UpstreamOptions } from "../codec.ts";
import { invalidMessage, toolArgumentsObject } from "../invalid-request.ts";
import type { CacheControl, ContentPart, NeutralMessage, NeutralRequest } from "../neutral.ts";

/*
 * The Converse request body (the model id is in the path, not the body): `system` text blocks,
 * `messages` of alternating user and assistant turns whose content blocks are `text`, `image`
 * (bytes, as base64 in JSON), `toolUse`, `toolResult` and `reasoningContent`, a `cachePoint` block
 * after each part marked for caching, `inferenceConfig` (maxTokens, temperature, topP,
 * stopSequences), `toolConfig`, `outputConfig.textFormat` (a JSON schema, as a string) and
 * `additionalModelRequestFields`, passed to the model as is (Claude's `thinking`).
 */

type Block = Record<string, unknown>;

/**
 * A Claude model on Bedrock requires a limit above the thinking budget; a request with a budget
 * but no limit gets this many tokens for the answer plus the budget (as the Anthropic codec does).
 */
export const THINKING_ANSWER_TOKENS = 4096;

/** The image formats Converse takes, by media type. */
const IMAGE_FORMATS: Readonly<Record<string, string>> = { "image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg", "image/gif": "gif", "image/webp": "webp" };


const cachePoint = (cc: CacheControl | undefined): Block[] => (cc ? [{ cachePoint: { type: "default" } }] : []);

/** A data URL → a Converse image block. Converse takes bytes (or S3 objects), never a web URL. */
function imageBlock(url: string, index: number): Block {
  const data = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  if (!data) throw invalidMessage(index, "images must be base64 data URLs for this model's backend (it cannot fetch URLs).");
  const format = IMAGE_FORMATS[data[1]!.toLowerCase()];
  if (format === undefined) throw invalidMessage(index, `image type '${echo(data[1]!)}' is not supported by this model's backend (png, jpeg, gif or webp).`);
  return { image: { format, source: { bytes: data[2] } } };
}

/** Text and image parts → blocks; empty text is dropped (Converse refuses blank text), reasoning has no place here. */
function blocks(parts: readonly ContentPart[], index: number, images: boolean): Block[] {
  const out: Block[] = [];
  for (const p of parts) {
    if (p.type === "text") {
      if (p.text !== "") out.push({ text: p.text }, ...cachePoint(p.cacheControl));
    } else if (p.type === "image") {
      if (!images) throw invalidMessage(index, "images are only allowed in user and tool messages.");
      out.push(imageBlock(p.url, index), ...cachePoint(p.cacheControl));
    }
  }
  return out;
}


/**
 * Assistant turns: signed reasoning replayed as `reasoningContent` (a redacted block as its
 * `redactedContent`), unsigned reasoning dropped (it cannot be replayed), text, then tool calls.
 */
function assistantBlocks(m: Extract<NeutralMessage, { role: "assistant" }>, index: number): Block[] {
  const out: Block[] = [];
  for (const p of m.content) {
    if (p.type !== "reasoning") {
      out.push(...blocks([p], index, false));
      continue;
    }
    if (p.signature === undefined || p.signature === "") continue;
    const data = redactedData(p.signature);
    out.push({ reasoningContent: data === undefined ? { reasoningText: { text: p.text, signature: p.signature } } : { redactedContent: data } });
  }
  for (const c of m.toolCalls ?? []) out.push({ toolUse: { toolUseId: c.id, name: c.name, input: toolArgumentsObject(c, index, "this model's backend") } });
  return out;
}

function toolResult(m: Extract<NeutralMessage, { role: "tool" }>, index: number): Block {
  const result: Block = { toolUseId: m.toolCallId, content: blocks(m.content, index, true).filter((b) => !("cachePoint" in b)) };
  if (m.isError !== undefined) result.status = m.isError ? "error" : "success";
  return { toolResult: result };
}

/**
 * Neutral messages → `system` and `messages`. System and developer text, wherever it stands, goes
 * to `system` in order. Tool results travel in a user turn; Converse wants turns to alternate, so
 * neighbouring turns of one role (tool results and the user text after them) are joined, and
 * turns left empty are omitted.
 */
function conversation(all: readonly NeutralMessage[]): { system: Block[]; messages: { role: "user" | "assistant"; content: Block[] }[]; usesTools: boolean } {
  const system: Block[] = [];
  const messages: { role: "user" | "assistant"; content: Block[] }[] = [];
  let usesTools = false;
  const add = (role: "user" | "assistant", content: Block[]) => {
    if (content.length === 0) return;
    const last = messages.at(-1);
    if (last?.role === role) last.content.push(...content);
    else messages.push({ role, content });
  };
  all.forEach((m, i) => {
    switch (m.role) {
      case "system":
      case "developer":
        system.push(...blocks(m.content, i, false));
        break;
      case "user":
        add("user", blocks(m.content, i, true));
        break;
      case "assistant":
        if (m.toolCalls?.length) usesTools = true;
        add("assistant", assistantBlocks(m, i));
        break;
      case "tool":
        usesTools = true;
        add("user", [toolResult(m, i)]);
        break;
    }
  });
  return { system, messages, usesTools };
}

function refuse(message: string): GatewayError {
  return new GatewayError("invalid_request", message);
}

/** The neutral reasoning budget → Claude's `thinking`, passed through `additionalModelRequestFields`. */
function thinking(req: NeutralRequest): Block {
  const b = req.reasoningBudgetTokens;
  const display = req.reasoningDisplay === undefined ? {} : { display: req.reasoningDisplay };
  if (b === "between_tools") return { type: "between_tools" };
  if (b === "adaptive") return { type: "adaptive", ...display };
  return { type: "enabled", budget_tokens: b, ...display };
}

/**
 * Neutral request → Converse body. Only the features the codec declares it carries reach here;
 * cache hints (`cachePoint` blocks) are kept, end-user ids and OpenAI cache routing hints have no
 * field and are left out (they never change the answer).
 */
export function encodeConverseRequest(req: NeutralRequest, _upstreamModel: string, _options: UpstreamOptions): Record<string, unknown> {
  const { system, messages, usesTools } = conversation(req.messages);
  const body: Record<string, unknown> = { messages };
  if (system.length > 0) body.system = system;

  const inference: Record<string, unknown> = {};
  const budget = typeof req.reasoningBudgetTokens === "number" ? req.reasoningBudgetTokens : undefined;
  if (req.maxOutputTokens !== undefined) inference.maxTokens = req.maxOutputTokens;
  else if (budget !== undefined) inference.maxTokens = THINKING_ANSWER_TOKENS + budget;
  if (req.temperature !== undefined) inference.temperature = req.temperature;
  if (req.topP !== undefined) inference.topP = req.topP;
  if (req.stop !== undefined && req.stop.length > 0) inference.stopSequences = req.stop;
  if (Object.keys(inference).length > 0) body.inferenceConfig = inference;

  const choice = req.toolChoice;
  if (req.tools !== undefined && req.tools.length > 0 && choice?.type !== "none") {
    const tools: Block[] = [];
    for (const t of req.tools) {
      // Converse requires an input schema; a tool declared without parameters takes none.
      const spec: Block = { name: t.name, inputSchema: { json: t.parameters ?? { type: "object", properties: {} } } };
      if (t.description !== undefined) spec.description = t.description;
      tools.push({ toolSpec: spec }, ...cachePoint(t.cacheControl));
    }
    const toolConfig: Block = { tools };
    if (choice?.type === "auto") toolConfig.toolChoice = { auto: {} };
    else if (choice?.type === "required") toolConfig.toolChoice = { any: {} };
    else if (choice?.type === "tool") toolConfig.toolChoice = { tool: { name: choice.name } };
    body.toolConfig = toolConfig;
  } else if (choice?.type === "none" && usesTools) {
    // Converse has no "none" choice, and a conversation with tool calls in it must declare its
    // tools: leaving them out to forbid calls is refused by the provider.
    throw refuse("tool_choice 'none' with tool calls in the conversation is not supported by this model's backend.");
  }

  const f = req.responseFormat;
  if (f?.type === "json_schema") {
    if (f.schema === undefined) throw refuse("a JSON schema response format without a schema is not supported by this model's backend.");
    const jsonSchema: Block = { schema: JSON.stringify(f.schema) };
    if (f.name !== undefined) jsonSchema.name = f.name;
    if (f.description !== undefined) jsonSchema.description = f.description;
    body.outputConfig = { textFormat: { type: "json_schema", structure: { jsonSchema } } };
  }
  if (req.reasoningBudgetTokens !== undefined) body.additionalModelRequestFields = { thinking: thinking(req) };
  return body;
}
