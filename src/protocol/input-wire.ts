/**
 * Operations that take a list of inputs and answer once per input without generating text:
 * embeddings and moderations. They share everything past their wire: a plan of the entrypoint's
 * tiers, a size bounded by their inputs (priced by input tokens, no output), the attempts loop,
 * and a buffered answer. This is the part of their wire every such operation has.
 */

/** One input: a text, or token ids (where the wire allows pre-tokenized input). */
export type OperationInput = string | readonly number[];

/** What every input-only request carries, in neutral form. */
export interface InputRequest {
  /** The public model name the client asked for (an entrypoint name). */
  readonly model: string;
  readonly inputs: readonly OperationInput[];
}

/** What every input-only answer carries, in neutral form. */
export interface InputResponse {
  /** Input tokens the provider counted; undefined when it said nothing (unknown, never zero). */
  readonly inputTokens: number | undefined;
}

/** What the gateway writes on an answer instead of the provider's identifiers. */
export interface InputStamp {
  /** Unique id derived from the request id; the wire adds its own prefix. */
  readonly id: string;
  /** The public model name the client asked for; the provider's model id stays internal. */
  readonly model: string;
}

/** The backend side of an input-only operation's wire: encode the request for the provider, decode its answer. */
export interface BackendInputWire<Req extends InputRequest, Res extends InputResponse> {
  /** Path appended to the backend's base URL (unused by a protocol reached through a binding). */
  readonly upstreamPath: string;
  /**
   * Neutral request → provider body for the provider's own model id. Throws
   * GatewayError(invalid_request) for what the wire cannot express.
   */
  encodeRequest(request: Req, upstreamModel: string): unknown;
  /** Provider body → neutral response for `expected` inputs; throws GatewayError(upstream_protocol_error). */
  decodeResponse(body: unknown, expected: number): Res;
}

/**
 * An input-only operation's wire protocol, both directions (client: decode the request, encode
 * the answer; backend: encode the request, decode the answer), each once per message.
 */
export interface InputWire<Req extends InputRequest, Res extends InputResponse> extends BackendInputWire<Req, Res> {
  /** Client side: body → neutral request; throws GatewayError (invalid_request with `param`). */
  decodeRequest(body: unknown): Req;
  /** Client side: neutral response → JSON body, written the way the request asked, under the stamp's public model name. */
  encodeResponse(response: Res, request: Req, stamp: InputStamp): unknown;
}

/** Upper bound on a request's input tokens: a token id each, and a token per UTF-8 byte of text. */
export function inputsTokenBound(inputs: readonly OperationInput[]): number {
  let n = 0;
  const encoder = new TextEncoder();
  for (const i of inputs) n += typeof i === "string" ? encoder.encode(i).byteLength : i.length;
  return n;
}
