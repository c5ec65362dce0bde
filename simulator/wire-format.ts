/**
 * The seam between the format-neutral generation core and the wire formats.
 *
 * A wire format (OpenAI Chat Completions, OpenAI Responses, Anthropic Messages) only
 * translates: its request body into a {@link GenerationRequest}, and a {@link Completion}
 * into that format's buffered JSON or SSE frames. Timing, faults, usage arithmetic and
 * the generated text are decided elsewhere, identically for every format.
 */

import type { IncomingHttpHeaders } from "node:http";

/** One conversation turn, flattened to what the core needs: who spoke and what text. */
export interface NeutralMessage {
  /** Role as the format names it (`system`, `developer`, `user`, `assistant`, `tool` …). */
  readonly role: string;
  /** All text of the turn concatenated: text parts, tool-call names and arguments, tool results. */
  readonly text: string;
  /** Non-text parts (images, audio, files); each counts a fixed number of prompt tokens. */
  readonly media: number;
}

/** A function tool the caller declared. */
export interface ToolSpec {
  readonly name: string;
  readonly description: string | undefined;
  /** JSON Schema of the arguments, as sent; placeholder arguments are built from it. */
  readonly parameters: unknown;
}

/** The caller's tool-choice policy, format-neutral. */
export type ToolChoice =
  | { readonly type: "auto" }
  | { readonly type: "none" }
  | { readonly type: "required" }
  | { readonly type: "function"; readonly name: string };

/** What a wire format extracts from a valid request body. */
export interface GenerationRequest {
  /** Model id exactly as requested; echoed back. */
  readonly model: string;
  /** Every turn in order, system/developer instructions included as turns. */
  readonly messages: readonly NeutralMessage[];
  readonly tools: readonly ToolSpec[];
  readonly toolChoice: ToolChoice;
  /** Output cap (`max_tokens`, `max_completion_tokens`, …), if any. */
  readonly maxTokens: number | undefined;
  readonly stream: boolean;
  /** Whether a stream should carry usage (formats that always report usage set true). */
  readonly streamUsage: boolean;
  /** Text of the last user turn, where `[[sim …]]` directives are looked for. */
  readonly directiveText: string;
  /** Stop sequences (Anthropic `stop_sequences`); formats without them pass none. */
  readonly stopSequences?: readonly string[];
  /** Whether the format shows reasoning as text (Anthropic with `thinking` enabled). */
  readonly reasoningText?: boolean;
  /** Format-private data from `parse` for rendering, e.g. the parameters a Response echoes. */
  readonly echo?: unknown;
  /** Token log-probabilities asked for, with this many alternatives each (OpenAI Chat `logprobs` + `top_logprobs`). */
  readonly logprobs?: number | undefined;
}

/**
 * Why a generation ended, format-neutral; each format maps it to its own vocabulary.
 * `stop_sequence` only happens when the request carried stop sequences.
 */
export type FinishReason = "stop" | "length" | "tool" | "stop_sequence";

/** Token accounting of one completion. */
export interface Usage {
  readonly promptTokens: number;
  /** Visible output tokens plus reasoning tokens. */
  readonly completionTokens: number;
  readonly cachedTokens: number;
  readonly reasoningTokens: number;
}

/** A tool call the simulated model makes. */
export interface ToolCall {
  /** Unique suffix; the format adds its own prefix (`call_`, `toolu_` …). */
  readonly uid: string;
  readonly name: string;
  /** The arguments JSON as emitted (truncated when the output cap cut it). */
  readonly arguments: string;
  /** The arguments split into the pieces a stream sends; one piece is one output token. */
  readonly pieces: readonly string[];
}

/** Everything one simulated model turn produces, before any format renders it. */
export interface Completion {
  /** Unique suffix for the response id; the format adds its prefix (`chatcmpl-`, `msg_` …). */
  readonly uid: string;
  /** Unix seconds. */
  readonly created: number;
  readonly model: string;
  /** Text tokens in order (empty for a tool call); joined they are the full text. */
  readonly tokens: readonly string[];
  readonly toolCall: ToolCall | undefined;
  readonly finish: FinishReason;
  /** The stop sequence that ended the text when `finish` is `stop_sequence`. */
  readonly stopSequence: string | undefined;
  /** Reasoning tokens spent (also in `usage`, which `omit-usage` removes). */
  readonly reasoningTokens: number;
  /**
   * Reasoning as words (one per reasoning token) when the request asked for visible
   * reasoning (`reasoningText`); empty otherwise. Deterministic like the text.
   */
  readonly reasoning: readonly string[];
  /** `undefined` when the `omit-usage` fault asks for usage to be left out. */
  readonly usage: Usage | undefined;
  /** Each text token's log-probability and its alternatives, when the request asked for them. */
  readonly logprobs?: readonly TokenLogprob[] | undefined;
}

/** One emitted token's log-probability and the most likely tokens at its place, most likely first. */
export interface TokenLogprob {
  readonly token: string;
  readonly logprob: number;
  readonly top: readonly { readonly token: string; readonly logprob: number }[];
}

