import { canonicalDigest } from "../digest/canonical-digest.ts";
import { textOf } from "../protocol/content-parts.ts";
import type { NeutralRequest } from "../protocol/neutral.ts";

/** What of a request goes into its cache key, besides who asks and where it was routed. */
export interface RequestKey {
  /** The last user turn's text: what exact and semantic matches compare. */
  readonly prompt: string;
  readonly systemDigest: string;
  readonly toolsDigest: string;
  readonly responseFormat: string;
  /** The conversation before the last turn and every parameter that can change the answer. */
  readonly historyDigest: string;
}

/** Why a request is not cacheable at all. */
export type Uncacheable = "no_user_turn" | "non_text";

/**
 * Request fields that never change the answer's content (transport, billing and routing hints,
 * caller metadata); every other field is part of the key, so a field added later counts until it
 * is listed here.
 */
const NOT_ANSWER_FIELDS: ReadonlySet<string> = new Set([
  "model", "messages", "tools", "toolChoice", "responseFormat", "stream", "streamUsage", "metadata", "user", "safetyIdentifier",
  "cacheControl", "promptCacheKey", "promptCacheRetention", "openAiServiceTier", "anthropicServiceTier", "speed", "inferenceGeo",
]);

const isSystem = (role: string) => role === "system" || role === "developer";

/**
 * The key parts of a chat request: cacheable only when its last message is the user's and holds
 * only text (an image's answer cannot be matched by words). System messages are digested apart
 * from the conversation, so a changed system prompt is its own key part.
 */
export async function requestKey(req: NeutralRequest): Promise<RequestKey | Uncacheable> {
  const last = req.messages.at(-1);
  if (last === undefined || last.role !== "user") return "no_user_turn";
  if (req.messages.some((m) => m.content.some((p) => p.type === "image"))) return "non_text";
  const system = req.messages.filter((m) => isSystem(m.role)).map((m) => textOf(m.content));
  const history = req.messages.slice(0, -1).filter((m) => !isSystem(m.role));
  const params: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(req)) if (!NOT_ANSWER_FIELDS.has(k)) params[k] = v;
  const [systemDigest, toolsDigest, responseFormat, historyDigest] = await Promise.all([
    system.length === 0 ? "" : canonicalDigest(system),
    req.tools === undefined || req.tools.length === 0 ? "" : canonicalDigest({ tools: req.tools, choice: req.toolChoice }),
    req.responseFormat === undefined ? "text" : canonicalDigest(req.responseFormat),
    canonicalDigest({ history, params }),
  ]);
  return { prompt: textOf(last.content), systemDigest, toolsDigest, responseFormat, historyDigest };
}
