import { errorTypes } from "../../errors/envelopes.ts";
import type { ResponseStamp, SseEvent, StreamDecoder, StreamEncoder } from "../codec.ts";
import type { NeutralEvent, NeutralRequest, StopReason, Usage } from "../neutral.ts";
import { anthropicFromStop, messageId, stopFromAnthropic, thinkingBlock, usageToWire } from "./response.ts";
import { anthropicStreamReaders, type AnthropicStreamReaders, type StreamUsage } from "./stream-events.ts";
import { redactedData, redactedSignature } from "./thinking.ts";
import { DeltaShapes, literalChars, templateOf } from "../delta-template.ts";
import { CUT_EVENT, UNREADABLE_EVENT } from "../stream-errors.ts";

type Block = { kind: "text" | "thinking" | "other" } | { kind: "tool"; tool: number; sentArgs: boolean; startInput: unknown };


/** The neutral usage once both the input side and the output side are known; never a guessed figure. */
function combineUsage(start: StreamUsage | undefined, end: StreamUsage | undefined): Usage | undefined {
  const input = end?.input_tokens ?? start?.input_tokens;
  const output = end?.output_tokens;
  if (input === null || input === undefined || output === null || output === undefined) return undefined;
  const read = end?.cache_read_input_tokens ?? start?.cache_read_input_tokens ?? undefined;
  const write = end?.cache_creation_input_tokens ?? start?.cache_creation_input_tokens ?? undefined;
  return {
    inputTokens: input + (read ?? 0) + (write ?? 0),
    outputTokens: output,
    cachedInputTokens: read,
    cacheWriteInputTokens: write,
    reasoningTokens: end?.output_tokens_details?.thinking_tokens ?? undefined,
    source: "provider",
  };
}

/**
 * Decodes an Anthropic Messages SSE stream. The event's own `type` field decides (it always
 * matches the `event:` line). A stream is complete only when `message_stop` arrived; anything else
 * at end of input is a cut, reported as an error event, never as success. Unknown event types are
 * skipped, as Anthropic asks clients to do.
 */
export function createAnthropicStreamDecoder(): StreamDecoder {
  return anthropicStreamDecoder(anthropicStreamReaders);
}

/** The decoder over given readers; tests hand it zod alone to prove the guards change nothing. */
export function anthropicStreamDecoder(read: AnthropicStreamReaders): StreamDecoder {
  const st = new AnthropicDecodeState(read);
  return {
    decode: (sse) => decodeAnthropicEvent(st, sse),
    finish: () => finishAnthropicStream(st),
  };
}

/**
 * What the decoder carries from one event to the next, one per stream. A class, so every stream's
 * state has one shape and the per-event functions below stay monomorphic.
 */
class AnthropicDecodeState {
  started = false;
  stopped = false;
  done = false;
  failed = false;
  startUsage: StreamUsage | undefined = undefined;
  pendingUsage: Usage | undefined = undefined;
  usageSent = false;
  /** Tool calls so far: the next call's neutral index. */
  tools = 0;
  /**
   * The shapes of the last text and thinking deltas parsed: later deltas of the same shape (same
   * block, same fields) are read without parsing them (see DeltaTemplate). A block's kind never
   * changes once it opened, so a shape learnt from a delta that decoded stays good while the
   * stream lasts.
   */
  readonly shapes = new DeltaShapes();
  readonly blocks = new Map<number, Block>();
  readonly read: AnthropicStreamReaders;

  constructor(read: AnthropicStreamReaders) {
    this.read = read;
  }
}

/** Ends the stream as failed: nothing after a failure is decoded, and only `ev` is reported. */
function fail(st: AnthropicDecodeState, ev: NeutralEvent): NeutralEvent[] {
  st.failed = true;
  return [ev];
}

