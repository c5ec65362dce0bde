/**
 * Embeddings in neutral form: what a client asked to embed and what a backend answered, whichever
 * wire protocol carried them. Vectors stay as `Float32Array`: a client that asked for base64 gets
 * them as the little-endian float32 bytes OpenAI sends, and a similarity signal reads them as is.
 */

/** One input: a text, or token ids (OpenAI lets a client send them pre-tokenized). */
export type EmbeddingInput = string | readonly number[];

export interface NeutralEmbeddingRequest {
  /** The public model name the client asked for (an entrypoint name). */
  readonly model: string;
  readonly inputs: readonly EmbeddingInput[];
  /** Fewer dimensions than the model's own, for models that can shorten their vectors. */
  readonly dimensions?: number | undefined;
  /** How the client wants the vectors written back (the gateway always asks backends for floats). */
  readonly encodingFormat: "float" | "base64";
  /** End-user id for the provider's abuse tooling. */
  readonly user?: string | undefined;
}

export interface NeutralEmbeddingResponse {
  /** One vector per input, in input order. */
  readonly vectors: readonly Float32Array[];
  /** Input tokens the provider counted; undefined when it said nothing (unknown, never zero). */
  readonly inputTokens: number | undefined;
}

/** The most inputs one request may carry (OpenAI's own bound). */
export const MAX_EMBEDDING_INPUTS = 2048;

/** Upper bound on an embedding request's input tokens: a token id each, and a token per UTF-8 byte of text. */
export function embeddingTokenBound(inputs: readonly EmbeddingInput[]): number {
  let n = 0;
  const encoder = new TextEncoder();
  for (const i of inputs) n += typeof i === "string" ? encoder.encode(i).byteLength : i.length;
  return n;
}

/** Cosine similarity of two vectors of the same length (0 when either is all zeros). */
export function cosine(a: Float32Array, b: Float32Array): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a[i]!;
    const y = b[i]!;
    dot += x * y;
    na += x * x;
    nb += y * y;
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb);
}

/** The backend side of an embeddings wire: encode the request for the provider, decode its answer. */
export interface BackendEmbeddingsWire {
  /** Path appended to the backend's base URL (unused by a protocol reached through a binding). */
  readonly upstreamPath: string;
  /**
   * Neutral request → provider body for the provider's own model id (floats, always). Throws
   * GatewayError(invalid_request) for what the wire cannot express.
   */
  encodeRequest(request: NeutralEmbeddingRequest, upstreamModel: string): unknown;
  /** Provider body → neutral response for `expected` inputs; throws GatewayError(upstream_protocol_error). */
  decodeResponse(body: unknown, expected: number): NeutralEmbeddingResponse;
}

/**
 * An embeddings wire protocol, both directions (client: decode the request, encode the answer;
 * backend: encode the request, decode the answer), each once per message.
 */
export interface EmbeddingsCodec extends BackendEmbeddingsWire {
  /** Client side: body → neutral request; throws GatewayError (invalid_request with `param`). */
  decodeRequest(body: unknown): NeutralEmbeddingRequest;
  /** Client side: neutral response → JSON body, vectors written the way the client asked, under the public `model` name. */
  encodeResponse(response: NeutralEmbeddingResponse, request: NeutralEmbeddingRequest, model: string): unknown;
}