/** Error class of a failure, format-neutral; each format maps it to its error `type`. */
export type ErrorKind =
  | "invalid_request"
  | "authentication"
  | "billing"
  | "permission"
  | "not_found"
  | "too_large"
  | "rate_limit"
  | "server"
  | "timeout"
  | "overloaded";

/** A failure to report in the format's error envelope. */
export interface SimError {
  readonly status: number;
  readonly kind: ErrorKind;
  readonly message: string;
  readonly param: string | null;
  readonly code: string | null;
  /** Seconds the client is asked to wait (the `retry-after` sent with it), for formats that say it in the body too. */
  readonly retryAfterSeconds?: number | undefined;
}

/** A request refused by validation. */
export interface Rejected {
  readonly ok: false;
  readonly error: SimError;
}

/** Result of parsing a request body. */
export type ParseResult = { readonly ok: true; readonly request: GenerationRequest } | Rejected;

/**
 * Frames of one streamed completion, already framed (SSE's `data: …\n\n`, or binary messages).
 * The core sends `head` with the response headers, then `pieces` one by one with the
 * configured pacing (`ttft-ms` before the first, `token-interval-ms` between), then `tail`.
 * `cut-mid-stream` stops after some pieces and never sends the tail; `error-mid-stream`
 * sends `error(…, sent)` instead of the rest.
 */
export interface StreamScript {
  readonly head: Frame;
  readonly pieces: readonly Frame[];
  readonly tail: Frame;
  /** The frames reporting `error` in-stream after `head` and the first `sent` pieces. */
  error(error: SimError, sent: number): Frame;
}

/** Stream bytes: SSE text, or the bytes of a binary framing (Bedrock's event stream). */
export type Frame = string | Uint8Array;

/** One wire format: a route plus the translation in both directions. */
export interface WireFormat {
  /** Short name, e.g. `openai-chat`. */
  readonly name: string;
  /** The POST path it serves, e.g. `/v1/chat/completions`. */
  readonly path: string;
  /** Response header carrying the request id (`x-request-id`, Anthropic's `request-id`). */
  readonly requestIdHeader: string;
  /** One keep-alive frame for `heartbeat-only` (an SSE comment, Anthropic's `ping` event). */
  readonly heartbeat: string;
  /** Content type of a stream, when not SSE (Bedrock: `application/vnd.amazon.eventstream`). */
  readonly streamContentType?: string;
  /** Headers that go with an error answer (Bedrock names the error in `x-amzn-errortype`). */
  errorHeaders?(error: SimError): Record<string, string>;
  /** Checks made before the body is read, e.g. a required version header; after the API key. */
  checkHeaders?(headers: IncomingHttpHeaders): SimError | undefined;
  /** Validates a JSON-decoded body the way the real provider does. */
  parse(body: unknown): ParseResult;
  /** The error for a body that is not valid JSON. */
  malformedJson(): SimError;
  /** The error for a missing (`given` undefined) or wrong API key. */
  authError(given: string | undefined): SimError;
  /** The provider's error envelope, as a JSON string; `requestId` as in the response header. */
  renderError(error: SimError, requestId: string): string;
  /** The buffered response body, as a JSON string. */
  renderBuffered(completion: Completion, request: GenerationRequest): string;
  /** The SSE frames of a streamed response. */
  renderStream(completion: Completion, request: GenerationRequest): StreamScript;
}

/** Maps an HTTP status to the neutral error kind used for simulated failures. */
export function errorKindForStatus(status: number): ErrorKind {
  switch (status) {
    case 401:
      return "authentication";
    case 402:
      return "billing";
    case 403:
      return "permission";
    case 404:
      return "not_found";
    case 413:
      return "too_large";
    case 429:
      return "rate_limit";
    case 504:
      return "timeout";
    case 503:
    case 529:
      return "overloaded";
    default:
      return status >= 500 ? "server" : "invalid_request";
  }
}

/**
 * A validated request to an endpoint that generates no text and answers with one JSON body
 * (embeddings, moderations). Knobs and faults apply to it as to a buffered generation.
 */
export interface JsonCall {
  /** Model id as requested, if the body names one (for `only-model`). */
  readonly model: string | undefined;
  /** Where `[[sim …]]` directives are read: every input text. */
  readonly directiveText: string;
  /** Hash of the inputs: the default `key` of the `times` knob. */
  readonly seed: number;
  /** The 200 body; `omitUsage` when the `omit-usage` fault asks for usage to be left out. */
  render(omitUsage: boolean): string;
}

/** One such endpoint: the POST path it serves and its validation. */
export interface JsonEndpoint {
  readonly path: string;
  /**
   * The format whose error envelope, request-id header, API-key errors and header checks the
   * endpoint answers with (Anthropic's for its token count); OpenAI Chat's when absent.
   */
  readonly envelope?: WireFormat;
  parse(body: unknown): { readonly ok: true; readonly call: JsonCall } | Rejected;
}
