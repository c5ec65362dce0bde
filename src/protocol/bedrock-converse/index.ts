import type { BackendCodec } from "../codec.ts";
import type { RequestFeature } from "../features.ts";
import { encodeConverseRequest } from "./request.ts";
import { conversePath, decodeConverseResponse } from "./response.ts";
import { createConverseStreamDecoder } from "./stream.ts";

/**
 * AWS Bedrock's Converse and ConverseStream APIs, a backend protocol only: SigV4-signed requests,
 * streams in the binary AWS event stream framing (docs/protocols/bedrock-converse.md).
 */
export const bedrockConverseCodec: BackendCodec = {
  id: "bedrock-converse",
  version: "1",
  // inferenceConfig has stop sequences, toolResult a status, outputConfig a JSON schema, and
  // Claude's thinking rides in additionalModelRequestFields. Converse has no seed, penalties, top-k
  // (only per model), JSON mode without a schema, parallel-call switch or metadata for the model;
  // temperature above 1 is refused by most of its models.
  carries: new Set<RequestFeature>(["stop_sequences", "tool_result_error", "json_schema", "reasoning_budget"]),
  // Converse has no field that asks for log-probabilities, and its answers hold none.
  logprobs: false,
  // The path names the model and whether the answer streams (see conversePath).
  upstreamPath: "",
  upstreamPathFor: conversePath,
  streamAccept: "application/vnd.amazon.eventstream",
  sigV4Service: "bedrock",
  // ThrottlingException (429), ModelNotReadyException (429) and ServiceUnavailableException (503)
  // are refusals before any work; a 500 may come after the model ran.
  rejectedBeforeProcessing: new Set([429, 503]),
  encodeRequest: encodeConverseRequest,
  decodeResponse: decodeConverseResponse,
  createStreamDecoder: createConverseStreamDecoder,
};
