import type { StreamErrorEvent } from "../codec.ts";
import type { Reader } from "../fast-guard.ts";
import { templateOf, type DeltaShapes } from "../delta-template.ts";
import { readChatChunk, type ChatChunk } from "./stream-chunk.ts";
import { UNREADABLE_EVENT } from "../stream-errors.ts";

/** The error event for a chunk that carries the provider's error. */
export const PROVIDER_ERROR_EVENT: StreamErrorEvent = { type: "error", code: "upstream_error", message: "The provider reported an error mid-stream." };

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
 * Learns from a parsed, checked chunk: a plain delta (one choice, one string, no finish, usage or
 * tool call) teaches the shape of those that follow (see DeltaTemplate); `out` is the client's
 * text for it, when the shape is to be re-framed rather than decoded.
 */
export function learnChatShape(shapes: DeltaShapes, data: string, chunk: ChatChunk, out?: string): void {
  const choice = chunk.choices?.[0];
  const delta = choice?.delta;
  if (!delta || chunk.choices?.length !== 1 || choice?.finish_reason || chunk.usage || delta.tool_calls?.length) return;
  if (delta.content && !delta.reasoning_content) shapes.text = templateOf(data, '"content":', delta.content, out) ?? shapes.text;
  else if (delta.reasoning_content && !delta.content) shapes.reasoning = templateOf(data, '"reasoning_content":', delta.reasoning_content, out) ?? shapes.reasoning;
}