/** One provider event: parsed once, then handed to the handler of its `type`. */
function decodeAnthropicEvent(st: AnthropicDecodeState, sse: SseEvent): readonly NeutralEvent[] {
  if (st.done || st.failed) return [];
  let json: unknown;
  try {
    // Inside the try: an event that is not one is unreadable whichever way it is read.
    const known = ofLearntShape(st, sse.data);
    if (known !== undefined) return known;
    json = JSON.parse(sse.data);
  } catch {
    return fail(st, UNREADABLE_EVENT);
  }
  const type = typeof json === "object" && json !== null ? (json as { type?: unknown }).type : undefined;
  if (typeof type !== "string") return fail(st, UNREADABLE_EVENT);
  if (type === "error") return fail(st, providerError(st.read, json));
  const out: NeutralEvent[] = [];
  if (!st.started) {
    st.started = true;
    out.push({ type: "start" });
  }
  switch (type) {
    case "message_start":
      if (!onMessageStart(st, json)) return fail(st, UNREADABLE_EVENT);
      break;
    case "content_block_start":
      if (!onBlockStart(st, json, out)) return fail(st, UNREADABLE_EVENT);
      break;
    case "content_block_delta":
      if (!onBlockDelta(st, json, out)) return fail(st, UNREADABLE_EVENT);
      learnShape(st, sse.data, json);
      break;
    case "content_block_stop":
      if (!onBlockStop(st, json, out)) return fail(st, UNREADABLE_EVENT);
      break;
    case "message_delta":
      if (!onMessageDelta(st, json, out)) return fail(st, UNREADABLE_EVENT);
      break;
    case "message_stop":
      onMessageStop(st, out);
      break;
    case "ping":
      out.push({ type: "heartbeat" });
      break;
    default:
      break;
  }
  return out;
}

/** A text or thinking delta of a learnt shape, decoded from its string alone; undefined for any other event. */
function ofLearntShape(st: AnthropicDecodeState, data: string): readonly NeutralEvent[] | undefined {
  const shapes = st.shapes;
  const close = shapes.match(data);
  if (close < 0) return undefined;
  if (literalChars() === 0) return [];
  return [{ type: shapes.kind, text: shapes.matchedString(data, close) }];
}

/** After a delta decoded: a text or thinking delta to an open block teaches the shape of those that follow. */
function learnShape(st: AnthropicDecodeState, data: string, json: unknown): void {
  const delta = (json as { delta?: { type?: unknown; text?: unknown; thinking?: unknown } }).delta;
  const block = st.blocks.get((json as { index: number }).index);
  if (block === undefined || block.kind === "other") return;
  if (delta?.type === "text_delta" && typeof delta.text === "string") st.shapes.text = templateOf(data, '"text":', delta.text) ?? st.shapes.text;
  else if (delta?.type === "thinking_delta" && typeof delta.thinking === "string") st.shapes.reasoning = templateOf(data, '"thinking":', delta.thinking) ?? st.shapes.reasoning;
}

/** The provider's own mid-stream error; its text is not forwarded, its type decides the wording only. */
function providerError(read: AnthropicStreamReaders, json: unknown): NeutralEvent {
  const e = read.events.error(json);
  const overloaded = e?.error?.type === "overloaded_error";
  return {
    type: "error",
    code: "upstream_error",
    message: overloaded ? "The provider is overloaded and ended the stream." : "The provider reported an error mid-stream.",
  };
}

/** Keeps the input side of usage that message_start carries, for the usage sent once the output side is known. False when unreadable. */
function onMessageStart(st: AnthropicDecodeState, json: unknown): boolean {
  const e = st.read.events.message_start(json);
  if (!e) return false;
  st.startUsage = e.message.usage ?? undefined;
  return true;
}

/** Opens a content block at its index (each index once). False when unreadable or reopened. */
function onBlockStart(st: AnthropicDecodeState, json: unknown, out: NeutralEvent[]): boolean {
  const e = st.read.events.content_block_start(json);
  if (!e || st.blocks.has(e.index)) return false;
  return startBlock(st, e.index, e.content_block, out);
}

