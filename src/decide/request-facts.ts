import type { Capability } from "../config/publication-schema.ts";
import { textOf } from "../protocol/content-parts.ts";
import type { NeutralRequest } from "../protocol/neutral.ts";

/** What decision rules may look at, computed once per request from the neutral request. */
export interface RequestFacts {
  /** Text of the last user message (the caller's own words). */
  readonly lastUserText: string;
  readonly estimatedPromptTokens: number;
  readonly toolsPresent: boolean;
  readonly imagesPresent: boolean;
  /** Only headers the bootstrap config marks trusted, lower-case names. */
  readonly trustedHeaders: ReadonlyMap<string, string>;
}


/**
 * Rough token estimate: ~4 characters a token plus a few per message, plus a fixed cost per image.
 * It drives routing thresholds and (later) worst-case budget reservations, never billing.
 */
export function estimatePromptTokens(req: NeutralRequest): number {
  let chars = 0;
  let extra = 0;
  for (const m of req.messages) {
    extra += 4;
    for (const p of m.content) {
      if (p.type === "text") chars += p.text.length;
      else extra += 85;
    }
    if (m.role === "assistant") for (const c of m.toolCalls ?? []) chars += c.name.length + c.arguments.length;
  }
  for (const t of req.tools ?? []) chars += t.name.length + (t.description?.length ?? 0) + JSON.stringify(t.parameters ?? {}).length;
  return Math.ceil(chars / 4) + extra;
}

export function computeFacts(req: NeutralRequest, trustedHeaders: ReadonlyMap<string, string>): RequestFacts {
  let lastUserText = "";
  for (let i = req.messages.length - 1; i >= 0; i--) {
    const m = req.messages[i]!;
    if (m.role === "user") {
      lastUserText = textOf(m.content);
      break;
    }
  }
  return {
    lastUserText,
    estimatedPromptTokens: estimatePromptTokens(req),
    toolsPresent: (req.tools?.length ?? 0) > 0,
    imagesPresent: req.messages.some((m) => m.content.some((p) => p.type === "image")),
    trustedHeaders,
  };
}

/** Capabilities this particular request needs from a backend, on top of the model revision's. */
export function requestCapabilities(req: NeutralRequest, facts: RequestFacts): Capability[] {
  const caps: Capability[] = ["chat"];
  if (req.stream) caps.push("streaming");
  if (facts.toolsPresent) caps.push("tools");
  if (facts.imagesPresent) caps.push("images");
  if (req.responseFormat?.type === "json_schema") caps.push("json-schema");
  return caps;
}
