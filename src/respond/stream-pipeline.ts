import { noteProposedToolCall } from "../context/attempt-record.ts";
import { createParser } from "eventsource-parser";
import type { AttemptOutcome } from "../context/attempt-record.ts";
import { ABORT_CODES, abortError, CONTENT_MARGIN, type AttemptScope } from "../context/request-context.ts";
import type { Clock } from "../deps/clock.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { StreamDecoder, StreamEncoder } from "../protocol/codec.ts";
import type { NeutralEvent } from "../protocol/neutral.ts";

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

/**
 * The respond phase for a stream: provider SSE bytes → neutral events (decoded once) → client SSE
 * bytes (encoded last).
 *
 * Pull-based, so nothing is read from the provider faster than the client takes it. A read error
 * (reset, abort, deadline) still ends the client's stream with its protocol's error event rather
 * than a silent close; `[DONE]`-style endings are written only after a complete upstream stream.
 * However the stream ends — completed, cut, timed out, cancelled by the client, aborted by the
 * request (deadline, drain, disconnect), or an exception anywhere in decoding, encoding or
 * enqueueing — its attempt is finished and its request ended, once. Each pull is a checkpoint,
 * so a drain or a passed deadline is noticed on the next chunk.
 */
export function createClientStream(upstream: ReadableStream<Uint8Array>, opts: StreamPipelineOptions): ReadableStream<Uint8Array> {
  const { decoder, encoder, attempt, clock } = opts;
  const request = attempt.request;
  const streamStartedAt = clock.now();
  let lastContentAt: number | undefined;
  const a = attempt.record;
  // Only a request its entrypoint's content policy sampled keeps text, and only up to its cap.
  const content = request.record.content;
  const textDecoder = new TextDecoder();
  const reader = upstream.getReader();
  // The provider's body goes when the request ends, whoever ends it.
  request.own("upstream_body", () => void reader.cancel().catch(() => {}));
  let failed = false;
  // The code of the error event that ended the stream (the first one), for the attempt record.
  let failure: StreamErrorCode = "upstream_stream_cut";
  let out = "";

  const handle = (events: readonly NeutralEvent[]) => {
    for (const ev of events) {
      switch (ev.type) {
        case "text":
        case "reasoning":
          if (ev.text !== "") {
            a.firstContentAt ??= clock.now();
            lastContentAt = clock.now();
            a.outputChars = (a.outputChars ?? 0) + ev.text.length;
            if (content && ev.type === "text" && content.completion.length < content.maxChars + CONTENT_MARGIN) {
              content.completion += ev.text.slice(0, content.maxChars + CONTENT_MARGIN - content.completion.length);
            }
          }
          break;
        case "tool_call_start":
          a.firstContentAt ??= clock.now();
          lastContentAt = clock.now();
          noteProposedToolCall(a, ev.name);
          break;
        case "tool_call_args":
          if (ev.delta !== "") {
            a.firstContentAt ??= clock.now();
            lastContentAt = clock.now();
            a.outputChars = (a.outputChars ?? 0) + ev.delta.length;
          }
          break;
        case "stop":
          a.stopReason = ev.reason;
          break;
        case "usage":
          a.usage = ev.usage;
          break;
        case "error":
          if (!failed) failure = ev.code;
          failed = true;
          break;
        case "start":
        case "heartbeat":
        case "reasoning_signature":
          break;
      }
      out += encoder.encode(ev);
    }
  };

  const parser = createParser({
    onEvent: (msg) => {
      // The parser's message is an SSE event already (event, data): no copy per event.
      if (!failed) handle(decoder.decode(msg));
    },
    onComment: () => {
      if (!failed) handle([{ type: "heartbeat" }]);
    },
    onError: (err) => {
      // The SSE spec says unknown fields and bad `retry:` values are ignored; only an event past
      // the size bound is fatal.
      if (err.type !== "max-buffer-size-exceeded") return;
      if (!failed) handle([{ type: "error", code: "upstream_protocol_error", message: "The provider's stream was malformed." }]);
    },
    maxBufferSize: MAX_SSE_BUFFER_CHARS,
  });

  const take = (): Uint8Array | undefined => {
    if (out === "") return undefined;
    const bytes = textEncoder.encode(out);
    out = "";
    return bytes;
  };

  /** Ends the attempt and the request with how the stream went. */
  const settle = (outcome: AttemptOutcome, code?: StreamErrorCode) => {
    attempt.finish(outcome, code);
    request.finish(code === undefined ? { kind: "completed" } : { kind: "failed", error: new GatewayError(code, "The stream ended with an error.") });
  };

  const close = (controller: ReadableStreamDefaultController<Uint8Array>) => {
    out += encoder.end();
    const bytes = take();
    if (bytes) controller.enqueue(bytes);
    controller.close();
  };

  // One timer per stream, not one per read: it is armed for the current limit and, when it fires,
  // re-armed for the rest if content moved the limit meanwhile (a timer and a race per read showed
  // in the streaming profile). Only a read can time out: while the client is not pulling, the
  // provider is not the one keeping the stream waiting.
  const limits = opts.timeouts;
  const wait = opts.wait ?? realWait;
  let timer: { readonly done: Promise<void>; cancel(): void } | undefined;
  let timerAt = Number.POSITIVE_INFINITY;
  let reading = false;
  let timedOut = false;
  const limitAt = (t: NonNullable<typeof limits>) => (lastContentAt === undefined ? streamStartedAt + t.firstTokenMs : lastContentAt + t.idleMs);
  const arm = (t: NonNullable<typeof limits>) => {
    timer?.cancel();
    timerAt = limitAt(t);
    const armed = wait(timerAt - clock.now());
    timer = armed;
    void armed.done.then(() => {
      if (timer !== armed) return;
      timer = undefined;
      if (!reading) return;
      if (clock.now() < limitAt(t)) return arm(t);
      // The pending read ends (done) once the provider's body is cancelled; the flag says why.
      timedOut = true;
      void reader.cancel().catch(() => {});
    });
  };
  const stopTimer = () => {
    timer?.cancel();
    timer = undefined;
  };
  request.own("stream_timer", stopTimer);

  /** The next read; "timeout" when the first-token or idle limit passed while it waited. */
  const readWithin = async (): Promise<ReadableStreamReadResult<Uint8Array> | "timeout"> => {
    // The first content delta can bring the limit forward (idle shorter than first token).
    if (limits && (timer === undefined || limitAt(limits) < timerAt)) arm(limits);
    reading = true;
    try {
      const result = await reader.read();
      return timedOut ? "timeout" : result;
    } catch (err) {
      if (timedOut) return "timeout";
      throw err;
    } finally {
      reading = false;
    }
  };

  /** The request was aborted (drain, deadline) or ended while someone still reads: an error event, never a clean ending. */
  const endAborted = (controller: ReadableStreamDefaultController<Uint8Array>) => {
    const reason = request.abortReason;
    if (!failed) {
      // The event names why the stream was cut: the gateway's drain or the request's end is not the provider's doing.
      if (reason === "deadline") handle([{ type: "error", code: "deadline_exceeded", message: "The request deadline passed before the stream completed." }]);
      else if (reason === undefined) handle([{ type: "error", code: "upstream_stream_cut", message: "The stream was cancelled before it completed." }]);
      else handle([{ type: "error", code: ABORT_CODES[reason], message: abortError(reason).message }]);
    }
    close(controller);
  };

  const pump = async (controller: ReadableStreamDefaultController<Uint8Array>): Promise<void> => {
    // Loop until there is something to hand the client, so a partial event never stalls it.
    for (;;) {
      if (request.ended) return endAborted(controller);
      try {
        request.checkpoint();
      } catch {
        return endAborted(controller);
      }
      let result: ReadableStreamReadResult<Uint8Array>;
      try {
        const read = await readWithin();
        if (request.ended) return endAborted(controller);
        if (read === "timeout") {
          const first = lastContentAt === undefined;
          handle([{ type: "error", code: "upstream_timeout", message: first ? "The provider produced no content in time." : "The provider's stream stalled." }]);
          settle("timeout", "upstream_timeout");
          close(controller);
          return;
        }
        result = read;
      } catch {
        if (request.ended) return endAborted(controller);
        const timedOut = clock.now() >= request.deadlineAt;
        handle(
          timedOut
            ? [{ type: "error", code: "deadline_exceeded", message: "The request deadline passed before the stream completed." }]
            : [{ type: "error", code: "upstream_stream_cut", message: "The provider's stream ended before it was complete." }],
        );
        settle(timedOut ? "timeout" : "stream_cut", timedOut ? "deadline_exceeded" : "upstream_stream_cut");
        close(controller);
        return;
      }
      if (result.done) {
        if (!failed) {
          parser.feed(textDecoder.decode());
          handle(decoder.finish());
        }
        if (failed) settle(outcomeOf(failure), failure);
        else settle("success");
        close(controller);
        return;
      }
      parser.feed(textDecoder.decode(result.value, STREAMING));
      const bytes = take();
      if (failed) {
        // A protocol error (or the provider's own error event) ends the stream now; the
        // provider's remaining bytes are not read.
        settle(outcomeOf(failure), failure);
        if (bytes) controller.enqueue(bytes);
        close(controller);
        return;
      }
      if (bytes) {
        controller.enqueue(bytes);
        return;
      }
    }
  };

  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          await pump(controller);
        } catch (err) {
          // A bug in decoding, encoding or enqueueing: the attempt and the request still end,
          // once, and the client gets an error rather than a clean ending.
          attempt.finish("gateway_error", "internal_error");
          request.finish({ kind: "failed", error: new GatewayError("internal_error", "The gateway failed while streaming the response.", { cause: err }) });
          try {
            controller.error(err);
          } catch {
            // Already closed or errored.
          }
        }
      },
      cancel() {
        // The client went away (the runtime cancels the body).
        request.abort("client_disconnected");
      },
    },
    { highWaterMark: 0 },
  );
}
