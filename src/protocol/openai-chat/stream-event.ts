import type { StreamErrorEvent } from "../codec.ts";
import type { Reader } from "../fast-guard.ts";
import { matchDelta, templateOf, type DeltaTemplate } from "../delta-template.ts";
import { readChatChunk, type ChatChunk } from "./stream-chunk.ts";

/** The error event for a stream event that is not JSON or not a chunk. */
export const UNREADABLE_EVENT: StreamErrorEvent = { type: "error", code: "upstream_protocol_error", message: "The provider sent an unreadable stream event." };
/** The error event for a chunk that carries the provider's error. */
export const PROVIDER_ERROR_EVENT: StreamErrorEvent = { type: "error", code: "upstream_error", message: "The provider reported an error mid-stream." };
/** The error event for a stream that ended without `[DONE]`. */
export const CUT_EVENT: StreamErrorEvent = { type: "error", code: "upstream_stream_cut", message: "The provider's stream ended before it was complete." };

/** One stream event's data read as a chunk, or the error event that ends the stream. */
export type ChatEventRead = { readonly chunk: ChatChunk; readonly error?: undefined } | { readonly chunk?: undefined; readonly error: StreamErrorEvent };

/**
 * Reads one event's data the one way both stream paths (decoder and pass-through) read it: JSON,
 * checked as a chunk, and a chunk carrying the provider's error ends the stream.
 */
export function readChatEvent(data: string, readChunk: Reader<ChatChunk> = readChatChunk): ChatEventRead {
  let json: unknown;
  try {
    json = JSON.parse(data);
  } catch {
    return { error: UNREADABLE_EVENT };
  }
  const chunk = readChunk(json);
  if (chunk === undefined) return { error: UNREADABLE_EVENT };
  if (chunk.error) return { error: PROVIDER_ERROR_EVENT };
  return { chunk };
}

/**
 * The learnt shapes of one stream's plain deltas (see {@link DeltaTemplate}): one for content and
 * one for reasoning, each learnt from the last plain delta of its kind that was parsed.
 */
export class PlainDeltaShapes {
  #content: DeltaTemplate | undefined;
  #reasoning: DeltaTemplate | undefined;
  /** The shape the last successful {@link match} found. */
  matched: DeltaTemplate | undefined;
  /** What the string of the last successful {@link match} is. */
  kind: "text" | "reasoning" = "text";

  /**
   * The index of `data`'s string's closing quote when `data` has a learnt shape (then
   * {@link matched}, {@link kind} and the delta template's `literalChars` describe it), else -1.
   */
  match(data: string): number {
    if (this.#content !== undefined) {
      const close = matchDelta(data, this.#content);
      if (close >= 0) {
        this.matched = this.#content;
        this.kind = "text";
        return close;
      }
    }
    if (this.#reasoning !== undefined) {
      const close = matchDelta(data, this.#reasoning);
      if (close >= 0) {
        this.matched = this.#reasoning;
        this.kind = "reasoning";
        return close;
      }
    }
    return -1;
  }

  /**
   * Learns from a parsed, checked event: a plain delta (one choice, one string, no finish, usage or
   * tool call) teaches the shape of those that follow; `out` is the client's text for it, when the
   * shape is to be re-framed rather than decoded.
   */
  learn(data: string, chunk: ChatChunk, out?: string): void {
    const choice = chunk.choices?.[0];
    const delta = choice?.delta;
    if (!delta || chunk.choices?.length !== 1 || choice?.finish_reason || chunk.usage || delta.tool_calls?.length) return;
    if (delta.content && !delta.reasoning_content) this.#content = templateOf(data, '"content":', delta.content, out) ?? this.#content;
    else if (delta.reasoning_content && !delta.content) this.#reasoning = templateOf(data, '"reasoning_content":', delta.reasoning_content, out) ?? this.#reasoning;
  }
}
