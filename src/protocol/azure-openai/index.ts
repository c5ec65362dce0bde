import type { BackendCodec } from "../codec.ts";
import type { RequestFeature } from "../features.ts";
import { openAiChatCodec } from "../openai-chat/index.ts";

/**
 * The codec's version, recorded on every attempt it encoded and decoded (access line, call
 * ledger); raised whenever what it sends or how it reads an answer changes.
 */
export const AZURE_OPENAI_CODEC_VERSION = "1";

/**
 * Features Azure OpenAI's Chat Completions carries. OpenAI's own, except those its data-plane API
 * has no field for (`service_tier`, `verbosity`) or accepts only with stored completions
 * (`metadata`): such a request goes to another backend, or is refused with the field named.
 */
const carries = new Set<RequestFeature>([...openAiChatCodec.carries].filter((f) => f !== "openai_service_tier" && f !== "verbosity" && f !== "metadata"));

/**
 * Azure OpenAI (`POST {endpoint}/openai/deployments/{deployment}/chat/completions?api-version=…`),
 * a backend protocol only: clients speak OpenAI Chat to the gateway. The body, answers and SSE
 * streams are OpenAI Chat's wire, so they are the Chat codec's own encoder and decoders; only
 * the address (a deployment, named by the pool member's `model`, and the backend's `apiVersion`),
 * the credential (`api-key` or an Entra ID token) and the error bodies are Azure's
 * (docs/protocols/azure-openai.md).
 */
export const azureOpenAiCodec: BackendCodec = {
  id: "azure-openai",
  version: AZURE_OPENAI_CODEC_VERSION,
  carries,
  // The Chat wire: its `logprobs` + `top_logprobs`, and `choices[].logprobs.content` back.
  logprobs: true,
  // After the deployment's path; the invoker builds the rest of the address (invoker/azure-openai.ts).
  upstreamPath: "/chat/completions",
  // 429 is Azure's quota refusal (tokens or requests per minute of the deployment), sent instead
  // of starting work, with `retry-after-ms`/`retry-after`.
  rejectedBeforeProcessing: new Set([429]),
  encodeRequest(request, deployment, options) {
    // The deployment is in the URL; the body names no model.
    const { model: _deployment, ...body } = openAiChatCodec.encodeRequest(request, deployment, options) as Record<string, unknown>;
    return body;
  },
  decodeResponse: openAiChatCodec.decodeResponse,
  createStreamDecoder: openAiChatCodec.createStreamDecoder,
};
