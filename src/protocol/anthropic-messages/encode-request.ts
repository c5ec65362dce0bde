import { echo } from "../../errors/echo.ts";
import { GatewayError } from "../../errors/gateway-error.ts";
import type { UpstreamOptions } from "../codec.ts";
import { invalidMessage, toolArgumentsObject } from "../invalid-request.ts";
import type { CacheControl, ContentPart, NeutralMessage, NeutralRequest } from "../neutral.ts";
import { redactedData } from "./thinking.ts";

/**
 * Anthropic requires `max_tokens`; a request without a limit (OpenAI clients may omit it) gets this
 * many tokens for the answer, plus the thinking budget when one is set (documented).
 */
export const DEFAULT_MAX_TOKENS = 4096;

type Block = Record<string, unknown>;

const withCache = (block: Block, cc: CacheControl | undefined): Block => (cc ? { ...block, cache_control: cc } : block);


/** An image URL → Anthropic image source: base64 data URLs inline, http(s) URLs by reference. */
function imageBlock(url: string, cc: CacheControl | undefined, index: number): Block {
  const data = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  if (data) return withCache({ type: "image", source: { type: "base64", media_type: data[1], data: data[2] } }, cc);
  if (/^https?:\/\//i.test(url)) return withCache({ type: "image", source: { type: "url", url } }, cc);
  throw invalidMessage(index, "images must be https URLs or base64 data URLs.");
}

/**
 * Content parts → Anthropic blocks. Empty text parts are dropped (Anthropic refuses empty text
 * blocks); reasoning outside an assistant message has no place and is dropped; images are only
 * allowed where Anthropic allows them (user messages and tool results).
 */
function blocks(parts: readonly ContentPart[], index: number, images: boolean): Block[] {
  const out: Block[] = [];
  for (const p of parts) {
    switch (p.type) {
      case "text":
        if (p.text !== "") out.push(withCache({ type: "text", text: p.text }, p.cacheControl));
        break;
      case "image":
        if (!images) throw invalidMessage(index, "images are only allowed in user and tool messages.");
        // `detail` has no Anthropic equivalent and is dropped.
        out.push(imageBlock(p.url, p.cacheControl, index));
        break;
      case "reasoning":
        break;
    }
  }
  return out;
}

/** A single plain text block goes as a string, the form every Anthropic-compatible server accepts. */
function content(bs: Block[]): string | Block[] {
  const only = bs.length === 1 ? bs[0] : undefined;
  return only && only.type === "text" && only.cache_control === undefined ? (only.text as string) : bs;
}


/**
 * Assistant content: signed reasoning becomes thinking (or redacted_thinking) blocks; reasoning
 * without a signature cannot be replayed to Anthropic and is dropped (documented). Tool calls
 * follow the other blocks.
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
    out.push(data === undefined ? { type: "thinking", thinking: p.text, signature: p.signature } : { type: "redacted_thinking", data });
  }
  for (const c of m.toolCalls ?? []) out.push({ type: "tool_use", id: c.id, name: c.name, input: toolArgumentsObject(c, index, "Anthropic") });
  return out;
}

function toolResult(m: Extract<NeutralMessage, { role: "tool" }>, index: number): Block {
  const block: Block = { type: "tool_result", tool_use_id: m.toolCallId };
  const bs = blocks(m.content, index, true);
  if (bs.length > 0) block.content = content(bs);
  if (m.isError !== undefined) block.is_error = m.isError;
  return block;
}

/**
 * Neutral messages → Anthropic `system` and `messages`. System and developer messages, wherever
 * they stand, become top-level system text blocks in order. A run of tool messages becomes ONE user
 * message of tool_result blocks, joined by the user message that directly follows it (the inverse
 * of the decoder's split). Messages left with no content are omitted: Anthropic refuses them.
 */
function conversation(all: readonly NeutralMessage[]): { system: Block[]; messages: Block[] } {
  const system: Block[] = [];
  const messages: Block[] = [];
  for (let i = 0; i < all.length; i++) {
    const m = all[i]!;
    switch (m.role) {
      case "system":
      case "developer":
        system.push(...blocks(m.content, i, false));
        break;
      case "user": {
        const bs = blocks(m.content, i, true);
        if (bs.length > 0) messages.push({ role: "user", content: content(bs) });
        break;
      }
      case "assistant": {
        const bs = assistantBlocks(m, i);
        if (bs.length > 0) messages.push({ role: "assistant", content: content(bs) });
        break;
      }
      case "tool": {
        const results: Block[] = [];
        let j = i;
        for (let t = all[j]; t?.role === "tool"; t = all[++j]) results.push(toolResult(t, j));
        const next = all[j];
        if (next?.role === "user") results.push(...blocks(next.content, j, true));
        else j--;
        messages.push({ role: "user", content: results });
        i = j;
        break;
      }
    }
  }
  return { system, messages };
}

/** The neutral reasoning budget → Anthropic `thinking`, with its display setting. */
function thinking(req: NeutralRequest): Block {
  const b = req.reasoningBudgetTokens;
  const display = req.reasoningDisplay === undefined ? {} : { display: req.reasoningDisplay };
  if (b === "between_tools") return { type: "between_tools" };
  if (b === "adaptive") return { type: "adaptive", ...display };
  return { type: "enabled", budget_tokens: b, ...display };
}

/** Effort values Anthropic's `output_config.effort` has; the others are refused, never mapped. */
const ANTHROPIC_EFFORTS: ReadonlySet<string> = new Set(["low", "medium", "high", "xhigh", "max"]);

function refuse(message: string): GatewayError {
  return new GatewayError("invalid_request", message);
}

/**
 * Reasoning effort and structured output → `output_config`. Anthropic's format is a bare JSON
 * schema: the name (a label) is left out; a schema-less format or one with a description (which
 * the model would read) cannot be expressed and is refused. `json_object` is a feature this codec
 * does not carry, so it never reaches here unless dropped.
 */
function outputConfigOf(req: NeutralRequest): Block | undefined {
  const out: Block = {};
  const effort = req.reasoningEffort;
  if (effort !== undefined) {
    if (!ANTHROPIC_EFFORTS.has(effort)) throw refuse(`reasoning effort '${echo(effort)}' is not supported by this model's backend.`);
    out.effort = effort;
  }
  const f = req.responseFormat;
  if (f?.type === "json_schema") {
    if (f.schema === undefined) throw refuse("a JSON schema response format without a schema is not supported by this model's backend.");
    if (f.description !== undefined) throw refuse("a response format description is not supported by this model's backend.");
    out.format = { type: "json_schema", schema: f.schema };
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

/** Neutral request → Anthropic Messages body for the provider's model id. */
export function encodeAnthropicRequest(req: NeutralRequest, upstreamModel: string, _options: UpstreamOptions): Record<string, unknown> {
  const { system, messages } = conversation(req.messages);
  const body: Record<string, unknown> = {
    model: upstreamModel,
    max_tokens: req.maxOutputTokens ?? DEFAULT_MAX_TOKENS + (typeof req.reasoningBudgetTokens === "number" ? req.reasoningBudgetTokens : 0),
    messages,
  };
  if (system.length > 0) body.system = content(system);
  // Anthropic streams always carry usage; there is nothing to ask for.
  if (req.stream) body.stream = true;
  if (req.temperature !== undefined) body.temperature = req.temperature;
  if (req.topP !== undefined) body.top_p = req.topP;
  if (req.topK !== undefined) body.top_k = req.topK;
  if (req.stop !== undefined) body.stop_sequences = req.stop;
  if (req.reasoningBudgetTokens !== undefined) body.thinking = thinking(req);
  const outputConfig = outputConfigOf(req);
  if (outputConfig !== undefined) body.output_config = outputConfig;
  if (req.cacheControl !== undefined) body.cache_control = req.cacheControl;
  if (req.anthropicServiceTier !== undefined) body.service_tier = req.anthropicServiceTier;
  if (req.speed !== undefined) body.speed = req.speed;
  if (req.inferenceGeo !== undefined) body.inference_geo = req.inferenceGeo;
  // Anthropic's one end-user id serves OpenAI's `user` and `safety_identifier` alike (both are
  // for abuse tooling); `user` wins when both are set. Cache routing hints are left out.
  const userId = req.user ?? req.safetyIdentifier;
  if (userId !== undefined) body.metadata = { user_id: userId };
  const tools = req.tools ?? [];
  if (req.tools !== undefined) {
    body.tools = req.tools.map((t) => {
      // Anthropic requires an input schema; a tool declared without parameters takes none.
      const tool: Block = { name: t.name, input_schema: t.parameters ?? { type: "object", properties: {} } };
      if (t.description !== undefined) tool.description = t.description;
      if (t.strict !== undefined) tool.strict = t.strict;
      return withCache(tool, t.cacheControl);
    });
  }
  const c = req.toolChoice;
  let choice: Block | undefined =
    c === undefined ? undefined : c.type === "required" ? { type: "any" } : c.type === "tool" ? { type: "tool", name: c.name } : { type: c.type };
  // Anthropic puts the parallel switch inside tool_choice (not on "none"). With tools but no
  // tool_choice, "auto" (Anthropic's default) carries a "no parallel calls"; "parallel allowed" is
  // the default and needs nothing.
  if (req.parallelToolCalls !== undefined && c?.type !== "none") {
    if (choice !== undefined) choice = { ...choice, disable_parallel_tool_use: !req.parallelToolCalls };
    else if (!req.parallelToolCalls && tools.length > 0) choice = { type: "auto", disable_parallel_tool_use: true };
  }
  if (choice !== undefined) body.tool_choice = choice;
  return body;
}
