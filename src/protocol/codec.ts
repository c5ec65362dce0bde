import type { BackendEmbeddingsWire, EmbeddingsCodec } from "./embeddings.ts";
import type { RequestFeature } from "./features.ts";
import type { BackendInputWire } from "./input-wire.ts";
import type { ModerationsCodec, NeutralModerationRequest, NeutralModerationResponse } from "./moderations.ts";
import type { NeutralEvent, NeutralRequest, NeutralResponse, StopReason, Usage } from "./neutral.ts";
import type { BackendTokenCountWire, TokenCountCodec } from "./token-count.ts";

/** Wire protocols, for clients and backends alike. */
export const PROTOCOL_IDS = ["openai-chat", "openai-responses", "anthropic-messages"] as const;
export type ProtocolId = (typeof PROTOCOL_IDS)[number];

/**
 * Protocols a backend may speak: every wire protocol, and those only a backend speaks — reached
 * through a runtime binding rather than a URL (Workers AI), or a provider's own variant of a wire
 * protocol (Azure OpenAI) — so no client ever sends them.
 */
export const BACKEND_PROTOCOL_IDS = [...PROTOCOL_IDS, "workers-ai", "azure-openai", "bedrock-converse", "gemini"] as const;
export type BackendProtocolId = (typeof BACKEND_PROTOCOL_IDS)[number];

/** What the gateway stamps on every response it writes, instead of the provider's identifiers. */
export interface ResponseStamp {
  /** Unique id derived from the request id (32 hex chars); each codec adds its protocol's prefix. */
  readonly id: string;
  /** Unix seconds. */
  readonly created: number;
  /** The public model name the client asked for; the provider's model id stays internal. */
  readonly model: string;
}

/** One server-sent event as the SSE parser hands it over. */
export interface SseEvent {
  readonly event?: string | undefined;
  readonly data: string;
}

/** Turns neutral events into the client's SSE text, one call per event. */
export interface StreamEncoder {
  /** SSE text for one event ("" when the protocol has nothing to send for it). */
  encode(event: NeutralEvent): string;
  /** Closing text after the last event (e.g. `data: [DONE]`), only if the stream ended cleanly. */
  end(): string;
}

/** Turns a provider's SSE events into neutral events; stateful, one per upstream stream. */
export interface StreamDecoder {
  decode(event: SseEvent): readonly NeutralEvent[];
  /**
   * Present when the provider's stream is not SSE but a binary framing (Bedrock's event stream):
   * the stream's raw bytes, in chunks cut anywhere, go here instead of through the SSE parser, and
   * `decode` is never called.
   */
  readonly bytes?: ((chunk: Uint8Array) => readonly NeutralEvent[]) | undefined;
  /** Called at end of input; yields an error event when the stream did not end the protocol's way. */
  finish(): readonly NeutralEvent[];
}

/** The error event that ends a stream. */
export type StreamErrorEvent = Extract<NeutralEvent, { type: "error" }>;

/**
 * What a pass-through stream tells the gateway about the events it forwards: the facts the full
 * path reads off neutral events, and nothing else.
 */
export interface StreamFacts {
  /** Content reached the client (TTFT, the idle limit): `chars` of text, reasoning or tool arguments (0 for a tool call's start). */
  content(chars: number): void;
  /** The provider proposed a call of this tool. */
  toolCall(name: string): void;
  stop(reason: StopReason): void;
  usage(usage: Usage): void;
}

/**
 * The stream's own decoder (the provider's side, same protocol) and client encoder, which the
 * pump also holds: a scanner that reads or writes some events the full path's way uses these
 * rather than making its own.
 */
export interface PassThroughParts {
  readonly decoder: StreamDecoder;
  readonly encoder: StreamEncoder;
}

/**
 * A stream whose provider speaks the client's protocol, forwarded nearly as it is: a plain delta
 * (the bulk of a stream) is scanned for the facts the gateway must know and re-framed where the
 * gateway's stamp says so, never decoded to neutral events or re-encoded; the stream's other
 * events are read as the full path reads them (a protocol may run them through its decoder and
 * encoder), so the client's bytes say what the full path's would. One per stream, stateful.
 * Heartbeats and the gateway's own error events still go through the client protocol's stream
 * encoder, so those bytes are the full path's.
 */
export interface PassThroughScanner {
  /** One provider event: its facts go to `facts`; returns the client's text for it ("" to drop it), or the error event that ends the stream. */
  scan(event: SseEvent, facts: StreamFacts): string | StreamErrorEvent;
  /** At end of input: the cut's error event when the stream did not end the protocol's way. */
  finish(): StreamErrorEvent | undefined;
  /** Closing text after a stream that ended cleanly (e.g. `data: [DONE]`). */
  end(): string;
}

/**
 * The backend side of a protocol: encode requests for the provider, decode its answers. Each
 * direction runs exactly once per message.
 */
