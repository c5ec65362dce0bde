import type { Clock } from "../deps/clock.ts";
import type { Execution } from "../invoker/executor.ts";
import type { Codec, ResponseStamp } from "../protocol/codec.ts";
import type { NeutralRequest, NeutralResponse } from "../protocol/neutral.ts";
import type { StreamEventChain } from "../plugins/stream-event-chain.ts";
import { createClientStream } from "./stream-pipeline.ts";

/** The respond phase's output: the answer in the client's protocol. */
export type Answer =
  | { readonly kind: "buffered"; readonly response: NeutralResponse; readonly body: unknown }
  | { readonly kind: "stream"; readonly body: ReadableStream<Uint8Array> };

/**
 * The respond phase: provider output, decoded once by the invoke phase, encoded last for the
 * client. A buffered answer is encoded at once (or handed over neutral to an in-process caller,
 * which has no wire protocol); a stream becomes the client's SSE stream, which ends its attempt
 * and its request however it ends — decoded and re-encoded, or, when the provider speaks the
 * client's protocol and nothing needs the events, forwarded nearly as it is (the codec's
 * pass-through scanner).
 */
export function respond(
  execution: Extract<Execution, { ok: true }>,
  codec: Codec | undefined,
  stamp: ResponseStamp,
  request: NeutralRequest,
  opts: { readonly clock: Clock; readonly streamTimeouts: { readonly firstTokenMs: number; readonly idleMs: number } },
  /** The request's `stream_event_safe` plugins, when it has any. */
  events?: StreamEventChain,
): Answer {
  if (execution.kind === "buffered") {
    // The same filters a stream's events pass, over the whole answer at once.
    const response = events ? events.filterResponse(execution.response) : execution.response;
    return { kind: "buffered", response, body: codec ? codec.encodeResponse(response, stamp) : response };
  }
  if (!codec) throw new Error("an in-process call has no stream encoder: sub-calls are buffered");
  // Near pass-through when nothing needs the events: the provider speaks the client's protocol, no
  // plugin filters them, and the request's content is not sampled (which keeps the text).
  const encoder = codec.createStreamEncoder(stamp, request);
  const passThrough =
    execution.protocol === codec.id && events === undefined && execution.attempt.request.record.content === undefined
      ? codec.createPassThrough?.(stamp, request, { decoder: execution.decoder, encoder })
      : undefined;
  const body = createClientStream(execution.body, {
    decoder: execution.decoder,
    encoder,
    attempt: execution.attempt,
    clock: opts.clock,
    timeouts: opts.streamTimeouts,
    events,
    passThrough,
  });
  return { kind: "stream", body };
}
