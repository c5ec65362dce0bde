import type { ResponseStamp, SseEvent, StreamDecoder, StreamEncoder } from "../codec.ts";
import type { NeutralEvent, NeutralRequest, StopReason, Usage } from "../neutral.ts";
import {
  functionCallItem,
  itemId,
  messageItem,
  messageText,
  outcomeOf,
  outputTextPart,
  readOutput,
  reasoningItem,
  reasoningText,
  responseObject,
  stopFromStatus,
  usageFromWire,
} from "./response.ts";
import { responsesStreamReaders, type ResponsesCallItem, type ResponsesLifecycle, type ResponsesStreamReaders } from "./stream-events.ts";
import { CUT_EVENT, UNREADABLE_EVENT } from "../stream-errors.ts";

// ---- Backend side: provider events → neutral events -----------------------------------------


/**
 * Decodes an OpenAI Responses SSE stream. It is complete only when `response.completed` or
 * `response.incomplete` arrived; `response.failed` or an `error` event is the provider's error, and
 * anything else at end of input is a cut, never a success.
 */
export function createResponsesStreamDecoder(): StreamDecoder {
  return responsesStreamDecoder(responsesStreamReaders);
}

/** The decoder over given readers; tests hand it zod alone to prove the guards change nothing. */
export function responsesStreamDecoder(read: ResponsesStreamReaders): StreamDecoder {
  const st = new ResponsesDecodeState(read);
  return {
    decode: (sse) => decodeResponsesEvent(st, sse),
    finish: () => finishResponsesStream(st),
  };
}

/** A function call being streamed: its neutral index and the arguments sent so far. */
interface CallState {
  readonly index: number;
  args: string;
}

/**
 * What the decoder carries from one event to the next, one per stream. A class, so every stream's
 * state has one shape and the per-event functions below stay monomorphic.
 */
class ResponsesDecodeState {
  started = false;
  done = false;
  failed = false;
  itemsSeen = false;
  // Function calls by output index and by item id; neutral indexes count calls from 0.
  readonly calls = new Map<number, CallState>();
  readonly callsById = new Map<string, CallState>();
  /** Text sent so far, by output index. */
  readonly text = new Map<number, string>();
  /** Output indexes whose reasoning was sent. */
  readonly reasoningEmitted = new Set<number>();
  lastReasoningPart: string | undefined = undefined;
  readonly read: ResponsesStreamReaders;

  constructor(read: ResponsesStreamReaders) {
    this.read = read;
  }
}

/** Ends the stream as failed: nothing after a failure is decoded; `out` so far is reported with `ev`. */
function fail(st: ResponsesDecodeState, out: NeutralEvent[], ev: NeutralEvent = UNREADABLE_EVENT): NeutralEvent[] {
  st.failed = true;
  out.push(ev);
  return out;
}

/** One provider event: parsed once, then handed to the handler of its type (its `type`, else the SSE event name). */
function decodeResponsesEvent(st: ResponsesDecodeState, sse: SseEvent): readonly NeutralEvent[] {
  if (st.done || st.failed) return [];
  let json: unknown;
  try {
    json = JSON.parse(sse.data);
  } catch {
    return fail(st, []);
  }
  const head = st.read.typed(json);
  const type = head ? (head.type ?? sse.event) : undefined;
  if (type === undefined) return fail(st, []);
  const out: NeutralEvent[] = [];
  if (!st.started) {
    st.started = true;
    out.push({ type: "start" });
  }
  switch (type) {
    case "response.output_text.delta":
    case "response.refusal.delta":
      return onTextDelta(st, json, out);
    case "response.reasoning_summary_text.delta":
    case "response.reasoning_text.delta":
      return onReasoningDelta(st, json, type, out);
    case "response.function_call_arguments.delta":
      return onArgumentsDelta(st, json, out);
    case "response.output_item.added":
      return onItemAdded(st, json, out);
    case "response.output_item.done":
      return onItemDone(st, json, out);
    case "response.completed":
    case "response.incomplete":
      return onFinished(st, json, type, out);
    case "response.failed":
    case "error":
      return fail(st, out, { type: "error", code: "upstream_error", message: "The provider reported an error mid-stream." });
    case "keepalive":
      return [...out, { type: "heartbeat" }];
    default:
      // Lifecycle (created, in_progress, queued), content_part.*, the *.done events whose text
      // the deltas already carried, annotations: nothing new for the neutral stream.
      return out;
  }
}

