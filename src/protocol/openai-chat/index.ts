import type { Codec } from "../codec.ts";
import { openAiEmbeddingsCodec } from "../openai-embeddings/index.ts";
import { openAiModerationsCodec } from "../openai-moderations/index.ts";
import type { RequestFeature } from "../features.ts";
import { decodeChatRequest } from "./decode-request.ts";
import { encodeChatRequest } from "./encode-request.ts";
import { createChatPassThrough } from "./pass-through.ts";
import { decodeChatResponse, encodeChatResponse } from "./response.ts";
import { createChatStreamDecoder, createChatStreamEncoder } from "./stream.ts";

/** Chat Completions field names of each feature (for errors shown to Chat clients). */
function paramName(feature: RequestFeature): string {
  switch (feature) {
    case "top_k":
      return "top_k";
    case "reasoning_effort":
    case "reasoning_budget":
      return "reasoning_effort";
    case "json_object":
    case "json_schema":
      return "response_format";
    case "seed":
      return "seed";
    case "presence_penalty":
      return "presence_penalty";
    case "frequency_penalty":
      return "frequency_penalty";
    case "temperature_above_1":
      return "temperature";
    case "parallel_tool_calls":
      return "parallel_tool_calls";
    case "metadata":
      return "metadata";
    case "tool_result_error":
      return "messages";
    case "stop_sequences":
      return "stop";
    case "verbosity":
      return "verbosity";
    case "openai_service_tier":
      return "service_tier";
    // Anthropic-only features cannot come from a Chat client; they keep their own names.
    case "anthropic_service_tier":
    case "speed":
    case "inference_geo":
      return feature;
  }
}

/** OpenAI Chat Completions (`POST /v1/chat/completions`), both as client and as backend protocol. */
export const openAiChatCodec: Codec = {
  id: "openai-chat",
  version: "1",
  carries: new Set<RequestFeature>([
    "reasoning_effort",
    "json_object",
    "json_schema",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "temperature_above_1",
    "parallel_tool_calls",
    "metadata",
    "stop_sequences",
    "verbosity",
    "openai_service_tier",
  ]),
  // `logprobs` + `top_logprobs` out, `choices[].logprobs.content` back.
  logprobs: true,
  paramName,
  decodeRequest: decodeChatRequest,
  encodeResponse: encodeChatResponse,
  createStreamEncoder: createChatStreamEncoder,
  createPassThrough: createChatPassThrough,
  rejectedBeforeProcessing: new Set([429]),
  upstreamPath: "/chat/completions",
  encodeRequest: encodeChatRequest,
  decodeResponse: decodeChatResponse,
  embeddings: openAiEmbeddingsCodec,
  moderations: openAiModerationsCodec,
  createStreamDecoder: createChatStreamDecoder,
};
