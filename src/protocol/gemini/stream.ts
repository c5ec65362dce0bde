import type { SseEvent, StreamDecoder } from "../codec.ts";
import { isRecord } from "../fast-guard.ts";
import type { NeutralEvent, StopReason, Usage } from "../neutral.ts";
import { generateContentResponseSchema, stopFromFinish, toolCallOf, usageFromMetadata } from "./response.ts";
import { CUT_EVENT, UNREADABLE_EVENT } from "../stream-errors.ts";

/*
 * `streamGenerateContent?alt=sse` is server-sent events whose data are `GenerateContentResponse`
 * chunks: text (and thought) parts arrive as deltas, a function call arrives whole in one part,
 * the last chunk carries the `finishReason`, and `usageMetadata` rides on chunks as a running
 * total (the last one is the answer's). There is no end marker: the stream is complete when a
 * chunk gave a finish reason (or the prompt was blocked) and the connection then closed. An error
 * after the stream began comes as Google's error envelope in a data chunk.
 */


/**
 * Decodes a Gemini stream. The stop and the usage are sent at the end of input, after the last
 * content, as every neutral stream ends; an end without a finish reason is a cut, reported as an
 * error event, never as success.
 */
export function createGeminiStreamDecoder(): StreamDecoder {
  let started = false;
  let failed = false;
  /** The finish reason, once a chunk gave one (`BLOCKED` for a blocked prompt): the stream is complete. */
  let finishReason: string | undefined;
  let usage: Usage | undefined;
  let calls = 0;

  return {
    decode(sse: SseEvent): readonly NeutralEvent[] {
      if (failed) return [];
      let json: unknown;
      try {
        json = JSON.parse(sse.data);
      } catch {
        failed = true;
        return [UNREADABLE_EVENT];
      }
      if (isRecord(json) && isRecord(json.error)) {
        // Google's error envelope as a chunk: the provider ended the stream with an error. Its
        // text is not forwarded; its status decides the wording only.
        failed = true;
        const overloaded = json.error.status === "UNAVAILABLE" || json.error.status === "RESOURCE_EXHAUSTED";
        return [{ type: "error", code: "upstream_error", message: overloaded ? "The provider is overloaded and ended the stream." : "The provider reported an error mid-stream." }];
      }
      const parsed = generateContentResponseSchema.safeParse(json);
      if (!parsed.success) {
        failed = true;
        return [UNREADABLE_EVENT];
      }
      const chunk = parsed.data;
      const out: NeutralEvent[] = [];
      if (!started) {
        started = true;
        out.push({ type: "start" });
      }
      const candidate = chunk.candidates?.[0];
      for (const p of candidate?.content?.parts ?? []) {
        if (p.functionCall !== undefined) {
          const call = toolCallOf(p);
          const index = calls++;
          out.push({ type: "tool_call_start", index, id: call.id, name: call.name }, { type: "tool_call_args", index, delta: call.arguments });
        } else if (p.text !== undefined && p.text !== "") {
          out.push(p.thought === true ? { type: "reasoning", text: p.text } : { type: "text", text: p.text });
        }
      }
      if (candidate?.finishReason !== undefined) finishReason = candidate.finishReason;
      else if (candidate === undefined && chunk.promptFeedback?.blockReason !== undefined) finishReason = "BLOCKED";
      const u = usageFromMetadata(chunk.usageMetadata);
      if (u !== undefined) usage = u;
      return out;
    },
    finish(): readonly NeutralEvent[] {
      if (failed) return [];
      failed = true;
      if (finishReason === undefined) return [CUT_EVENT];
      const out: NeutralEvent[] = started ? [] : [{ type: "start" }];
      const reason: StopReason = finishReason === "BLOCKED" ? "content_filter" : stopFromFinish(finishReason, calls > 0);
      out.push({ type: "stop", reason });
      if (usage !== undefined) out.push({ type: "usage", usage });
      return out;
    },
  };
}
