import type { ResponseStamp, SseEvent, StreamDecoder, StreamEncoder } from "../codec.ts";
import type { Reader } from "../fast-guard.ts";
import type { NeutralEvent, NeutralRequest } from "../neutral.ts";
import { literalChars, literalEscaped, matchDelta, templateOf, type DeltaTemplate } from "./delta-template.ts";
import { finishFromStop, stopFromFinish, usageFromWire, usageToWire } from "./response.ts";
import { readChatChunk, type ChatChunk } from "./stream-chunk.ts";

/**
 * Decodes an OpenAI Chat Completions SSE stream. A stream is complete only when `data: [DONE]`
 * arrived; anything else at end of input is a cut, reported as an error event, never as success.
 */
export function createChatStreamDecoder(): StreamDecoder {
  return chatStreamDecoder(readChatChunk);
}

/** The decoder over a given chunk reader; tests hand it zod alone to prove the guard changes nothing. */
export function chatStreamDecoder(readChunk: Reader<ChatChunk>): StreamDecoder {
  let started = false;
  let stopped = false;
  let done = false;
  let failed = false;
  // The shapes of a plain content and reasoning delta once one was parsed: later deltas of the
  // same shape are read without parsing them (see DeltaTemplate).
  let content: DeltaTemplate | undefined;
  let reasoning: DeltaTemplate | undefined;
  /** The string of a delta of a learnt shape: its events, or undefined when `data` is not of that shape. */
  const plain = (data: string, t: DeltaTemplate | undefined, type: "text" | "reasoning"): readonly NeutralEvent[] | undefined => {
    const close = t === undefined ? -1 : matchDelta(data, t);
    if (close < 0) return undefined;
    if (literalChars() === 0) return [];
    const text = literalEscaped() ? (JSON.parse(data.slice(t!.inPrefix.length - 1, close + 1)) as string) : data.slice(t!.inPrefix.length, close);
    return [{ type, text }];
  };
  return {
    decode(sse: SseEvent): readonly NeutralEvent[] {
      if (done || failed) return [];
      const fast = plain(sse.data, content, "text") ?? plain(sse.data, reasoning, "reasoning");
      if (fast !== undefined) return fast;
      if (sse.data === "[DONE]") {
        done = true;
        // A provider that ends properly but never said why still delivered a complete answer;
        // give the client a finish rather than a stream that just stops.
        return stopped ? [] : [{ type: "stop", reason: "other" }];
      }
      let json: unknown;
      try {
        json = JSON.parse(sse.data);
      } catch {
        failed = true;
        return [{ type: "error", code: "upstream_protocol_error", message: "The provider sent an unreadable stream event." }];
      }
      const chunk = readChunk(json);
      if (chunk === undefined) {
        failed = true;
        return [{ type: "error", code: "upstream_protocol_error", message: "The provider sent an unreadable stream event." }];
      }
      if (chunk.error) {
        failed = true;
        return [{ type: "error", code: "upstream_error", message: "The provider reported an error mid-stream." }];
      }
      const out: NeutralEvent[] = [];
      if (!started) {
        started = true;
        out.push({ type: "start" });
      }
      const choice = chunk.choices?.[0];
      const delta = choice?.delta;
      if (delta) {
        if (delta.reasoning_content) out.push({ type: "reasoning", text: delta.reasoning_content });
        if (delta.content) out.push({ type: "text", text: delta.content });
        for (const tc of delta.tool_calls ?? []) {
          if (tc.id && tc.function?.name) out.push({ type: "tool_call_start", index: tc.index, id: tc.id, name: tc.function.name });
          if (tc.function?.arguments) out.push({ type: "tool_call_args", index: tc.index, delta: tc.function.arguments });
        }
      }
      if (choice?.finish_reason) {
        stopped = true;
        out.push({ type: "stop", reason: stopFromFinish(choice.finish_reason) });
      }
      if (chunk.usage) out.push({ type: "usage", usage: usageFromWire(chunk.usage) });
      if (delta && chunk.choices?.length === 1 && !choice?.finish_reason && !chunk.usage && !delta.tool_calls?.length) {
        if (delta.content && !delta.reasoning_content) content = templateOf(sse.data, '"content":', delta.content) ?? content;
        else if (delta.reasoning_content && !delta.content) reasoning = templateOf(sse.data, '"reasoning_content":', delta.reasoning_content) ?? reasoning;
      }
      return out;
    },
    finish(): readonly NeutralEvent[] {
      if (done || failed) return [];
      failed = true;
      return [{ type: "error", code: "upstream_stream_cut", message: "The provider's stream ended before it was complete." }];
    },
  };
}

/**
 * Encodes neutral events as OpenAI Chat Completions chunks. Usage reaches the client only when it
 * asked for it (`stream_options.include_usage`); `[DONE]` is written only after a clean stop, so a
 * cut upstream never looks like a finished answer.
 */
export function createChatStreamEncoder(stamp: ResponseStamp, request: NeutralRequest): StreamEncoder {
  const includeUsage = request.streamUsage;
  const head = `{"id":${JSON.stringify(`chatcmpl-${stamp.id}`)},"object":"chat.completion.chunk","created":${stamp.created},"model":${JSON.stringify(stamp.model)}`;
  const usageNull = includeUsage ? ',"usage":null' : "";
  let stopped = false;
  let failed = false;
  const chunk = (delta: string, finish: string | null = null) =>
    `data: ${head},"choices":[{"index":0,"delta":${delta},"logprobs":null,"finish_reason":${finish === null ? "null" : JSON.stringify(finish)}}]${usageNull}}\n\n`;
  return {
    encode(ev: NeutralEvent): string {
      switch (ev.type) {
        case "start":
          return chunk('{"role":"assistant","content":""}');
        case "text":
          return chunk(`{"content":${JSON.stringify(ev.text)}}`);
        case "reasoning":
          // Not part of OpenAI's schema; the de-facto field of OpenAI-compatible reasoning servers.
          return chunk(`{"reasoning_content":${JSON.stringify(ev.text)}}`);
        case "reasoning_signature":
          // Chat Completions has nowhere to put a reasoning signature (documented in docs/protocols.md).
          return "";
        case "tool_call_start":
          return chunk(
            `{"tool_calls":[{"index":${ev.index},"id":${JSON.stringify(ev.id)},"type":"function","function":{"name":${JSON.stringify(ev.name)},"arguments":""}}]}`,
          );
        case "tool_call_args":
          return chunk(`{"tool_calls":[{"index":${ev.index},"function":{"arguments":${JSON.stringify(ev.delta)}}}]}`);
        case "stop":
          stopped = true;
          return chunk("{}", finishFromStop(ev.reason));
        case "usage":
          return includeUsage ? `data: ${head},"choices":[],"usage":${JSON.stringify(usageToWire(ev.usage))}}\n\n` : "";
        case "heartbeat":
          return ": keep-alive\n\n";
        case "error":
          failed = true;
          return `data: ${JSON.stringify({ error: { message: ev.message, type: "server_error", param: null, code: ev.code } })}\n\n`;
      }
    },
    end(): string {
      return stopped && !failed ? "data: [DONE]\n\n" : "";
    },
  };
}
