import type { NeutralRequest } from "./neutral.ts";

/**
 * A token-count wire protocol (Anthropic's `POST /v1/messages/count_tokens`), both directions
 * (client: decode the request, encode the count; backend: encode the request, decode the count),
 * each once per message. The request is a chat request without its output cap: what is counted
 * is the input a message of the same conversation would send (messages, system, tools).
 */
export interface TokenCountCodec extends BackendTokenCountWire {
  /** Client side: body → neutral request (no output cap needed); throws GatewayError (invalid_request with `param`). */
  decodeRequest(body: unknown): NeutralRequest;
  /** Client side: the count → JSON body. */
  encodeResponse(inputTokens: number): unknown;
}

/** The backend side of a token-count wire: encode the request for the provider, decode its count. */
export interface BackendTokenCountWire {
  /** Path appended to the backend's base URL. */
  readonly upstreamPath: string;
  /** Neutral request → provider body for the provider's own model id (only what the count reads). */
  encodeRequest(request: NeutralRequest, upstreamModel: string): unknown;
  /** Provider body → its input tokens; throws GatewayError(upstream_protocol_error). */
  decodeResponse(body: unknown): number;
}
