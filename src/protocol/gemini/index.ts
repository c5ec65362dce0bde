import type { BackendCodec } from "../codec.ts";
import type { RequestFeature } from "../features.ts";
import { encodeGeminiRequest } from "./request.ts";
import { decodeGeminiResponse } from "./response.ts";
import { createGeminiStreamDecoder } from "./stream.ts";

/**
 * Google Gemini through the Gemini API or Vertex AI (`generateContent`, `streamGenerateContent`),
 * a backend protocol only: clients never speak it (docs/protocols/gemini.md).
 */
export const geminiCodec: BackendCodec = {
  id: "gemini",
  version: "1",
  // generationConfig's own fields (topK, seed, the penalties, temperature up to 2, stopSequences,
  // JSON output with or without a schema, thinkingLevel and thinkingBudget) and a function
  // response's `error` key. Parallel tool calls, metadata, verbosity, service tiers, speed and
  // inference geography have no field, so such a request goes elsewhere or is refused.
  carries: new Set<RequestFeature>([
    "top_k",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "temperature_above_1",
    "stop_sequences",
    "json_object",
    "json_schema",
    "reasoning_effort",
    "reasoning_budget",
    "tool_result_error",
  ]),
  // generationConfig's responseLogprobs and candidates' logprobsResult exist, but this codec
  // neither asks for nor reads them yet.
  logprobs: false,
  // The path names the model and the method, and depends on the endpoint mode: see endpoint.ts.
  upstreamPath: "",
  // RESOURCE_EXHAUSTED (429: quota or rate) and UNAVAILABLE (503: overloaded) refuse the request
  // before any work is done.
  rejectedBeforeProcessing: new Set([429, 503]),
  encodeRequest: encodeGeminiRequest,
  decodeResponse: decodeGeminiResponse,
  createStreamDecoder: createGeminiStreamDecoder,
};