/** Output text; a refusal is what the model said instead of an answer, so it is text too, as in the buffered decoding. */
function onTextDelta(st: ResponsesDecodeState, json: unknown, out: NeutralEvent[]): NeutralEvent[] {
  const d = st.read.delta(json);
  if (!d) return fail(st, out);
  st.itemsSeen = true;
  textDelta(st, d.output_index, d.delta, out);
  return out;
}

/** Reasoning text, kept apart by item, event type and part so parts read as paragraphs. */
function onReasoningDelta(st: ResponsesDecodeState, json: unknown, type: string, out: NeutralEvent[]): NeutralEvent[] {
  const d = st.read.delta(json);
  if (!d) return fail(st, out);
  st.itemsSeen = true;
  const part = `${d.output_index}:${type}:${d.summary_index ?? d.content_index ?? 0}`;
  reasoningDelta(st, part, d.output_index, d.delta, out);
  return out;
}

/** A piece of a started call's arguments; arguments for a call never started are a protocol error. */
function onArgumentsDelta(st: ResponsesDecodeState, json: unknown, out: NeutralEvent[]): NeutralEvent[] {
  const d = st.read.delta(json);
  if (!d) return fail(st, out);
  const call = (d.item_id ? st.callsById.get(d.item_id) : undefined) ?? st.calls.get(d.output_index);
  if (!call) return fail(st, out);
  if (d.delta !== "") {
    call.args += d.delta;
    out.push({ type: "tool_call_args", index: call.index, delta: d.delta });
  }
  return out;
}

/** A new output item; only a function call says something (its start) before its content arrives. */
function onItemAdded(st: ResponsesDecodeState, json: unknown, out: NeutralEvent[]): NeutralEvent[] {
  const e = st.read.itemEvent(json);
  if (!e) return fail(st, out);
  st.itemsSeen = true;
  if (e.item.type === "function_call") {
    const c = st.read.callItem(e.item);
    if (!c) return fail(st, out);
    startCall(st, e.output_index, e.item.id, c, out);
  }
  return out;
}

/** A finished output item: whatever of it the deltas did not carry is sent now. */
function onItemDone(st: ResponsesDecodeState, json: unknown, out: NeutralEvent[]): NeutralEvent[] {
  const e = st.read.itemEvent(json);
  if (!e) return fail(st, out);
  st.itemsSeen = true;
  return itemDone(st, e.output_index, e.item, out) ? out : fail(st, out);
}

/** The stream's proper end (`response.completed` / `response.incomplete`): the stop and the usage. */
function onFinished(st: ResponsesDecodeState, json: unknown, type: string, out: NeutralEvent[]): NeutralEvent[] {
  const l = st.read.lifecycle(json);
  if (!l) return fail(st, out);
  const status = type === "response.incomplete" ? "incomplete" : (l.response.status ?? "completed");
  return finishWith(st, l.response, status, out);
}

/** Starts a neutral tool call for a function-call item, with whatever arguments it already carries. */
function startCall(st: ResponsesDecodeState, outputIndex: number, id: string | undefined, call: ResponsesCallItem, out: NeutralEvent[]): void {
  const state: CallState = { index: st.calls.size, args: call.arguments ?? "" };
  st.calls.set(outputIndex, state);
  if (id) st.callsById.set(id, state);
  out.push({ type: "tool_call_start", index: state.index, id: call.call_id, name: call.name });
  if (state.args !== "") out.push({ type: "tool_call_args", index: state.index, delta: state.args });
}

/** Sends text and remembers it by item, so an item's final text adds only what was not sent. */
function textDelta(st: ResponsesDecodeState, outputIndex: number, delta: string, out: NeutralEvent[]): void {
  if (delta === "") return;
  st.text.set(outputIndex, (st.text.get(outputIndex) ?? "") + delta);
  out.push({ type: "text", text: delta });
}

