import { z } from "zod";
import type { SseEvent, StreamDecoder } from "../codec.ts";
import { isRecord } from "../fast-guard.ts";
import type { NeutralEvent, Usage } from "../neutral.ts";
import { usageFromWire, wireUsageSchema } from "../openai-chat/response.ts";
import { createChatStreamDecoder } from "../openai-chat/stream.ts";
import { argumentsText, generatedCallId, nativeStop } from "./response.ts";
import { CUT_EVENT, UNREADABLE_EVENT } from "../stream-errors.ts";

/*
 * A Workers AI stream (`stream: true`) is server-sent events, `data: {"response":"…"}` per piece of
 * text and `data: [DONE]` at the end; the last piece before `[DONE]` carries `usage`. Tool calls
 * arrive in `tool_calls`: OpenAI-style pieces (`index`, then `id` and `function.name`, then
 * `function.arguments` fragments, and a closing piece with nothing set), or the older shape, one
 * whole `{ name, arguments }` per call. Models that answer with OpenAI chat completions stream
 * OpenAI chunks (`choices[].delta`), which the Chat decoder reads.
 */

const piece = z.looseObject({
  index: z.number().int().min(0).optional(),
  id: z.string().nullable().optional(),
  function: z.looseObject({ name: z.string().nullable().optional(), arguments: z.unknown().optional() }).nullable().optional(),
  name: z.string().nullable().optional(),
  arguments: z.unknown().optional(),
});

const chunkSchema = z.looseObject({
  response: z.union([z.string(), z.number()]).nullable().optional(),
  tool_calls: z.array(piece).nullable().optional(),
  usage: wireUsageSchema.nullable().optional(),
  finish_reason: z.string().nullable().optional(),
});


/**
 * Decodes a Workers AI stream. Complete only when `[DONE]` arrived; anything else at the end of
 * input is a cut, reported as an error event, never as success. The stop and the usage are sent
 * at `[DONE]`, after the last content, as every neutral stream ends.
 */
export function createWorkersAiStreamDecoder(): StreamDecoder {
  /** The Chat decoder, once the stream turned out to be OpenAI chunks. */
  let chat: StreamDecoder | undefined;
  let started = false;
  let done = false;
  let failed = false;
  let finishReason: string | undefined;
  let usage: Usage | undefined;
  /** Tool calls by their index in the answer: started once their name is known. */
  const calls = new Map<number, { started: boolean; id: string; name: string; pending: string }>();
  let nextIndex = 0;

  const toolPieces = (pieces: readonly z.infer<typeof piece>[], out: NeutralEvent[]): void => {
    for (const p of pieces) {
      const name = p.function?.name ?? p.name ?? undefined;
      const args = p.function ? p.function.arguments : p.arguments;
      const hasArgs = args !== undefined && args !== null && args !== "";
      // The closing piece of OpenAI-style calls sets nothing.
      if (!p.id && !name && !hasArgs) continue;
      // A piece without an index is a whole call of the older shape: the next one.
      const index = p.index ?? nextIndex;
      let call = calls.get(index);
      if (call === undefined) {
        calls.set(index, (call = { started: false, id: p.id || generatedCallId(), name: "", pending: "" }));
        nextIndex = Math.max(nextIndex, index + 1);
      }
      if (!call.started && name) {
        call.started = true;
        call.name = name;
        out.push({ type: "tool_call_start", index, id: call.id, name });
        if (call.pending !== "") out.push({ type: "tool_call_args", index, delta: call.pending });
        call.pending = "";
      }
      if (!hasArgs) continue;
      const delta = argumentsText(args);
      if (call.started) out.push({ type: "tool_call_args", index, delta });
      else call.pending += delta;
    }
  };

  return {
    decode(sse: SseEvent): readonly NeutralEvent[] {
      if (chat) return chat.decode(sse);
      if (done || failed) return [];
      if (sse.data === "[DONE]") {
        done = true;
        const out: NeutralEvent[] = [{ type: "stop", reason: nativeStop(finishReason, [...calls.values()].some((c) => c.started)) }];
        if (usage) out.push({ type: "usage", usage });
        return out;
      }
      let json: unknown;
      try {
        json = JSON.parse(sse.data);
      } catch {
        failed = true;
        return [UNREADABLE_EVENT];
      }
      if (!started && isRecord(json) && Array.isArray(json.choices)) {
        chat = createChatStreamDecoder();
        return chat.decode(sse);
      }
      const parsed = chunkSchema.safeParse(json);
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
      const text = chunk.response;
      if (text !== undefined && text !== null && text !== "") out.push({ type: "text", text: String(text) });
      if (chunk.tool_calls) toolPieces(chunk.tool_calls, out);
      if (chunk.finish_reason) finishReason = chunk.finish_reason;
      if (chunk.usage) usage = usageFromWire(chunk.usage);
      return out;
    },
    finish(): readonly NeutralEvent[] {
      if (chat) return chat.finish();
      if (done || failed) return [];
      failed = true;
      return [CUT_EVENT];
    },
  };
}
