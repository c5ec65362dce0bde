import type { BackendCodec } from "../codec.ts";
import type { RequestFeature } from "../features.ts";
import { workersAiEmbeddingsWire } from "./embeddings.ts";
import { encodeWorkersAiRequest } from "./request.ts";
import { decodeWorkersAiResponse } from "./response.ts";
import { createWorkersAiStreamDecoder } from "./stream.ts";

/**
 * Workers AI through its Worker binding (`env.AI.run(model, inputs, options)`), a backend protocol
 * only: clients never speak it, and its backends are reached through the binding, not a URL
 * (docs/protocols/workers-ai.md).
 */
export const workersAiCodec: BackendCodec = {
  id: "workers-ai",
  version: "1",
  // The text generation inputs' own fields; the rest (stop sequences, reasoning controls, service
  // tiers, parallel tool calls, metadata) have none, so such a request goes elsewhere or is refused.
  carries: new Set<RequestFeature>(["top_k", "seed", "presence_penalty", "frequency_penalty", "temperature_above_1", "json_object", "json_schema"]),
  // The text generation inputs have no field that asks for log-probabilities.
  logprobs: false,
  // A binding has no path: run() names the model.
  upstreamPath: "",
  // 429 is Workers AI's refusal before any work: 3036 (the account's daily allocation is used up)
  // and 3040 (no capacity left to forward the request to).
  rejectedBeforeProcessing: new Set([429]),
  encodeRequest: encodeWorkersAiRequest,
  decodeResponse: decodeWorkersAiResponse,
  createStreamDecoder: createWorkersAiStreamDecoder,
  embeddings: workersAiEmbeddingsWire,
};