/**
 * Sends reasoning text. Summary parts (and items) are separate paragraphs: a blank line goes
 * between them, as in the buffered decoding.
 */
function reasoningDelta(st: ResponsesDecodeState, part: string, outputIndex: number, delta: string, out: NeutralEvent[]): void {
  if (delta === "") return;
  const sep = st.lastReasoningPart !== undefined && st.lastReasoningPart !== part ? "\n\n" : "";
  st.lastReasoningPart = part;
  st.reasoningEmitted.add(outputIndex);
  out.push({ type: "reasoning", text: sep + delta });
}

/**
 * Servers that put an item's content only in `response.output_item.done` (no deltas) still
 * deliver it: whatever the deltas did not carry is sent then. False when the item is unreadable.
 */
function itemDone(st: ResponsesDecodeState, outputIndex: number, item: { type: string; id?: string | undefined }, out: NeutralEvent[]): boolean {
  const read = st.read;
  switch (item.type) {
    case "function_call": {
      const c = read.callItem(item);
      if (!c) return false;
      const call = (item.id ? st.callsById.get(item.id) : undefined) ?? st.calls.get(outputIndex);
      if (!call) {
        startCall(st, outputIndex, item.id, c, out);
        return true;
      }
      const full = c.arguments ?? "";
      if (full.length > call.args.length && full.startsWith(call.args)) {
        out.push({ type: "tool_call_args", index: call.index, delta: full.slice(call.args.length) });
        call.args = full;
      }
      return true;
    }
    case "message": {
      const m = read.message(item);
      if (!m) return false;
      const full = messageText(m);
      const sent = st.text.get(outputIndex) ?? "";
      if (full.length > sent.length && full.startsWith(sent)) textDelta(st, outputIndex, full.slice(sent.length), out);
      return true;
    }
    case "reasoning": {
      const r = read.reasoning(item);
      if (!r) return false;
      if (!st.reasoningEmitted.has(outputIndex)) reasoningDelta(st, `${outputIndex}`, outputIndex, reasoningText(r), out);
      return true;
    }
    default:
      return true;
  }
}

/** Ends the stream with the final object's stop and usage (and its content, when no item was streamed). */
function finishWith(st: ResponsesDecodeState, response: ResponsesLifecycle["response"], status: string, out: NeutralEvent[]): NeutralEvent[] {
  st.done = true;
  // A server that streamed no items at all still sent the answer in the final object.
  let hasCalls = st.calls.size > 0;
  if (!st.itemsSeen && response.output) {
    const o = readOutput(response.output);
    if (!o) return fail(st, out);
    for (const [i, r] of o.reasoning.entries()) out.push({ type: "reasoning", text: i > 0 ? `\n\n${r}` : r });
    if (o.text !== "") out.push({ type: "text", text: o.text });
    for (const [i, c] of o.toolCalls.entries()) {
      out.push({ type: "tool_call_start", index: i, id: c.id, name: c.name });
      if (c.arguments !== "") out.push({ type: "tool_call_args", index: i, delta: c.arguments });
    }
    hasCalls = o.toolCalls.length > 0;
  }
  out.push({ type: "stop", reason: stopFromStatus(status, response.incomplete_details?.reason, hasCalls) });
  if (response.usage) out.push({ type: "usage", usage: usageFromWire(response.usage) });
  return out;
}

/** End of input: anything but a proper end (or an error already reported) is a cut. */
function finishResponsesStream(st: ResponsesDecodeState): readonly NeutralEvent[] {
  if (st.done || st.failed) return [];
  st.failed = true;
  return [CUT_EVENT];
}

// ---- Client side: neutral events → Responses events -----------------------------------------

interface OpenItem {
  readonly kind: "message" | "reasoning" | "function_call";
  readonly id: string;
  readonly outputIndex: number;
  /** Text so far (message, reasoning) or arguments so far (function call). */
  text: string;
  done: boolean;
  readonly callId?: string;
  readonly name?: string;
}