/** A delta to an open block. False when unreadable, for a block never opened, or the wrong kind for it. */
function onBlockDelta(st: AnthropicDecodeState, json: unknown, out: NeutralEvent[]): boolean {
  const read = st.read;
  const e = read.events.content_block_delta(json);
  const block = e ? st.blocks.get(e.index) : undefined;
  if (!e || !block) return false;
  // Deltas of skipped blocks are skipped with them.
  return block.kind === "other" || blockDelta(read, block, e.delta, out);
}

/** Closes a block; a tool call that streamed no arguments gets its start block's input. False for a block never opened. */
function onBlockStop(st: AnthropicDecodeState, json: unknown, out: NeutralEvent[]): boolean {
  const e = st.read.events.content_block_stop(json);
  const block = e ? st.blocks.get(e.index) : undefined;
  if (!block) return false;
  // A tool called without arguments streams no JSON at all; its arguments are the start
  // block's input (`{}`), so every client sees parseable arguments.
  if (block.kind === "tool" && !block.sentArgs) {
    block.sentArgs = true;
    out.push({ type: "tool_call_args", index: block.tool, delta: JSON.stringify(block.startInput ?? {}) });
  }
  return true;
}

/** The stop reason (once) and the usage, sent once both sides of it are known. False when unreadable. */
function onMessageDelta(st: AnthropicDecodeState, json: unknown, out: NeutralEvent[]): boolean {
  const e = st.read.events.message_delta(json);
  if (!e) return false;
  if (!st.stopped && e.delta.stop_reason) {
    st.stopped = true;
    const reason: StopReason = stopFromAnthropic(e.delta.stop_reason);
    const seq = e.delta.stop_sequence ?? undefined;
    out.push(seq === undefined ? { type: "stop", reason } : { type: "stop", reason, stopSequence: seq });
  }
  if (!st.usageSent) st.pendingUsage = combineUsage(st.startUsage, e.usage ?? undefined) ?? st.pendingUsage;
  if (st.stopped && st.pendingUsage && !st.usageSent) {
    st.usageSent = true;
    out.push({ type: "usage", usage: st.pendingUsage });
  }
  return true;
}

/** The stream's proper end: what was not said yet (a stop, the usage) is said now. */
function onMessageStop(st: AnthropicDecodeState, out: NeutralEvent[]): void {
  st.done = true;
  // A provider that ends properly but never said why still delivered a complete answer.
  if (!st.stopped) out.push({ type: "stop", reason: "other" });
  if (st.pendingUsage && !st.usageSent) {
    st.usageSent = true;
    out.push({ type: "usage", usage: st.pendingUsage });
  }
}

/** Records a new block by its type and sends what its start already carries. False when unreadable. */
function startBlock(st: AnthropicDecodeState, i: number, raw: { type: string }, out: NeutralEvent[]): boolean {
  const read = st.read;
  switch (raw.type) {
    case "text": {
      const b = read.blocks.text(raw);
      if (!b) return false;
      st.blocks.set(i, { kind: "text" });
      if (b.text) out.push({ type: "text", text: b.text });
      return true;
    }
    case "thinking": {
      const b = read.blocks.thinking(raw);
      if (!b) return false;
      st.blocks.set(i, { kind: "thinking" });
      if (b.thinking) out.push({ type: "reasoning", text: b.thinking });
      if (b.signature) out.push({ type: "reasoning_signature", signature: b.signature });
      return true;
    }
    case "redacted_thinking": {
      const b = read.blocks.redacted_thinking(raw);
      if (!b) return false;
      st.blocks.set(i, { kind: "other" });
      out.push({ type: "reasoning_signature", signature: redactedSignature(b.data) });
      return true;
    }
    case "tool_use": {
      const b = read.blocks.tool_use(raw);
      if (!b) return false;
      const tool = st.tools++;
      st.blocks.set(i, { kind: "tool", tool, sentArgs: false, startInput: b.input });
      out.push({ type: "tool_call_start", index: tool, id: b.id, name: b.name });
      return true;
    }
    default:
      // Block types Sluice never asks for (server tools' blocks): skipped with their deltas.
      st.blocks.set(i, { kind: "other" });
      return true;
  }
}

