import type { RequestOperation } from "../kinds/model/model-api.ts";
import type { ProtocolId } from "../protocol/codec.ts";

/** The public model endpoints: path → the protocol its clients speak, and what they ask for. */
export const GENERATION_ROUTES: readonly { readonly path: string; readonly protocol: ProtocolId; readonly operation: RequestOperation }[] = [
  { path: "/v1/chat/completions", protocol: "openai-chat", operation: "chat" },
  { path: "/v1/responses", protocol: "openai-responses", operation: "chat" },
  { path: "/v1/messages", protocol: "anthropic-messages", operation: "chat" },
  { path: "/v1/messages/count_tokens", protocol: "anthropic-messages", operation: "count_tokens" },
  { path: "/v1/embeddings", protocol: "openai-chat", operation: "embeddings" },
];