export interface BackendCodec {
  readonly id: BackendProtocolId;
  /**
   * The codec's version, recorded with each attempt it served (access line, call ledger), so a
   * usage figure can be traced to the code that read it. Raised when the codec's wire changes.
   */
  readonly version: string;
  /** The request features this protocol carries (see features.ts). */
  readonly carries: ReadonlySet<RequestFeature>;
  /**
   * The protocol asks for per-token log-probabilities (a neutral request's `logprobs`) and reads
   * them back into the answer: only a backend of such a protocol may declare the `logprobs`
   * capability, which a cascade's log-probability scores read.
   */
  readonly logprobs: boolean;
  /** Path appended to the backend's base URL (unused by a protocol reached through a binding). */
  readonly upstreamPath: string;
  /**
   * The chat path for one request, when the protocol's path names the model or the operation
   * (Bedrock: `/model/{id}/converse` or `/converse-stream`); `upstreamPath` otherwise.
   */
  readonly upstreamPathFor?: ((upstreamModel: string, stream: boolean) => string) | undefined;
  /** The `accept` of a streamed request, when the stream is not SSE (Bedrock's event stream). */
  readonly streamAccept?: string | undefined;
  /** The request is signed with AWS SigV4 for this service (Bedrock: `bedrock`). */
  readonly sigV4Service?: string | undefined;
  /**
   * Statuses this protocol's providers send INSTEAD of starting work (rate limits, overload
   * refusals), so a retry cannot bill twice. Conservative: when in doubt, leave it out.
   */
  readonly rejectedBeforeProcessing: ReadonlySet<number>;
  /** Headers the protocol itself requires (e.g. `anthropic-version`); config may override. */
  readonly upstreamHeaders?: Readonly<Record<string, string>> | undefined;
  /** Neutral request → provider JSON body for the provider's own model id. */
  encodeRequest(request: NeutralRequest, upstreamModel: string, options: UpstreamOptions): unknown;
  /** Provider JSON body → neutral response; throws GatewayError(upstream_protocol_error). */
  decodeResponse(body: unknown): NeutralResponse;
  /** A stream decoder for one upstream stream. */
  createStreamDecoder(): StreamDecoder;
  /** The protocol's embeddings wire, when its providers serve embeddings (a backend must still declare `embeddings`). */
  readonly embeddings?: BackendEmbeddingsWire | undefined;
  /** The protocol's moderations wire, when its providers serve moderations (a backend must still declare `moderations`). */
  readonly moderations?: BackendInputWire<NeutralModerationRequest, NeutralModerationResponse> | undefined;
  /** The protocol's token-count wire, when its providers count tokens (any backend of the protocol is asked). */
  readonly countTokens?: BackendTokenCountWire | undefined;
}

/**
 * One wire protocol, both directions. The client side decodes requests and encodes responses; the
 * backend side (see {@link BackendCodec}) encodes requests and decodes responses. Each direction
 * runs exactly once per message.
 */
export interface Codec extends BackendCodec {
  readonly id: ProtocolId;
  /** Client side: this protocol's own request field for a feature, for error messages. */
  paramName(feature: RequestFeature): string;
  /** Client side: body → neutral request; throws GatewayError (invalid_request with `param`). */
  decodeRequest(body: unknown): NeutralRequest;
  /** Client side: neutral response → JSON body. */
  encodeResponse(response: NeutralResponse, stamp: ResponseStamp): unknown;
  /** Client side: a stream encoder for one response. */
  createStreamEncoder(stamp: ResponseStamp, request: NeutralRequest): StreamEncoder;
  /**
   * Client side: a pass-through scanner for one stream whose provider speaks this same protocol,
   * when the protocol has one (undefined: the stream takes the full path). Only asked when nothing
   * else needs the stream's events (no `stream_event_safe` plugin, no content sampling).
   */
  readonly createPassThrough?: ((stamp: ResponseStamp, request: NeutralRequest, stream: PassThroughParts) => PassThroughScanner | undefined) | undefined;
  /** The protocol's embeddings wire, both directions, when its providers serve embeddings. */
  readonly embeddings?: EmbeddingsCodec | undefined;
  /** The protocol's moderations wire, both directions. */
  readonly moderations?: ModerationsCodec | undefined;
  /** The protocol's token-count wire, both directions. */
  readonly countTokens?: TokenCountCodec | undefined;
}

/** Backend facts the request encoder needs. */
export interface UpstreamOptions {
  /** The backend reports usage in streams when asked (OpenAI `stream_options.include_usage`). */
  readonly streamUsage: boolean;
}

/**
 * Codecs by protocol id; a protocol without a codec cannot be named by a backend. Client
 * protocols are looked up with `get`, a backend's with `backend` (which also knows the protocols
 * only a backend speaks).
 */
export class CodecRegistry {
  readonly #codecs: ReadonlyMap<ProtocolId, Codec>;
  readonly #backends: ReadonlyMap<BackendProtocolId, BackendCodec>;
  constructor(codecs: readonly Codec[], backendOnly: readonly BackendCodec[] = []) {
    this.#codecs = new Map(codecs.map((c) => [c.id, c]));
    this.#backends = new Map<BackendProtocolId, BackendCodec>([...codecs, ...backendOnly].map((c) => [c.id, c]));
  }
  /** A client protocol's codec. */
  get(id: ProtocolId): Codec | undefined {
    return this.#codecs.get(id);
  }
  /** The codec a backend of this protocol is spoken to with. */
  backend(id: BackendProtocolId): BackendCodec | undefined {
    return this.#backends.get(id);
  }
  /** The protocols a backend may name. */
  ids(): ReadonlySet<BackendProtocolId> {
    return new Set(this.#backends.keys());
  }
  /** The protocols whose backends may declare the `logprobs` capability (see {@link BackendCodec.logprobs}). */
  logprobsIds(): ReadonlySet<BackendProtocolId> {
    return new Set([...this.#backends.values()].filter((c) => c.logprobs).map((c) => c.id));
  }
}