/**
 * Encodes neutral events as Responses SSE events (`event: <type>` + `data: <json>`), numbered from
 * 0 by `sequence_number`. Text and reasoning each live in one open item at a time; function-call
 * items stay open until the stop, so argument pieces may arrive in any order. The terminal
 * `response.completed` / `response.incomplete` is written by `end()`, once the upstream stream has
 * ended cleanly, so usage that follows the stop is in it and a cut after the stop still ends in
 * `response.failed`. An error writes `response.failed` and then an `error` event (which makes the
 * official SDK throw); never `response.completed`.
 */
export function createResponsesStreamEncoder(stamp: ResponseStamp, request: NeutralRequest): StreamEncoder {
  return new ResponsesStreamEncoder(stamp, request);
}

/** One stream's encoder state and its steps (a class: one object per stream, its steps shared). */
class ResponsesStreamEncoder implements StreamEncoder {
  readonly #stamp: ResponseStamp;
  readonly #request: NeutralRequest;
  #seq = 0;
  #started = false;
  #stop: StopReason | undefined;
  #usage: Usage | undefined;
  #failed = false;
  #finished = false;
  readonly #items: OpenItem[] = [];
  #current: OpenItem | undefined;
  readonly #callsByIndex = new Map<number, OpenItem>();

  constructor(stamp: ResponseStamp, request: NeutralRequest) {
    this.#stamp = stamp;
    this.#request = request;
  }

  encode(ev: NeutralEvent): string {
    if (this.#failed || this.#finished) return "";
    switch (ev.type) {
      case "start":
        return this.#begin();
      case "text":
        return ev.text === "" || this.#stop !== undefined ? "" : this.#append("message", ev.text);
      case "reasoning":
        return ev.text === "" || this.#stop !== undefined ? "" : this.#append("reasoning", ev.text);
      case "reasoning_signature":
        // Another provider's integrity token means nothing to a Responses client (documented).
        return "";
      case "tool_call_start":
        return this.#toolCallStart(ev.index, ev.id, ev.name);
      case "tool_call_args":
        return this.#toolCallArgs(ev.index, ev.delta);
      case "stop":
        return this.#stopWith(ev.reason);
      case "usage":
        this.#usage = ev.usage;
        return "";
      case "heartbeat":
        return ": keep-alive\n\n";
      case "error":
        return this.#fail(ev.code, ev.message);
    }
  }

  end(): string {
    if (this.#failed || this.#finished || this.#stop === undefined) return "";
    this.#finished = true;
    const outcome = outcomeOf(this.#stop);
    const response = responseObject(this.#stamp, this.#request, {
      status: outcome.status,
      incompleteReason: outcome.incompleteReason,
      output: this.#snapshot(),
      usage: this.#usage,
    });
    return this.#event(outcome.status === "completed" ? "response.completed" : "response.incomplete", { response });
  }

  #event(type: string, fields: Record<string, unknown>): string {
    return `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: this.#seq++, ...fields })}\n\n`;
  }

  #itemStatus(): "completed" | "incomplete" {
    return this.#stop === undefined ? "incomplete" : outcomeOf(this.#stop).status;
  }

