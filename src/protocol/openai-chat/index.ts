import type { Codec } from "../codec.ts";
import { decodeChatRequest } from "./decode-request.ts";
import { encodeChatRequest } from "./encode-request.ts";
import { decodeChatResponse, encodeChatResponse } from "./response.ts";
import { createChatStreamDecoder, createChatStreamEncoder } from "./stream.ts";

/** OpenAI Chat Completions (`POST /v1/chat/completions`), both as client and as backend protocol. */
export const openAiChatCodec: Codec = {
  id: "openai-chat",
  decodeRequest: decodeChatRequest,
  encodeResponse: encodeChatResponse,
  createStreamEncoder: createChatStreamEncoder,
  upstreamPath: "/chat/completions",
  encodeRequest: encodeChatRequest,
  decodeResponse: decodeChatResponse,
  createStreamDecoder: createChatStreamDecoder,
};
