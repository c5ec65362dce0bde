import type { Codec } from "../codec.ts";
import type { RequestFeature } from "../features.ts";
import { anthropicTokenCount } from "./count-tokens.ts";
import { decodeAnthropicRequest } from "./decode-request.ts";
import { encodeAnthropicRequest } from "./encode-request.ts";
import { decodeAnthropicResponse, encodeAnthropicResponse } from "./response.ts";
import { createAnthropicPassThrough } from "./pass-through.ts";
import { createAnthropicStreamDecoder, createAnthropicStreamEncoder } from "./stream.ts";

/**
 * Anthropic field names of each feature (for errors shown to Anthropic clients). Features an
 * Anthropic request cannot express name the Anthropic field closest to them, or the feature itself
 * where Anthropic has none; they never arise from an Anthropic request.
 */
function paramName(feature: RequestFeature): string {
  switch (feature) {
    case "top_k":
      return "top_k";
    case "reasoning_effort":
      return "output_config.effort";
    case "reasoning_budget":
      return "thinking";
    case "json_object":
    case "json_schema":
      return "output_config.format";
    case "seed":
      return "seed";
    case "presence_penalty":
      return "presence_penalty";
    case "frequency_penalty":
      return "frequency_penalty";
    case "temperature_above_1":
      return "temperature";
    case "parallel_tool_calls":
      return "tool_choice.disable_parallel_tool_use";
    case "metadata":
      return "metadata";
    case "stop_sequences":
      return "stop_sequences";
    case "tool_result_error":
      return "messages";
    case "anthropic_service_tier":
      return "service_tier";
    case "speed":
      return "speed";
    case "inference_geo":
      return "inference_geo";
    case "verbosity":
    case "openai_service_tier":
      return feature;
  }
}

/** Anthropic Messages (`POST /v1/messages`), both as client and as backend protocol. */
export const anthropicMessagesCodec: Codec = {
  id: "anthropic-messages",
  version: "1",
  carries: new Set<RequestFeature>([
    "top_k",
    "reasoning_effort",
    "reasoning_budget",
    "json_schema",
    "parallel_tool_calls",
    "tool_result_error",
    "stop_sequences",
    "anthropic_service_tier",
    "speed",
    "inference_geo",
  ]),
  // The Messages API has no log-probabilities, asked for or returned.
  logprobs: false,
  // The Messages API refuses requests without a version; a backend's own `headers` may override it.
  upstreamHeaders: { "anthropic-version": "2023-06-01" },
  paramName,
  decodeRequest: decodeAnthropicRequest,
  encodeResponse: encodeAnthropicResponse,
  createStreamEncoder: createAnthropicStreamEncoder,
  rejectedBeforeProcessing: new Set([429, 529]),
  upstreamPath: "/messages",
  encodeRequest: encodeAnthropicRequest,
  decodeResponse: decodeAnthropicResponse,
  createStreamDecoder: createAnthropicStreamDecoder,
  createPassThrough: createAnthropicPassThrough,
  countTokens: anthropicTokenCount,
};
