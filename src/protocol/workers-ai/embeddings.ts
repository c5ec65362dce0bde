import { GatewayError } from "../../errors/gateway-error.ts";
import type { BackendEmbeddingsWire, NeutralEmbeddingRequest, NeutralEmbeddingResponse } from "../embeddings.ts";
import { isCount, isRecord } from "../fast-guard.ts";

/*
 * Workers AI text embeddings (`@cf/baai/bge-base-en-v1.5` and the like): inputs `{ text }`, one
 * string or a list, output `{ shape: [n, dimensions], data: [[…], …] }`, one vector per text in
 * order. The models take text only, at their own size, and report no token usage.
 */

function encodeRequest(request: NeutralEmbeddingRequest): Record<string, unknown> {
  const texts: string[] = [];
  for (const input of request.inputs) {
    if (typeof input !== "string") throw new GatewayError("invalid_request", "token ids are not supported by this model's backend: send text.", { param: "input" });
    texts.push(input);
  }
  // A model's vectors have its own size: cutting them would change what they mean.
  if (request.dimensions !== undefined) throw new GatewayError("invalid_request", "dimensions is not supported by this model's backend.", { param: "dimensions" });
  return { text: texts.length === 1 ? texts[0] : texts };
}

function unreadable(why: string): GatewayError {
  return new GatewayError("upstream_protocol_error", "The embeddings provider returned an unreadable response.", { cause: why });
}

function decodeResponse(body: unknown, expected: number): NeutralEmbeddingResponse {
  if (!isRecord(body) || !Array.isArray(body.data)) throw unreadable("no data array");
  if (body.data.length !== expected) throw unreadable(`${body.data.length} vectors for ${expected} inputs`);
  const vectors = body.data.map((v, i) => {
    if (!Array.isArray(v) || v.length === 0 || !v.every((x) => typeof x === "number" && Number.isFinite(x))) throw unreadable(`embedding ${i} is not a vector`);
    return Float32Array.from(v as number[]);
  });
  // None of the embedding models reports usage today; a model that does is read, never invented.
  const usage = isRecord(body.usage) ? body.usage : undefined;
  return { vectors, inputTokens: usage && isCount(usage.prompt_tokens) ? usage.prompt_tokens : undefined };
}

/** The embeddings wire of Workers AI (backend side only: no client speaks it). */
export const workersAiEmbeddingsWire: BackendEmbeddingsWire = {
  upstreamPath: "",
  encodeRequest,
  decodeResponse,
};
