import type { BackendInputWire, InputRequest, InputResponse, InputWire, OperationInput } from "./input-wire.ts";

/**
 * Embeddings in neutral form: what a client asked to embed and what a backend answered, whichever
 * wire protocol carried them. Vectors stay as `Float32Array`: a client that asked for base64 gets
 * them as the little-endian float32 bytes OpenAI sends, and a similarity signal reads them as is.
 */

/** One input: a text, or token ids (OpenAI lets a client send them pre-tokenized). */
export type EmbeddingInput = OperationInput;

export interface NeutralEmbeddingRequest extends InputRequest {
  /** Fewer dimensions than the model's own, for models that can shorten their vectors. */
  readonly dimensions?: number | undefined;
  /** How the client wants the vectors written back (the gateway always asks backends for floats). */
  readonly encodingFormat: "float" | "base64";
  /** End-user id for the provider's abuse tooling. */
  readonly user?: string | undefined;
}

export interface NeutralEmbeddingResponse extends InputResponse {
  /** One vector per input, in input order. */
  readonly vectors: readonly Float32Array[];
}

/** The most inputs one request may carry (OpenAI's own bound). */
export const MAX_EMBEDDING_INPUTS = 2048;

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

/** An embeddings wire protocol (the gateway always asks backends for floats). */
export type EmbeddingsCodec = InputWire<NeutralEmbeddingRequest, NeutralEmbeddingResponse>;

/** The backend side of the embeddings wire (what a backend-only protocol such as Workers AI implements). */
export type BackendEmbeddingsWire = BackendInputWire<NeutralEmbeddingRequest, NeutralEmbeddingResponse>;
