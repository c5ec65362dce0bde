import { createParser, type EventSourceParser } from "eventsource-parser";
import { noteProposedToolCall, type AttemptOutcome, type AttemptRecord, type EvidenceReason } from "../context/attempt-record.ts";
import { ABORT_CODES, abortError, type AttemptScope, type RequestContext } from "../context/request-context.ts";
import { CONTENT_MARGIN, type RequestContent } from "../context/request-record.ts";
import type { Clock } from "../deps/clock.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { PassThroughScanner, SseEvent, StreamDecoder, StreamEncoder, StreamFacts } from "../protocol/codec.ts";
import type { NeutralEvent } from "../protocol/neutral.ts";
import type { StreamEventChain } from "../plugins/stream-event-chain.ts";
import { CUT_EVENT } from "../protocol/stream-errors.ts";
import { noteEventFacts } from "../protocol/stream-facts.ts";

/** Largest SSE event (or unterminated buffer) accepted from a provider before the stream is failed. */
export const MAX_SSE_BUFFER_CHARS = 1024 * 1024;

export interface StreamPipelineOptions {
  readonly decoder: StreamDecoder;
  readonly encoder: StreamEncoder;
  /** The stream's attempt (started, open); its request is ended with the stream. */
  readonly attempt: AttemptScope;
  readonly clock: Clock;
  /**
   * Stream timeouts: to the first content delta (from the start of the stream) and between content
   * deltas. Heartbeats reset neither, so a heartbeat-only stream ends; a stream that keeps
   * producing is never cut. Unset: only the request deadline applies.
   */
  readonly timeouts?: { readonly firstTokenMs: number; readonly idleMs: number } | undefined;
  /** Resolves after `ms` unless cancelled; injected so tests need no real time. */
  readonly wait?: ((ms: number) => { readonly done: Promise<void>; cancel(): void }) | undefined;
  /**
   * The request's `stream_event_safe` plugins: every decoded event passes through them before the
   * client's encoder (undefined or empty: events go straight to the encoder).
   */
  readonly events?: StreamEventChain | undefined;
  /**
   * The provider speaks the client's protocol and nothing needs the stream's events: its events
   * go to this scanner and on to the client nearly as they are, instead of through the decoder,
   * the plugins and the encoder (which still writes heartbeats and the gateway's error events).
   */
  readonly passThrough?: PassThroughScanner | undefined;
}

/** Stateless, so one per isolate. */
const textEncoder = new TextEncoder();
const STREAMING = { stream: true } as const;

function realWait(ms: number): { done: Promise<void>; cancel(): void } {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const done = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, Math.max(0, ms));
  });
  return { done, cancel: () => clearTimeout(timer) };
}

type StreamErrorCode = Extract<NeutralEvent, { type: "error" }>["code"];

/** The attempt outcome for the error event that ended a stream. */
function outcomeOf(code: StreamErrorCode): AttemptOutcome {
  switch (code) {
    case "upstream_protocol_error":
      return "protocol_error";
    case "deadline_exceeded":
    case "upstream_timeout":
      return "timeout";
    case "upstream_stream_cut":
    case "upstream_error":
      return "stream_cut";
    // Only for the switch to be whole: a stream ended by an abort ends after its request, whose
    // end already closed the attempt as client_cancelled.
    case "gateway_draining":
    case "client_closed":
      return "client_cancelled";
  }
}

/** Why a stream that had begun failed, as evidence; none for an answer that ended well or a cancel. */
function evidenceAfterStart(outcome: AttemptOutcome): EvidenceReason | undefined {
  switch (outcome) {
    case "stream_cut":
    case "timeout":
    case "protocol_error":
      return outcome;
    default:
      return undefined;
  }
}

/**
 * The respond phase for a stream: provider SSE bytes (or a binary framing its decoder reads) →
 * neutral events (decoded once) → the request's `stream_event_safe` plugins → client SSE bytes
 * (encoded last).
 *
 * Pull-based, so nothing is read from the provider faster than the client takes it. A read error
 * (reset, abort, deadline) still ends the client's stream with its protocol's error event rather
 * than a silent close; `[DONE]`-style endings are written only after a complete upstream stream.
 * However the stream ends — completed, cut, timed out, cancelled by the client, aborted by the
 * request (deadline, drain, disconnect), or an exception anywhere in decoding, a plugin, encoding
 * or enqueueing — its attempt is finished and its request ended, once. Each pull is a checkpoint,
 * so a drain or a passed deadline is noticed on the next chunk.
 */