  /** An item as it stands: in progress until done, then completed (or incomplete after a limit). */
  #wireItem(item: OpenItem, final: boolean): Record<string, unknown> {
    const status = final ? this.#itemStatus() : "in_progress";
    switch (item.kind) {
      case "message":
        return messageItem(item.id, status, final ? item.text : undefined);
      case "reasoning":
        return reasoningItem(item.id, final ? item.text : undefined);
      case "function_call":
        return functionCallItem(item.id, status, { id: item.callId!, name: item.name!, arguments: final ? item.text : "" });
    }
  }

  #snapshot(): Record<string, unknown>[] {
    return this.#items.map((i) => this.#wireItem(i, true));
  }

  #begin(): string {
    if (this.#started) return "";
    this.#started = true;
    const response = responseObject(this.#stamp, this.#request, { status: "in_progress", output: [] });
    return this.#event("response.created", { response }) + this.#event("response.in_progress", { response });
  }

  #close(item: OpenItem): string {
    if (item.done) return "";
    item.done = true;
    const ref = { item_id: item.id, output_index: item.outputIndex };
    let out = "";
    switch (item.kind) {
      case "message":
        out += this.#event("response.output_text.done", { ...ref, content_index: 0, text: item.text, logprobs: [] });
        out += this.#event("response.content_part.done", { ...ref, content_index: 0, part: outputTextPart(item.text) });
        break;
      case "reasoning":
        out += this.#event("response.reasoning_summary_text.done", { ...ref, summary_index: 0, text: item.text });
        out += this.#event("response.reasoning_summary_part.done", { ...ref, summary_index: 0, part: { type: "summary_text", text: item.text } });
        break;
      case "function_call":
        out += this.#event("response.function_call_arguments.done", { ...ref, arguments: item.text });
        break;
    }
    return out + this.#event("response.output_item.done", { output_index: item.outputIndex, item: this.#wireItem(item, true) });
  }

  #closeCurrent(): string {
    const c = this.#current;
    this.#current = undefined;
    return c ? this.#close(c) : "";
  }

  #open(kind: OpenItem["kind"], call?: { callId: string; name: string }): OpenItem {
    const outputIndex = this.#items.length;
    const prefix = kind === "message" ? "msg" : kind === "reasoning" ? "rs" : "fc";
    const item: OpenItem = { kind, id: itemId(prefix, this.#stamp, outputIndex), outputIndex, text: "", done: false, ...call };
    this.#items.push(item);
    return item;
  }

  /** Appends text to the open message or reasoning item, opening one (and closing the other) first. */
  #append(kind: "message" | "reasoning", delta: string): string {
    let out = this.#begin();
    let current = this.#current;
    if (current?.kind !== kind) {
      out += this.#closeCurrent();
      current = this.#open(kind);
      this.#current = current;
      const ref = { item_id: current.id, output_index: current.outputIndex };
      out += this.#event("response.output_item.added", { output_index: current.outputIndex, item: this.#wireItem(current, false) });
      out +=
        kind === "message"
          ? this.#event("response.content_part.added", { ...ref, content_index: 0, part: outputTextPart("") })
          : this.#event("response.reasoning_summary_part.added", { ...ref, summary_index: 0, part: { type: "summary_text", text: "" } });
    }
    current.text += delta;
    const ref = { item_id: current.id, output_index: current.outputIndex };
    return (
      out +
      (kind === "message"
        ? this.#event("response.output_text.delta", { ...ref, content_index: 0, delta, logprobs: [] })
        : this.#event("response.reasoning_summary_text.delta", { ...ref, summary_index: 0, delta }))
    );
  }

  /** A function call opens its own item, which stays open until the stop (its arguments may arrive in any order). */
  #toolCallStart(index: number, callId: string, name: string): string {
    if (this.#stop !== undefined || this.#callsByIndex.has(index)) return "";
    let out = this.#begin() + this.#closeCurrent();
    const item = this.#open("function_call", { callId, name });
    this.#callsByIndex.set(index, item);
    out += this.#event("response.output_item.added", { output_index: item.outputIndex, item: this.#wireItem(item, false) });
    return out;
  }

  #toolCallArgs(index: number, delta: string): string {
    const item = this.#callsByIndex.get(index);
    if (!item || item.done || delta === "") return "";
    item.text += delta;
    return this.#event("response.function_call_arguments.delta", { item_id: item.id, output_index: item.outputIndex, delta });
  }

  /** Every item is finished, in output order; the terminal event waits for end(). */
  #stopWith(reason: StopReason): string {
    if (this.#stop !== undefined) return "";
    this.#stop = reason;
    this.#current = undefined;
    return this.#begin() + this.#items.map((i) => this.#close(i)).join("");
  }

  #fail(code: string, message: string): string {
    this.#failed = true;
    const response = responseObject(this.#stamp, this.#request, { status: "failed", output: this.#snapshot(), usage: this.#usage, errorMessage: message });
    return this.#begin() + this.#event("response.failed", { response }) + this.#event("error", { code, message, param: null });
  }
}
