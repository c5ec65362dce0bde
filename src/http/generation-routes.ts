import type { ProtocolId } from "../protocol/codec.ts";

/** The public generation endpoints: path → the protocol its clients speak. */
export const GENERATION_ROUTES: readonly { readonly path: string; readonly protocol: ProtocolId }[] = [
  { path: "/v1/chat/completions", protocol: "openai-chat" },
  { path: "/v1/responses", protocol: "openai-responses" },
  { path: "/v1/messages", protocol: "anthropic-messages" },
];
