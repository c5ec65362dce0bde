import type { ResponseStamp, SseEvent, StreamDecoder, StreamEncoder } from "../codec.ts";
import type { Reader } from "../fast-guard.ts";
import type { NeutralEvent, NeutralRequest } from "../neutral.ts";
import { DeltaShapes, literalChars } from "../delta-template.ts";
import { finishFromStop, stopFromFinish, usageFromWire, usageToWire } from "./response.ts";
import { readChatChunk, type ChatChunk } from "./stream-chunk.ts";
import { learnChatShape, readChatEvent } from "./stream-event.ts";
import { CUT_EVENT } from "../stream-errors.ts";

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
  const shapes = new DeltaShapes();
  return {
    decode(sse: SseEvent): readonly NeutralEvent[] {
      if (done || failed) return [];
      const close = shapes.match(sse.data);
      if (close >= 0) {
        if (literalChars() === 0) return [];
        return [{ type: shapes.kind, text: shapes.matchedString(sse.data, close) }];
      }
      if (sse.data === "[DONE]") {
        done = true;
        // A provider that ends properly but never said why still delivered a complete answer;
        // give the client a finish rather than a stream that just stops.
        return stopped ? [] : [{ type: "stop", reason: "other" }];
      }
      const read = readChatEvent(sse.data, readChunk);
      if (read.error) {
        failed = true;
        return [read.error];
      }
      const chunk = read.chunk;
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
      learnChatShape(shapes, sse.data, chunk);
      return out;
    },
    finish(): readonly NeutralEvent[] {
      if (done || failed) return [];
      failed = true;
      return [CUT_EVENT];
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