export function createClientStream(upstream: ReadableStream<Uint8Array>, opts: StreamPipelineOptions): ReadableStream<Uint8Array> {
  const pump = new StreamPump(upstream, opts);
  return new ReadableStream<Uint8Array>(
    {
      pull: (controller) => pump.pull(controller),
      // The client went away (the runtime cancels the body).
      cancel: () => pump.request.abort("client_disconnected"),
    },
    { highWaterMark: 0 },
  );
}

type Controller = ReadableStreamDefaultController<Uint8Array>;

/**
 * How a stream's provider events become client text, chosen once per stream: decoded into neutral
 * events, through the plugins and encoded, or through a pass-through scanner.
 */
interface EventRoute {
  /** One SSE event from the provider. */
  event(msg: SseEvent): void;
  /** A binary framing's chunk (Bedrock's event stream); undefined: the provider speaks SSE text. */
  readonly bytes: ((chunk: Uint8Array) => void) | undefined;
  /** The provider's input is over: a cut if it did not end its protocol's way, and what plugins still hold. */
  endOfInput(): void;
  /** Closing text for the client (e.g. `data: [DONE]` after a clean end). */
  closing(): string;
}

/**
 * One stream's state and its steps: reading within the stream timeouts, turning provider events
 * into client bytes (with the attempt's record kept as they pass), and each way the stream ends.
 * A class rather than closures: one object per stream, its steps shared on the prototype.
 */
class StreamPump {
  readonly request: RequestContext;
  readonly #opts: StreamPipelineOptions;
  readonly #attempt: AttemptScope;
  readonly #a: AttemptRecord;
  readonly #clock: Clock;
  readonly #reader: ReadableStreamDefaultReader<Uint8Array>;
  readonly #parser: EventSourceParser;
  readonly #textDecoder = new TextDecoder();
  /** Only a request its entrypoint's content policy sampled keeps text, and only up to its cap. */
  readonly #content: RequestContent | undefined;
  readonly #startedAt: number;
  readonly #chain: StreamEventChain | undefined;
  readonly #route: EventRoute;
  /** The attempt's record, as the stream's events (decoded, or read by a pass-through scanner) report its facts. */
  readonly #facts: StreamFacts;
  #lastContentAt: number | undefined;
  #failed = false;
  /** The code of the error event that ended the stream (the first one), for the attempt record. */
  #failure: StreamErrorCode = "upstream_stream_cut";
  /** Encoded client bytes not yet handed over. */
  #out = "";
  // One timer per stream, not one per read: it is armed for the current limit and, when it fires,
  // re-armed for the rest if content moved the limit meanwhile (a timer and a race per read showed
  // in the streaming profile). Only a read can time out: while the client is not pulling, the
  // provider is not the one keeping the stream waiting.
  #timer: { readonly done: Promise<void>; cancel(): void } | undefined;
  #timerAt = Number.POSITIVE_INFINITY;
  #reading = false;
  #timedOut = false;

