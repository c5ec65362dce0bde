import type { ProtocolId } from "../protocol/codec.ts";
import type { ModelOperation } from "../publication/compile-publication.ts";

/** The public model endpoints: path → the protocol its clients speak, and what they ask for. */
export const GENERATION_ROUTES: readonly { readonly path: string; readonly protocol: ProtocolId; readonly operation: ModelOperation }[] = [
  { path: "/v1/chat/completions", protocol: "openai-chat", operation: "chat" },
  { path: "/v1/responses", protocol: "openai-responses", operation: "chat" },
  { path: "/v1/messages", protocol: "anthropic-messages", operation: "chat" },
  { path: "/v1/embeddings", protocol: "openai-chat", operation: "embeddings" },
  { path: "/v1/moderations", protocol: "openai-chat", operation: "moderations" },
];
