import { createParser } from "eventsource-parser";
import type { AttemptOutcome } from "../invoker/attempt.ts";
import type { StreamDecoder, StreamEncoder } from "../protocol/codec.ts";
import type { NeutralEvent } from "../protocol/neutral.ts";
import type { Clock } from "../deps/clock.ts";
import type { AttemptFinalizer } from "./attempt-finalizer.ts";

/** Largest SSE event (or unterminated buffer) accepted from a provider before the stream is failed. */
export const MAX_SSE_BUFFER_CHARS = 1024 * 1024;

export interface StreamPipelineOptions {
  readonly decoder: StreamDecoder;
  readonly encoder: StreamEncoder;
  readonly finalizer: AttemptFinalizer;
  readonly clock: Clock;
  /** Epoch ms after which a read failure counts as the request deadline, not a cut. */
  readonly deadlineAt: number;
  /** Runs exactly once when the client stream ends, fails or is cancelled (releases leases). */
  readonly onEnd?: (() => void) | undefined;
  /**
   * Stream timeouts: to the first content delta (from the start of the stream) and between content
   * deltas. Heartbeats reset neither, so a heartbeat-only stream ends; a stream that keeps
   * producing is never cut. Unset: only the request deadline applies.
   */
  readonly timeouts?: { readonly firstTokenMs: number; readonly idleMs: number } | undefined;
  /**
   * The client's cancellation (disconnect or drain). With only the body's `cancel()` to end it,
   * a stream whose client disconnected under `workerd serve` left no access-log line and no
   * ledger settlement (seen end to end); ending it on the request signal's abort event, which
   * runs while the request is still alive, settles it. Whichever comes first ends it, once.
   */
  readonly clientSignal?: AbortSignal | undefined;
  /** Resolves after `ms` unless cancelled; injected so tests need no real time. */
  readonly wait?: ((ms: number) => { readonly done: Promise<void>; cancel(): void }) | undefined;
}

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
  }
}

/**
 * Provider SSE bytes → neutral events (decoded once) → client SSE bytes (encoded last).
 *
 * Pull-based, so nothing is read from the provider faster than the client takes it. A read error
 * (reset, abort, deadline) still ends the client's stream with its protocol's error event rather
 * than a silent close; `[DONE]`-style endings are written only after a complete upstream stream.
 * Cancelling the client side cancels the provider's body, which aborts the upstream request.
 */
export function createClientStream(upstream: ReadableStream<Uint8Array>, opts: StreamPipelineOptions): ReadableStream<Uint8Array> {
  const { decoder, encoder, finalizer, clock } = opts;
  const streamStartedAt = clock.now();
  let lastContentAt: number | undefined;
  let ended = false;
  const onEnd = () => {
    if (ended) return;
    ended = true;
    opts.onEnd?.();
  };
  const attempt = finalizer.attempt;
  const textDecoder = new TextDecoder();
  const textEncoder = new TextEncoder();
  const reader = upstream.getReader();
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
            attempt.firstContentAt ??= clock.now();
            lastContentAt = clock.now();
            attempt.outputChars = (attempt.outputChars ?? 0) + ev.text.length;
          }
          break;
        case "tool_call_start":
          attempt.firstContentAt ??= clock.now();
          lastContentAt = clock.now();
          break;
        case "tool_call_args":
          if (ev.delta !== "") {
            attempt.firstContentAt ??= clock.now();
            lastContentAt = clock.now();
            attempt.outputChars = (attempt.outputChars ?? 0) + ev.delta.length;
          }
          break;
        case "stop":
          attempt.stopReason = ev.reason;
          break;
        case "usage":
          attempt.usage = ev.usage;
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
      if (!failed) handle(decoder.decode({ event: msg.event, data: msg.data }));
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

  const end = (controller: ReadableStreamDefaultController<Uint8Array>) => {
    out += encoder.end();
    const bytes = take();
    if (bytes) controller.enqueue(bytes);
    controller.close();
    onEnd();
  };

  /** The read, or "timeout" when the first-token or idle limit passes first. */
  const readWithin = async (read: Promise<ReadableStreamReadResult<Uint8Array>>): Promise<ReadableStreamReadResult<Uint8Array> | "timeout"> => {
    const t = opts.timeouts;
    if (!t) return read;
    const limitAt = lastContentAt === undefined ? streamStartedAt + t.firstTokenMs : lastContentAt + t.idleMs;
    const timer = (opts.wait ?? realWait)(limitAt - clock.now());
    try {
      return await Promise.race([read, timer.done.then(() => "timeout" as const)]);
    } finally {
      timer.cancel();
      read.catch(() => {});
    }
  };

  let cancelled = false;
  const clientGone = (reason?: unknown) => {
    cancelled = true;
    if (!finalizer.finished) finalizer.finish("client_cancelled", "client_closed");
    onEnd();
    reader.cancel(reason).catch(() => {});
  };
  const signal = opts.clientSignal;
  if (signal?.aborted) clientGone(signal.reason);
  else signal?.addEventListener("abort", () => clientGone(signal.reason), { once: true });

  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        // Cancelled while someone still reads (a drain): an error event, never a clean ending.
        const endCancelled = () => {
          if (!failed) handle([{ type: "error", code: "upstream_stream_cut", message: "The stream was cancelled before it completed." }]);
          end(controller);
        };
        // Loop until there is something to hand the client, so a partial event never stalls it.
        for (;;) {
          if (cancelled) return endCancelled();
          let result: ReadableStreamReadResult<Uint8Array>;
          try {
            const read = await readWithin(reader.read());
            if (cancelled) return endCancelled();
            if (read === "timeout") {
              const first = lastContentAt === undefined;
              handle([
                {
                  type: "error",
                  code: "upstream_timeout",
                  message: first ? "The provider produced no content in time." : "The provider's stream stalled.",
                },
              ]);
              finalizer.finish("timeout", "upstream_timeout");
              end(controller);
              reader.cancel().catch(() => {});
              return;
            }
            result = read;
          } catch {
            if (cancelled) return endCancelled();
            const timedOut = clock.now() >= opts.deadlineAt;
            handle(
              timedOut
                ? [{ type: "error", code: "deadline_exceeded", message: "The request deadline passed before the stream completed." }]
                : [{ type: "error", code: "upstream_stream_cut", message: "The provider's stream ended before it was complete." }],
            );
            finalizer.finish(timedOut ? "timeout" : "stream_cut", timedOut ? "deadline_exceeded" : "upstream_stream_cut");
            end(controller);
            return;
          }
          if (result.done) {
            if (!failed) {
              parser.feed(textDecoder.decode());
              handle(decoder.finish());
            }
            if (failed) finalizer.finish(outcomeOf(failure), failure);
            else finalizer.finish("success");
            end(controller);
            return;
          }
          parser.feed(textDecoder.decode(result.value, { stream: true }));
          const bytes = take();
          if (failed) {
            // A protocol error (or the provider's own error event) ends the stream now; the
            // provider's remaining bytes are not read.
            finalizer.finish(outcomeOf(failure), failure);
            if (bytes) controller.enqueue(bytes);
            end(controller);
            reader.cancel().catch(() => {});
            return;
          }
          if (bytes) {
            controller.enqueue(bytes);
            return;
          }
        }
      },
      cancel(reason) {
        clientGone(reason);
      },
    },
    { highWaterMark: 0 },
  );
}
