import type { PassThroughParts, PassThroughScanner, ResponseStamp, SseEvent, StreamErrorEvent, StreamFacts } from "../codec.ts";
import type { NeutralRequest } from "../neutral.ts";
import { finishFromStop, stopFromFinish, usageFromWire, usageToWire } from "./response.ts";
import { DeltaShapes, literalChars } from "../delta-template.ts";
import { learnChatShape, readChatEvent } from "./stream-event.ts";
import { CUT_EVENT } from "../stream-errors.ts";
import type { ChatChunk } from "./stream-chunk.ts";

type ChatDelta = NonNullable<NonNullable<ChatChunk["choices"]>[number]["delta"]>;

/** A delta's fields a Chat client is sent (those the full path's encoder writes), as the provider gave them. */
function clientDelta(delta: ChatDelta | null | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (!delta) return out;
  if (delta.role !== undefined) out.role = delta.role;
  if (delta.content !== undefined) out.content = delta.content;
  if (delta.reasoning_content !== undefined) out.reasoning_content = delta.reasoning_content;
  if (delta.tool_calls !== undefined && delta.tool_calls !== null) {
    out.tool_calls = delta.tool_calls.map((tc) => {
      const call: Record<string, unknown> = { index: tc.index };
      if (tc.id !== undefined) call.id = tc.id;
      if (tc.id) call.type = "function";
      if (tc.function) {
        const fn: Record<string, unknown> = {};
        if (tc.function.name !== undefined) fn.name = tc.function.name;
        if (tc.function.arguments !== undefined) fn.arguments = tc.function.arguments;
        call.function = fn;
      }
      return call;
    });
  }
  return out;
}

/**
 * The Chat Completions pass-through (provider and client both speak Chat Completions). A plain
 * delta — one content or reasoning string, the bulk of a stream — is neither parsed nor
 * re-encoded once one like it has been: it matches the shape learnt from that one around its
 * string (see DeltaTemplate), its string is measured in place (TTFT, the idle limit, the output
 * size) and put into the client's event as the provider wrote it. Any other event — the first,
 * a finish, usage, tool calls, an error, an unknown shape — is parsed and checked exactly as the
 * full path's decoder does, its facts read, and re-serialised with the fields the full path's
 * encoder writes (the gateway's stamp, the finish reason in the client's terms; the provider's
 * other fields stay behind), which is also the frame its later plain deltas are put into. Usage reaches the client only when it asked
 * (`stream_options.include_usage`; the gateway always asks the provider), as the gateway read it.
 * `[DONE]` is written by the stream's end, only after a clean stop, as on the full path.
 */
export function createChatPassThrough(stamp: ResponseStamp, request: NeutralRequest, stream: PassThroughParts): PassThroughScanner {
  const includeUsage = request.streamUsage === true;
  const id = `chatcmpl-${stamp.id}`;
  // Writes the stop chunk the full path adds when the provider ended without a finish reason.
  const encoder = stream.encoder;
  const shapes = new DeltaShapes();
  let stopped = false;
  let done = false;
  let failed = false;

  /** Any event but a plain delta of a learnt shape: parsed and checked as the full path's decoder does. */
  function parsed(data: string, facts: StreamFacts): string | StreamErrorEvent {
    const read = readChatEvent(data);
    if (read.error) {
      failed = true;
      return read.error;
    }
    const chunk = read.chunk;
    const choice = chunk.choices?.[0];
    const delta = choice?.delta;
    if (delta) {
      if (delta.reasoning_content) facts.content(delta.reasoning_content.length);
      if (delta.content) facts.content(delta.content.length);
      for (const tc of delta.tool_calls ?? []) {
        if (tc.id && tc.function?.name) {
          facts.content(0);
          facts.toolCall(tc.function.name);
        }
        if (tc.function?.arguments) facts.content(tc.function.arguments.length);
      }
    }
    let finish: string | null = null;
    if (choice?.finish_reason) {
      stopped = true;
      const reason = stopFromFinish(choice.finish_reason);
      facts.stop(reason);
      // The finish reason in the client's terms, as the full path writes it.
      finish = finishFromStop(reason);
    }
    // The client's chunk holds what the full path's would (the provider's other fields, such as
    // its fingerprint or its own name for itself, stay behind), with the gateway's stamp.
    const client: Record<string, unknown> = { id, object: "chat.completion.chunk", created: stamp.created, model: stamp.model };
    client.choices = choice ? [{ index: 0, delta: clientDelta(delta), logprobs: null, finish_reason: finish }] : [];
    if (chunk.usage) {
      const usage = usageFromWire(chunk.usage);
      facts.usage(usage);
      // The usage-only chunk was the gateway's asking, not the client's: dropped.
      if (!includeUsage && choice === undefined) return "";
      // The gateway's reading of it, as a buffered answer gives it.
      if (includeUsage) client.usage = usageToWire(usage);
    } else if (includeUsage) client.usage = null;
    const out = JSON.stringify(client);
    // A plain delta (one string, nothing else to read) teaches the shape of those that follow.
    learnChatShape(shapes, data, chunk, out);
    return `data: ${out}\n\n`;
  }

  return {
    scan(sse: SseEvent, facts: StreamFacts): string | StreamErrorEvent {
      if (done || failed) return "";
      const data = sse.data;
      if (data === "[DONE]") {
        done = true;
        // A provider that ends properly but never said why still delivered a complete answer.
        if (stopped) return "";
        stopped = true;
        facts.stop("other");
        return encoder.encode({ type: "stop", reason: "other" });
      }
      const close = shapes.match(data);
      if (close < 0) return parsed(data, facts);
      // A plain delta of a learnt shape: its string measured in place and re-framed, not parsed.
      if (literalChars() > 0) facts.content(literalChars());
      const t = shapes.matched!;
      return `data: ${t.outPrefix}${data.slice(t.inPrefix.length, close)}${t.outSuffix}\n\n`;
    },
    finish(): StreamErrorEvent | undefined {
      if (done || failed) return undefined;
      failed = true;
      return CUT_EVENT;
    },
    end(): string {
      return stopped && done ? "data: [DONE]\n\n" : "";
    },
  };
}