  constructor(upstream: ReadableStream<Uint8Array>, opts: StreamPipelineOptions) {
    this.#opts = opts;
    this.#attempt = opts.attempt;
    this.#a = opts.attempt.record;
    this.request = opts.attempt.request;
    this.#clock = opts.clock;
    this.#startedAt = opts.clock.now();
    this.#content = this.request.record.content;
    this.#chain = opts.events;
    this.#route = opts.passThrough ? this.#passRoute(opts.passThrough) : this.#decodeRoute(opts.decoder, opts.encoder);
    const a = this.#a;
    this.#facts = {
      content: (chars) => {
        this.#noteContent();
        if (chars > 0) a.outputChars = (a.outputChars ?? 0) + chars;
      },
      toolCall: (name) => noteProposedToolCall(a, name),
      stop: (reason) => {
        a.stopReason = reason;
      },
      usage: (usage) => {
        a.usage = usage;
      },
    };
    this.#reader = upstream.getReader();
    // The provider's body goes when the request ends, whoever ends it.
    this.request.own("upstream_body", () => void this.#reader.cancel().catch(() => {}));
    this.request.own("stream_timer", () => this.#stopTimer());
    this.#parser = createParser({
      onEvent: (msg) => {
        // The parser's message is an SSE event already (event, data): no copy per event.
        if (!this.#failed) this.#route.event(msg);
      },
      onComment: () => {
        if (!this.#failed) this.#emit([{ type: "heartbeat" }]);
      },
      onError: (err) => {
        // The SSE spec says unknown fields and bad `retry:` values are ignored; only an event past
        // the size bound is fatal.
        if (err.type !== "max-buffer-size-exceeded") return;
        if (!this.#failed) this.#emit([{ type: "error", code: "upstream_protocol_error", message: "The provider's stream was malformed." }]);
      },
      maxBufferSize: MAX_SSE_BUFFER_CHARS,
    });
  }

  /** One pull of the client: hands over the next bytes, or ends the stream; a throw ends it as the gateway's fault. */
  async pull(controller: Controller): Promise<void> {
    try {
      await this.#pump(controller);
    } catch (err) {
      // A bug in decoding, a plugin, encoding or enqueueing: the attempt and the request still
      // end, once, and the client gets an error rather than a clean ending.
      this.#attempt.finish("gateway_error", "internal_error");
      this.request.finish({ kind: "failed", error: new GatewayError("internal_error", "The gateway failed while streaming the response.", { cause: err }) });
      try {
        controller.error(err);
      } catch {
        // Already closed or errored.
      }
    }
  }

  /** Decoded events on their way to the client: through the plugins, when the request has any. */
  #emit(events: readonly NeutralEvent[]): void {
    const chain = this.#chain;
    if (chain === undefined) return this.#handle(events);
    for (const ev of events) this.#handle(chain.push(ev));
  }

  /** The full path: decoded once, through the request's plugins, encoded last. */
  #decodeRoute(decoder: StreamDecoder, encoder: StreamEncoder): EventRoute {
    const binary = decoder.bytes;
    return {
      event: (msg) => this.#emit(decoder.decode(msg)),
      bytes: binary === undefined ? undefined : (chunk) => this.#emit(binary(chunk)),
      endOfInput: () => {
        this.#emit(decoder.finish());
        // What plugins still hold is content of this attempt: it is counted before the attempt ends.
        if (this.#chain) this.#handle(this.#chain.end());
      },
      closing: () => {
        if (this.#chain) this.#handle(this.#chain.end());
        return encoder.end();
      },
    };
  }

  /** The pass-through: its scanner keeps the record; an error event ends the stream as on the full path. */
  #passRoute(pass: PassThroughScanner): EventRoute {
    return {
      event: (msg) => {
        const out = pass.scan(msg, this.#facts);
        if (typeof out === "string") this.#out += out;
        else this.#handle([out]);
      },
      bytes: undefined,
      endOfInput: () => {
        const cut = this.#failed ? undefined : pass.finish();
        if (cut) this.#handle([cut]);
      },
      closing: () => (this.#failed ? "" : pass.end()),
    };
  }

  /** Keeps the attempt's record (first content, output size, stop, usage, failure) and encodes each event. */
  #handle(events: readonly NeutralEvent[]): void {
    const encoder = this.#opts.encoder;
    for (const ev of events) {
      noteEventFacts(ev, this.#facts);
      if (ev.type === "text" && ev.text !== "") this.#keepContent(ev.text);
      else if (ev.type === "error") {
        if (!this.#failed) this.#failure = ev.code;
        this.#failed = true;
      }
      this.#out += encoder.encode(ev);
    }
  }

  /** TTFT is the first content the client is sent; the idle limit counts from the last. */
  #noteContent(): void {
    const now = this.#clock.now();
    this.#a.firstContentAt ??= now;
    this.#lastContentAt = now;
  }

  #keepContent(text: string): void {
    const content = this.#content;
    if (content && content.completion.length < content.maxChars + CONTENT_MARGIN) {
      content.completion += text.slice(0, content.maxChars + CONTENT_MARGIN - content.completion.length);
    }
  }

  #take(): Uint8Array | undefined {
    if (this.#out === "") return undefined;
    const bytes = textEncoder.encode(this.#out);
    this.#out = "";
    return bytes;
  }

  /** Ends the attempt and the request with how the stream went. */
  #settle(outcome: AttemptOutcome, code?: StreamErrorCode): void {
    const after = evidenceAfterStart(outcome);
    if (after !== undefined && !this.#attempt.ended) {
      // The headers said success; the answer then failed part-way, and the provider may have done
      // all of the work: the records keep unknown, and why.
      this.#attempt.record.evidence = { class: "unknown", reason: after, status: this.#attempt.record.evidence?.status };
    }
    this.#attempt.finish(outcome, code);
    this.request.finish(code === undefined ? { kind: "completed" } : { kind: "failed", error: new GatewayError(code, "The stream ended with an error.") });
  }

  /** The client's stream ends: what plugins still hold, the route's closing text, then close. */
  #close(controller: Controller): void {
    this.#out += this.#route.closing();
    const bytes = this.#take();
    if (bytes) controller.enqueue(bytes);
    controller.close();
  }

  #limitAt(t: NonNullable<StreamPipelineOptions["timeouts"]>): number {
    return this.#lastContentAt === undefined ? this.#startedAt + t.firstTokenMs : this.#lastContentAt + t.idleMs;
  }