/** Turns one delta of a block Sluice forwards into neutral events. False when unreadable or not the block's kind. */
function blockDelta(read: AnthropicStreamReaders, block: Block, raw: { type: string }, out: NeutralEvent[]): boolean {
  switch (raw.type) {
    case "text_delta": {
      const d = read.deltas.text_delta(raw);
      if (!d) return false;
      if (d.text !== "") out.push({ type: "text", text: d.text });
      return true;
    }
    case "input_json_delta": {
      const d = read.deltas.input_json_delta(raw);
      if (!d || block.kind !== "tool") return false;
      if (d.partial_json !== "") {
        block.sentArgs = true;
        out.push({ type: "tool_call_args", index: block.tool, delta: d.partial_json });
      }
      return true;
    }
    case "thinking_delta": {
      const d = read.deltas.thinking_delta(raw);
      if (!d) return false;
      if (d.thinking !== "") out.push({ type: "reasoning", text: d.thinking });
      return true;
    }
    case "signature_delta": {
      const d = read.deltas.signature_delta(raw);
      if (!d) return false;
      if (d.signature !== "") out.push({ type: "reasoning_signature", signature: d.signature });
      return true;
    }
    default:
      // citations_delta and future delta types carry nothing Sluice forwards.
      return true;
  }
}

/** End of input: anything but a proper `message_stop` (or an error already reported) is a cut. */
function finishAnthropicStream(st: AnthropicDecodeState): readonly NeutralEvent[] {
  if (st.done || st.failed) return [];
  st.failed = true;
  return [CUT_EVENT];
}

/** One SSE event as Anthropic writes it: the event name, then its JSON (whose `type` is the same name). */
const sse = (type: string, body: Record<string, unknown>): string => `event: ${type}\ndata: ${JSON.stringify({ type, ...body })}\n\n`;

type Open = { kind: "text"; index: number } | { kind: "thinking"; index: number; signed: boolean } | { kind: "tool"; index: number; tool: number };

/**
 * Encodes neutral events as an Anthropic Messages stream: message_start, content blocks with
 * consecutive indexes (each one started, filled, stopped before the next starts), message_delta,
 * message_stop.
 *
 * Usage: Anthropic puts input usage in message_start, but an OpenAI-protocol provider reports it
 * only at the end, so message_start carries placeholder zeros for input_tokens and output_tokens
 * (cache figures null) and the real, cumulative figures go in message_delta's usage, which the
 * Anthropic SDKs copy over the placeholders. message_delta is written once the stop reason is known
 * and, if the provider sends usage after its stop (OpenAI does), once usage has arrived too, or at
 * end() without it; unknown usage is written as `output_tokens: null`, never as 0.
 *
 * message_stop is written only after a clean stop with no error, so a cut upstream never looks
 * like a finished answer.
 */
