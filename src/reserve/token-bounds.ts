import type { NeutralRequest } from "../protocol/neutral.ts";

/** Chat-template tokens a provider adds around each message (role markers, separators). */
const PER_MESSAGE = 8;
/** An image's token cost at most, after the providers' own downscaling (both vendors stay below). */
const PER_IMAGE = 2_000;
/** The hidden tool-use instructions a provider adds when tools are present. */
const TOOLS_PREAMBLE = 1_000;

/** UTF-8 length of a string without encoding it. */
function utf8Bytes(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    // A surrogate pair is 4 bytes over 2 code units.
    else if (c >= 0xd800 && c <= 0xdfff) n += 2;
    else n += 3;
  }
  return n;
}

/**
 * An upper bound on the input tokens of a request, for worst-case reservations. Byte-level BPE
 * tokenizers (the OpenAI and Anthropic ones) emit at most one token per UTF-8 byte, so counting
 * bytes of every text the provider tokenizes bounds the text; template tokens, images and the
 * tool preamble get fixed allowances. The bound is deliberately loose (typically 3-4x the real
 * count): reservations are returned at settlement, and an input above it is recorded as an overrun.
 */
export function inputTokenBound(req: NeutralRequest): number {
  let n = 0;
  for (const m of req.messages) {
    n += PER_MESSAGE;
    for (const p of m.content) n += p.type === "image" ? PER_IMAGE : utf8Bytes(p.text);
    if (m.role === "assistant") for (const c of m.toolCalls ?? []) n += utf8Bytes(c.name) + utf8Bytes(c.arguments) + PER_MESSAGE;
    if (m.role === "tool") n += utf8Bytes(m.toolCallId);
  }
  const tools = req.tools ?? [];
  if (tools.length > 0) {
    n += TOOLS_PREAMBLE;
    for (const t of tools) n += utf8Bytes(t.name) + utf8Bytes(t.description ?? "") + utf8Bytes(JSON.stringify(t.parameters ?? {})) + PER_MESSAGE;
  }
  if (req.responseFormat?.type === "json_schema") n += utf8Bytes(JSON.stringify(req.responseFormat.schema ?? {}));
  return n;
}

/**
 * The output cap an attempt is reserved for: the request's own cap, or the policy's default,
 * injected (`injected` is true). Only Anthropic requests carry a thinking budget, and Anthropic
 * requires `max_tokens`, so an injected cap never has one to make room for.
 */
export function outputCap(req: NeutralRequest, defaultCap: number): { readonly cap: number; readonly injected: boolean } {
  return req.maxOutputTokens !== undefined ? { cap: req.maxOutputTokens, injected: false } : { cap: defaultCap, injected: true };
}
