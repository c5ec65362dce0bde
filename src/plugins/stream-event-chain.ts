import { GatewayError } from "../errors/gateway-error.ts";
import type { NeutralEvent, NeutralResponse, ToolCall } from "../protocol/neutral.ts";
import type { StreamEventFilter, StreamEventPlugin } from "./plugin.ts";

interface Stage {
  readonly name: string;
  readonly bound: number;
  readonly filter: StreamEventFilter;
  /** What the filter holds now, in events. */
  held: number;
}

/**
 * One answer's `stream_event_safe` plugins, in order: each decoded neutral event passes through
 * every filter before the client's encoder sees it. The chain enforces each plugin's declared
 * hold-back bound: a filter that holds more ends the stream as the gateway's fault (the client
 * gets an error event, never a silent truncation). An error event is never held: whatever the
 * filters still hold is released first, then the error passes, and the chain is over.
 *
 * A buffered answer goes through a fresh chain of the same plugins ({@link filterResponse}), so a
 * filter is written once for both.
 */
export class StreamEventChain {
  readonly #plugins: readonly StreamEventPlugin[];
  readonly #stages: readonly Stage[];
  #over = false;

  constructor(plugins: readonly StreamEventPlugin[]) {
    this.#plugins = plugins;
    this.#stages = plugins.map((p) => ({ name: p.name, bound: p.maxHoldBack, filter: p.open(), held: 0 }));
  }

  /** What the client's encoder gets for one decoded event, now. @throws GatewayError internal_error past a hold-back bound. */
  push(ev: NeutralEvent): readonly NeutralEvent[] {
    if (this.#over) return [ev];
    if (ev.type === "error") return [...this.end(), ev];
    let events: readonly NeutralEvent[] = [ev];
    for (const stage of this.#stages) {
      const out: NeutralEvent[] = [];
      for (const e of events) {
        const passed = stage.filter.event(e);
        // A filter that merges what it holds says how much that is; otherwise count events in and
        // out (a filter may release more than it took in, what it held: the count stops at zero).
        stage.held = stage.filter.held ? stage.filter.held() : Math.max(0, stage.held + 1 - passed.length);
        if (stage.held > stage.bound) throw new GatewayError("internal_error", "The gateway failed while streaming the response.", { cause: `plugin ${stage.name} held back more than its ${stage.bound} events` });
        out.push(...passed);
      }
      events = out;
      if (events.length === 0) break;
    }
    return events;
  }

  /** Releases what every filter still holds, in order (the stream ends); later events pass untouched. */
  end(): readonly NeutralEvent[] {
    if (this.#over) return [];
    this.#over = true;
    let events: NeutralEvent[] = [];
    for (const stage of this.#stages) {
      const out: NeutralEvent[] = [];
      for (const e of events) out.push(...stage.filter.event(e));
      out.push(...stage.filter.end());
      stage.held = 0;
      events = out;
    }
    return events;
  }

  /**
   * A buffered answer through the same plugins: its reasoning, text and tool calls as one run of
   * events into a fresh chain, and the answer put back together from what comes out.
   * @throws GatewayError internal_error past a hold-back bound, as a stream would.
   */
  filterResponse(response: NeutralResponse): NeutralResponse {
    const chain = new StreamEventChain(this.#plugins);
    const events: NeutralEvent[] = [{ type: "start" }];
    for (const r of response.reasoning ?? []) events.push({ type: "reasoning", text: r.text });
    if (response.text !== "") events.push({ type: "text", text: response.text });
    response.toolCalls.forEach((c, index) => events.push({ type: "tool_call_start", index, id: c.id, name: c.name }, { type: "tool_call_args", index, delta: c.arguments }));
    events.push({ type: "stop", reason: response.stopReason, stopSequence: response.stopSequence });
    // As a stream ends: a filter that records the answer (the cache) sees its usage alike.
    if (response.usage !== undefined) events.push({ type: "usage", usage: response.usage });
    const out: NeutralEvent[] = [];
    for (const e of events) out.push(...chain.push(e));
    out.push(...chain.end());
    let text = "";
    let reasoning = "";
    const calls: { id: string; name: string; arguments: string }[] = [];
    for (const e of out) {
      if (e.type === "text") text += e.text;
      else if (e.type === "reasoning") reasoning += e.text;
      else if (e.type === "tool_call_start") calls[e.index] = { id: e.id, name: e.name, arguments: "" };
      else if (e.type === "tool_call_args" && calls[e.index]) calls[e.index]!.arguments += e.delta;
    }
    // Reasoning blocks keep their signatures only when no filter changed their text.
    const reasoningOut = response.reasoning === undefined ? undefined : reasoning === response.reasoning.map((r) => r.text).join("") ? response.reasoning : [{ text: reasoning }];
    const toolCalls: ToolCall[] = calls.filter((c) => c !== undefined);
    return { ...response, text, reasoning: reasoningOut, toolCalls };
  }
}
