import type { RequestOperation } from "../kinds/model/model-api.ts";
import type { ProtocolId } from "../protocol/codec.ts";

/** The public model endpoints: path → the protocol its clients speak, and what they ask for. */
export const GENERATION_ROUTES: readonly { readonly path: string; readonly protocol: ProtocolId; readonly operation: RequestOperation }[] = [
  { path: "/v1/chat/completions", protocol: "openai-chat", operation: "chat" },
  { path: "/v1/responses", protocol: "openai-responses", operation: "chat" },
  { path: "/v1/messages", protocol: "anthropic-messages", operation: "chat" },
  { path: "/v1/messages/count_tokens", protocol: "anthropic-messages", operation: "count_tokens" },
  { path: "/v1/embeddings", protocol: "openai-chat", operation: "embeddings" },
  { path: "/v1/moderations", protocol: "openai-chat", operation: "moderations" },
];

/** Paths only Anthropic's API has (and the gateway does not serve): its batches, files of messages, legacy completions. */
const ANTHROPIC_ONLY = [/^\/v1\/messages\//, /^\/v1\/complete\/?$/];

/**
 * The protocol whose error envelope answers a request no route answered itself (an unknown path,
 * a wrong method): Anthropic's for a client that says it speaks Anthropic's API (it sends
 * `anthropic-version`, as every Anthropic SDK does); else the protocol of the model route the path
 * names; else Anthropic's for a path only Anthropic's API has (anything under `/v1/messages/`,
 * `/v1/complete`), so an Anthropic client reads a `not_found_error` it understands; else OpenAI's.
 */
export function errorProtocolOf(pathname: string, anthropicVersion: boolean): ProtocolId {
  if (anthropicVersion) return "anthropic-messages";
  const route = GENERATION_ROUTES.find((r) => r.path === pathname);
  if (route) return route.protocol;
  return ANTHROPIC_ONLY.some((re) => re.test(pathname)) ? "anthropic-messages" : "openai-chat";
}