  #arm(t: NonNullable<StreamPipelineOptions["timeouts"]>): void {
    this.#timer?.cancel();
    this.#timerAt = this.#limitAt(t);
    const armed = (this.#opts.wait ?? realWait)(this.#timerAt - this.#clock.now());
    this.#timer = armed;
    void armed.done.then(() => {
      if (this.#timer !== armed) return;
      this.#timer = undefined;
      if (!this.#reading) return;
      if (this.#clock.now() < this.#limitAt(t)) return this.#arm(t);
      // The pending read ends (done) once the provider's body is cancelled; the flag says why.
      this.#timedOut = true;
      void this.#reader.cancel().catch(() => {});
    });
  }

  #stopTimer(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  /** The next read; "timeout" when the first-token or idle limit passed while it waited. */
  async #readWithin(): Promise<ReadableStreamReadResult<Uint8Array> | "timeout"> {
    const limits = this.#opts.timeouts;
    // The first content delta can bring the limit forward (idle shorter than first token).
    if (limits && (this.#timer === undefined || this.#limitAt(limits) < this.#timerAt)) this.#arm(limits);
    this.#reading = true;
    try {
      const result = await this.#reader.read();
      return this.#timedOut ? "timeout" : result;
    } catch (err) {
      if (this.#timedOut) return "timeout";
      throw err;
    } finally {
      this.#reading = false;
    }
  }

  /** The request was aborted (drain, deadline) or ended while someone still reads: an error event, never a clean ending. */
  #endAborted(controller: Controller): void {
    const reason = this.request.abortReason;
    if (!this.#failed) {
      // The event names why the stream was cut: the gateway's drain or the request's end is not the provider's doing.
      if (reason === "deadline") this.#emit([{ type: "error", code: "deadline_exceeded", message: "The request deadline passed before the stream completed." }]);
      else if (reason === undefined) this.#emit([{ type: "error", code: "upstream_stream_cut", message: "The stream was cancelled before it completed." }]);
      else this.#emit([{ type: "error", code: ABORT_CODES[reason], message: abortError(reason).message }]);
    }
    this.#close(controller);
  }

  /** The provider's read failed (reset, abort): the deadline's error if it passed, else a cut. */
  #endReadFailure(controller: Controller): void {
    const timedOut = this.#clock.now() >= this.request.deadlineAt;
    this.#emit(
      timedOut
        ? [{ type: "error", code: "deadline_exceeded", message: "The request deadline passed before the stream completed." }]
        : [CUT_EVENT],
    );
    this.#settle(timedOut ? "timeout" : "stream_cut", timedOut ? "deadline_exceeded" : "upstream_stream_cut");
    this.#close(controller);
  }

  /** The first-token or idle limit passed while the client waited. */
  #endTimedOut(controller: Controller): void {
    const first = this.#lastContentAt === undefined;
    this.#emit([{ type: "error", code: "upstream_timeout", message: first ? "The provider produced no content in time." : "The provider's stream stalled." }]);
    this.#settle("timeout", "upstream_timeout");
    this.#close(controller);
  }

  /** The provider's stream is over: complete, or ended by the error event it carried. */
  #endDone(controller: Controller): void {
    if (!this.#failed) {
      if (this.#route.bytes === undefined) this.#parser.feed(this.#textDecoder.decode());
      this.#route.endOfInput();
    }
    if (this.#failed) this.#settle(outcomeOf(this.#failure), this.#failure);
    else this.#settle("success");
    this.#close(controller);
  }

  async #pump(controller: Controller): Promise<void> {
    const request = this.request;
    // Loop until there is something to hand the client, so a partial event never stalls it.
    for (;;) {
      if (request.ended) return this.#endAborted(controller);
      try {
        request.checkpoint();
      } catch {
        return this.#endAborted(controller);
      }
      let result: ReadableStreamReadResult<Uint8Array>;
      try {
        const read = await this.#readWithin();
        if (request.ended) return this.#endAborted(controller);
        if (read === "timeout") return this.#endTimedOut(controller);
        result = read;
      } catch {
        if (request.ended) return this.#endAborted(controller);
        return this.#endReadFailure(controller);
      }
      if (result.done) return this.#endDone(controller);
      // A binary framing (Bedrock's event stream) is its decoder's to read; anything else is SSE text.
      const binary = this.#route.bytes;
      if (binary !== undefined) {
        if (!this.#failed) binary(result.value);
      } else this.#parser.feed(this.#textDecoder.decode(result.value, STREAMING));
      const bytes = this.#take();
      if (this.#failed) {
        // A protocol error (or the provider's own error event) ends the stream now; the
        // provider's remaining bytes are not read.
        this.#settle(outcomeOf(this.#failure), this.#failure);
        if (bytes) controller.enqueue(bytes);
        this.#close(controller);
        return;
      }
      if (bytes) {
        controller.enqueue(bytes);
        return;
      }
    }
  }
}