export function createAnthropicStreamEncoder(stamp: ResponseStamp, _request: NeutralRequest): StreamEncoder {
  let started = false;
  let open: Open | undefined;
  let next = 0;
  const toolBlocks = new Map<number, number>();
  let stop: { reason: string; sequence: string | null } | undefined;
  let usage: Usage | undefined;
  let deltaSent = false;
  let failed = false;

  const start = (): string => {
    if (started) return "";
    started = true;
    return sse("message_start", {
      message: {
        id: messageId(stamp),
        type: "message",
        role: "assistant",
        model: stamp.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: null, cache_read_input_tokens: null },
      },
    });
  };

  const close = (): string => {
    if (!open) return "";
    const text = sse("content_block_stop", { index: open.index });
    open = undefined;
    return text;
  };

  const openBlock = (block: Record<string, unknown>): { text: string; index: number } => {
    const index = next++;
    return { text: close() + sse("content_block_start", { index, content_block: block }), index };
  };

  const messageDelta = (): string => {
    if (!stop || deltaSent) return "";
    deltaSent = true;
    return sse("message_delta", {
      delta: { stop_reason: stop.reason, stop_sequence: stop.sequence },
      usage: usage ? usageToWire(usage) : { output_tokens: null },
    });
  };

  const encode = (ev: NeutralEvent): string => {
    switch (ev.type) {
      case "start":
        return "";
      case "text": {
        if (ev.text === "") return "";
        let head = "";
        if (open?.kind !== "text") {
          const b = openBlock({ type: "text", text: "" });
          open = { kind: "text", index: b.index };
          head = b.text;
        }
        return head + sse("content_block_delta", { index: open.index, delta: { type: "text_delta", text: ev.text } });
      }
      case "reasoning": {
        if (ev.text === "") return "";
        let head = "";
        // A signature closes a thinking block: more reasoning after it is a new block.
        if (open?.kind !== "thinking" || open.signed) {
          const b = openBlock({ type: "thinking", thinking: "", signature: "" });
          open = { kind: "thinking", index: b.index, signed: false };
          head = b.text;
        }
        return head + sse("content_block_delta", { index: open.index, delta: { type: "thinking_delta", thinking: ev.text } });
      }
      case "reasoning_signature": {
        const data = redactedData(ev.signature);
        if (data !== undefined) {
          const b = openBlock(thinkingBlock("", ev.signature));
          return b.text + sse("content_block_stop", { index: b.index });
        }
        let head = "";
        if (open?.kind !== "thinking" || open.signed) {
          const b = openBlock({ type: "thinking", thinking: "", signature: "" });
          open = { kind: "thinking", index: b.index, signed: false };
          head = b.text;
        }
        open.signed = true;
        return head + sse("content_block_delta", { index: open.index, delta: { type: "signature_delta", signature: ev.signature } });
      }
      case "tool_call_start": {
        if (toolBlocks.has(ev.index)) return "";
        const b = openBlock({ type: "tool_use", id: ev.id, name: ev.name, input: {} });
        open = { kind: "tool", index: b.index, tool: ev.index };
        toolBlocks.set(ev.index, b.index);
        return b.text;
      }
      case "tool_call_args": {
        if (ev.delta === "") return "";
        // Arguments for a call whose block is already closed (a provider interleaving parallel
        // calls) keep that block's index; arguments for a call never started have no block and
        // are dropped.
        const index = open?.kind === "tool" && open.tool === ev.index ? open.index : toolBlocks.get(ev.index);
        if (index === undefined) return "";
        return sse("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: ev.delta } });
      }
      case "stop": {
        if (stop) return "";
        stop = { reason: anthropicFromStop(ev.reason, toolBlocks.size > 0), sequence: ev.stopSequence ?? null };
        // A provider that sends usage after its stop (OpenAI) gets message_delta when usage arrives.
        return close() + (usage ? messageDelta() : "");
      }
      case "usage":
        usage = ev.usage;
        return messageDelta();
      case "heartbeat":
        return sse("ping", {});
      case "error":
        failed = true;
        return sse("error", { error: { type: errorTypes(ev.code).anthropic, message: ev.message } });
    }
  };

  return {
    encode(ev: NeutralEvent): string {
      if (failed) return "";
      // Every event follows message_start, even if the provider's first event was not `start`.
      if (ev.type === "error" || ev.type === "heartbeat") return encode(ev);
      return start() + encode(ev);
    },
    end(): string {
      if (failed || !stop) return "";
      return messageDelta() + sse("message_stop", {});
    },
  };
}
