import { z } from "zod";
import { MAX_EMBEDDING_INPUTS, type EmbeddingInput, type EmbeddingsCodec, type NeutralEmbeddingRequest, type NeutralEmbeddingResponse } from "../embeddings.ts";
import { isRecord } from "../fast-guard.ts";
import type { InputStamp } from "../input-wire.ts";
import { invalidRequestFromZod } from "../invalid-request.ts";
import { reportedPromptTokens, unreadableAnswer } from "../openai-input-wire.ts";

/**
 * OpenAI's embeddings wire (`POST /v1/embeddings`), both directions: what clients send the gateway
 * and what every OpenAI-compatible embeddings server (OpenAI, TEI, vLLM, Ollama) answers. A
 * backend of an OpenAI protocol with the `embeddings` capability serves it at `<baseUrl>/embeddings`.
 */

const tokenIds = z.array(z.number().int().min(0)).min(1);
const requestSchema = z.looseObject({
  model: z.string().min(1),
  input: z.union([z.string().min(1), z.array(z.string().min(1)).min(1).max(MAX_EMBEDDING_INPUTS), tokenIds, z.array(tokenIds).min(1).max(MAX_EMBEDDING_INPUTS)]),
  dimensions: z.number().int().min(1).max(65_536).optional(),
  encoding_format: z.enum(["float", "base64"]).optional(),
  user: z.string().optional(),
});

function decodeRequest(body: unknown): NeutralEmbeddingRequest {
  const parsed = requestSchema.safeParse(body, { reportInput: true });
  if (!parsed.success) throw invalidRequestFromZod(parsed.error);
  const b = parsed.data;
  const input = b.input;
  // One string, a list of strings, one token array, or a list of token arrays.
  const inputs: EmbeddingInput[] = typeof input === "string" ? [input] : input.length > 0 && typeof input[0] === "number" ? [input as number[]] : (input as EmbeddingInput[]);
  return { model: b.model, inputs, dimensions: b.dimensions, encodingFormat: b.encoding_format ?? "float", user: b.user };
}

/** Little-endian float32 bytes in base64, as OpenAI writes `encoding_format: "base64"`. */
export function float32ToBase64(v: Float32Array): string {
  const bytes = new Uint8Array(v.length * 4);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < v.length; i++) view.setFloat32(i * 4, v[i]!, true);
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

/** The vector of a base64 embedding; undefined when it is not whole float32s. */
function base64ToFloat32(text: string): Float32Array | undefined {
  let s: string;
  try {
    s = atob(text);
  } catch {
    return undefined;
  }
  if (s.length % 4 !== 0) return undefined;
  const view = new DataView(Uint8Array.from(s, (c) => c.charCodeAt(0)).buffer);
  const out = new Float32Array(s.length / 4);
  for (let i = 0; i < out.length; i++) out[i] = view.getFloat32(i * 4, true);
  return out;
}

function encodeResponse(response: NeutralEmbeddingResponse, request: NeutralEmbeddingRequest, stamp: InputStamp): unknown {
  const tokens = response.inputTokens ?? 0;
  return {
    object: "list",
    data: response.vectors.map((v, index) => ({ object: "embedding", index, embedding: request.encodingFormat === "base64" ? float32ToBase64(v) : Array.from(v) })),
    model: stamp.model,
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  };
}

function encodeRequest(request: NeutralEmbeddingRequest, upstreamModel: string): unknown {
  const one = request.inputs.length === 1 ? request.inputs[0] : undefined;
  return {
    model: upstreamModel,
    input: one !== undefined && typeof one === "string" ? one : request.inputs,
    encoding_format: "float",
    ...(request.dimensions !== undefined ? { dimensions: request.dimensions } : {}),
    ...(request.user !== undefined ? { user: request.user } : {}),
  };
}

const unreadable = (why: string) => unreadableAnswer("embeddings", why);

function decodeResponse(body: unknown, expected: number): NeutralEmbeddingResponse {
  if (!isRecord(body) || !Array.isArray(body.data)) throw unreadable("no data array");
  const vectors: Float32Array[] = new Array(expected);
  for (const item of body.data) {
    if (!isRecord(item)) throw unreadable("a data item is not an object");
    const index = typeof item.index === "number" && Number.isInteger(item.index) ? item.index : -1;
    if (index < 0 || index >= expected || vectors[index] !== undefined) throw unreadable(`data item index ${String(item.index)}`);
    const e = item.embedding;
    const v = typeof e === "string" ? base64ToFloat32(e) : Array.isArray(e) && e.every((x) => typeof x === "number" && Number.isFinite(x)) ? Float32Array.from(e as number[]) : undefined;
    if (v === undefined || v.length === 0) throw unreadable(`embedding ${index} is not a vector`);
    vectors[index] = v;
  }
  for (let i = 0; i < expected; i++) if (vectors[i] === undefined) throw unreadable(`no embedding for input ${i}`);
  return { vectors, inputTokens: reportedPromptTokens(body) };
}

/** The OpenAI embeddings wire, shared by every OpenAI-protocol backend. */
export const openAiEmbeddingsCodec: EmbeddingsCodec = {
  upstreamPath: "/embeddings",
  decodeRequest,
  encodeResponse,
  encodeRequest,
  decodeResponse,
};
