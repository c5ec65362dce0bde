import { GatewayError } from "../../errors/gateway-error.ts";
import { redactedSignature } from "../anthropic-messages/thinking.ts";
import type { StreamDecoder } from "../codec.ts";
import { isRecord } from "../fast-guard.ts";
import type { NeutralEvent, StopReason, Usage } from "../neutral.ts";
import { EventStreamDecoder, stringHeader, type EventStreamMessage } from "./event-stream.ts";
import { converseUsageSchema, stopFromConverse, usageFromConverse } from "./response.ts";
import { CUT_EVENT, UNREADABLE_EVENT } from "../stream-errors.ts";

/*
 * A ConverseStream answer is an AWS event stream (see event-stream.ts) whose events carry JSON:
 * `messageStart`, `contentBlockStart` (a tool call's id and name), `contentBlockDelta` (text, a
 * tool call's input as JSON text, or reasoning text, signature or redacted content),
 * `contentBlockStop`, `messageStop` (the stop reason) and `metadata` (usage). The provider's
 * errors arrive in the stream as `exception` messages (throttlingException,
 * modelStreamErrorException, internalServerException, serviceUnavailableException,
 * validationException), named by the `:exception-type` header.
 */

const utf8 = new TextDecoder();

/** The provider's own mid-stream error: its type decides the wording only, its text is not forwarded. */
function providerError(type: string | undefined): NeutralEvent {
  switch (type) {
    case "throttlingException":
      return { type: "error", code: "upstream_error", message: "The provider throttled the request and ended the stream." };
    case "serviceUnavailableException":
      return { type: "error", code: "upstream_error", message: "The provider is unavailable and ended the stream." };
    default:
      return { type: "error", code: "upstream_error", message: "The provider reported an error mid-stream." };
  }
}

const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isInteger(v) && v >= 0 ? v : undefined);

/**
 * Decodes a ConverseStream body. Complete only once `messageStop` arrived; the stop is sent with
 * the usage of the `metadata` event that follows it (or alone at the end when none came). An
 * exception message, a malformed frame or event, or an end inside a frame or before `messageStop`
 * ends the stream with an error event, never as success.
 */
export function createConverseStreamDecoder(): StreamDecoder {
  const frames = new EventStreamDecoder();
  let started = false;
  let ended = false;
  let stop: StopReason | undefined;
  let usage: Usage | undefined;
  /** Content blocks that are tool calls, by their index in the message: the call's neutral index. */
  const tools = new Map<number, number>();

  const fail = (out: NeutralEvent[], ev: NeutralEvent): NeutralEvent[] => {
    ended = true;
    out.push(ev);
    return out;
  };
  const start = (out: NeutralEvent[]) => {
    if (!started) {
      started = true;
      out.push({ type: "start" });
    }
  };
  const close = (out: NeutralEvent[]) => {
    ended = true;
    out.push({ type: "stop", reason: stop! });
    if (usage) out.push({ type: "usage", usage });
  };

  /** One event; false when it is unreadable. */
  const onEvent = (type: string | undefined, e: Record<string, unknown>, out: NeutralEvent[]): boolean => {
    switch (type) {
      case "messageStart":
        start(out);
        return true;
      case "contentBlockStart": {
        const index = num(e.contentBlockIndex);
        const tool = isRecord(e.start) && isRecord(e.start.toolUse) ? e.start.toolUse : undefined;
        if (index === undefined || tools.has(index)) return false;
        if (tool === undefined) return true;
        if (typeof tool.toolUseId !== "string" || typeof tool.name !== "string" || tool.name === "") return false;
        start(out);
        tools.set(index, tools.size);
        out.push({ type: "tool_call_start", index: tools.size - 1, id: tool.toolUseId, name: tool.name });
        return true;
      }
      case "contentBlockDelta": {
        const index = num(e.contentBlockIndex);
        const d = e.delta;
        if (index === undefined || !isRecord(d)) return false;
        start(out);
        if (typeof d.text === "string") {
          if (d.text !== "") out.push({ type: "text", text: d.text });
        } else if (isRecord(d.toolUse)) {
          const tool = tools.get(index);
          if (tool === undefined || typeof d.toolUse.input !== "string") return false;
          if (d.toolUse.input !== "") out.push({ type: "tool_call_args", index: tool, delta: d.toolUse.input });
        } else if (isRecord(d.reasoningContent)) {
          const r = d.reasoningContent;
          if (typeof r.text === "string") out.push({ type: "reasoning", text: r.text });
          else if (typeof r.signature === "string") out.push({ type: "reasoning_signature", signature: r.signature });
          else if (typeof r.redactedContent === "string") out.push({ type: "reasoning_signature", signature: redactedSignature(r.redactedContent) });
          else return false;
        }
        // Other deltas (citations, tool result pieces of server-side tools) carry nothing the neutral model has.
        return true;
      }
      case "contentBlockStop":
        return num(e.contentBlockIndex) !== undefined;
      case "messageStop":
        if (typeof e.stopReason !== "string" || stop !== undefined) return false;
        start(out);
        stop = stopFromConverse(e.stopReason);
        if (usage) close(out);
        return true;
      case "metadata": {
        const u = converseUsageSchema.safeParse(e.usage);
        if (!u.success) return false;
        usage = usageFromConverse(u.data);
        if (stop !== undefined) close(out);
        return true;
      }
      default:
        // Event types added later carry nothing this decoder knows how to pass on.
        return true;
    }
  };

  const onMessage = (m: EventStreamMessage, out: NeutralEvent[]): void => {
    const kind = stringHeader(m, ":message-type");
    if (kind === "exception") return void fail(out, providerError(stringHeader(m, ":exception-type")));
    if (kind === "error") return void fail(out, providerError(stringHeader(m, ":error-code")));
    if (kind !== "event") return void fail(out, UNREADABLE_EVENT);
    let json: unknown = {};
    if (m.payload.length > 0) {
      try {
        json = JSON.parse(utf8.decode(m.payload));
      } catch {
        return void fail(out, UNREADABLE_EVENT);
      }
    }
    if (!isRecord(json) || !onEvent(stringHeader(m, ":event-type"), json, out)) fail(out, UNREADABLE_EVENT);
  };

  return {
    // ConverseStream is never SSE: its bytes come through `bytes`.
    decode: () => (ended ? [] : fail([], UNREADABLE_EVENT)),
    bytes(chunk: Uint8Array): readonly NeutralEvent[] {
      if (ended) return [];
      const out: NeutralEvent[] = [];
      let messages: EventStreamMessage[];
      try {
        messages = frames.push(chunk);
      } catch (err) {
        if (err instanceof GatewayError) return fail(out, { type: "error", code: "upstream_protocol_error", message: err.message });
        throw err;
      }
      for (const m of messages) {
        if (ended) break;
        onMessage(m, out);
      }
      return out;
    },
    finish(): readonly NeutralEvent[] {
      if (ended) return [];
      const out: NeutralEvent[] = [];
      if (frames.pending > 0 || stop === undefined) return fail(out, CUT_EVENT);
      close(out);
      return out;
    },
  };
}
