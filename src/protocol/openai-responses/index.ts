import type { Codec } from "../codec.ts";
import { openAiEmbeddingsCodec } from "../openai-embeddings/index.ts";
import { openAiModerationsCodec } from "../openai-moderations/index.ts";
import type { RequestFeature } from "../features.ts";
import { decodeResponsesRequest } from "./decode-request.ts";
import { encodeResponsesRequest } from "./encode-request.ts";
import { decodeResponsesResponse, encodeResponsesResponse } from "./response.ts";
import { createResponsesStreamDecoder, createResponsesStreamEncoder } from "./stream.ts";

/**
 * Responses field names of each feature (for errors shown to Responses clients). Features the
 * Responses API has no field for cannot come from a Responses client; they keep their own names.
 */
function paramName(feature: RequestFeature): string {
  switch (feature) {
    case "top_k":
      return "top_k";
    case "reasoning_effort":
    case "reasoning_budget":
      return "reasoning.effort";
    case "json_object":
    case "json_schema":
      return "text.format";
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
      return "input";
    case "stop_sequences":
      return "stop";
    case "verbosity":
      return "text.verbosity";
    case "openai_service_tier":
      return "service_tier";
    case "anthropic_service_tier":
    case "speed":
    case "inference_geo":
      return feature;
  }
}

/**
 * OpenAI Responses (`POST /v1/responses`), both as client and as backend protocol, stateless only:
 * nothing is stored, and Sluice always sends `store: false`. docs/protocols/openai-responses.md.
 */
export const openAiResponsesCodec: Codec = {
  id: "openai-responses",
  version: "1",
  carries: new Set<RequestFeature>([
    "reasoning_effort",
    "json_object",
    "json_schema",
    "parallel_tool_calls",
    "metadata",
    "temperature_above_1",
    "verbosity",
    "openai_service_tier",
  ]),
  // `top_logprobs` and the output text's `logprobs` exist on the wire, but this codec neither
  // asks for nor reads them yet.
  logprobs: false,
  paramName,
  decodeRequest: decodeResponsesRequest,
  encodeResponse: encodeResponsesResponse,
  createStreamEncoder: createResponsesStreamEncoder,
  rejectedBeforeProcessing: new Set([429]),
  upstreamPath: "/responses",
  encodeRequest: encodeResponsesRequest,
  decodeResponse: decodeResponsesResponse,
  embeddings: openAiEmbeddingsCodec,
  moderations: openAiModerationsCodec,
  createStreamDecoder: createResponsesStreamDecoder,
};
