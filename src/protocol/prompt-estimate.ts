import type { NeutralRequest } from "./neutral.ts";

/** Tokens counted for an image part, whatever its size (a provider's figure for a small image). */
const IMAGE_TOKENS = 85;

/**
 * Rough token estimate: ~4 characters a token plus a few per message, plus a fixed cost per
 * image. Replayed reasoning is text the provider reads back, so it counts as text. It drives
 * routing thresholds (the `context` signal), worst-case reservations and the count-tokens
 * estimate, never billing.
 */
export function estimatePromptTokens(req: NeutralRequest): number {
  let chars = 0;
  let extra = 0;
  for (const m of req.messages) {
    extra += 4;
    for (const p of m.content) {
      if (p.type === "image") extra += IMAGE_TOKENS;
      else chars += p.text.length;
    }
    if (m.role === "assistant") for (const c of m.toolCalls ?? []) chars += c.name.length + c.arguments.length;
  }
  for (const t of req.tools ?? []) chars += t.name.length + (t.description?.length ?? 0) + JSON.stringify(t.parameters ?? {}).length;
  return Math.ceil(chars / 4) + extra;
}
