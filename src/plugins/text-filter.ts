import type { NeutralEvent } from "../protocol/neutral.ts";
import type { StreamEventFilter } from "./plugin.ts";

/** Which stream of text an event belongs to: the answer, the reasoning, or one tool call's arguments (JSON text). */
export type TextChannel = { readonly kind: "text" } | { readonly kind: "reasoning" } | { readonly kind: "args"; readonly index: number };

/**
 * A rewrite of text that may need to see past the end of an event: given what it held and what
 * arrived, it answers what to release now (rewritten) and what to keep for the next event. With
 * `final` it releases everything.
 */
export interface TextRewrite {
  step(text: string, channel: TextChannel, final: boolean): { readonly out: string; readonly keep: string };
}

function channelOf(ev: NeutralEvent): TextChannel | undefined {
  switch (ev.type) {
    case "text":
      return TEXT;
    case "reasoning":
      return REASONING;
    case "tool_call_args":
      return { kind: "args", index: ev.index };
    default:
      return undefined;
  }
}

const TEXT: TextChannel = { kind: "text" };
const REASONING: TextChannel = { kind: "reasoning" };

function eventOf(channel: TextChannel, text: string): NeutralEvent {
  switch (channel.kind) {
    case "text":
      return { type: "text", text };
    case "reasoning":
      return { type: "reasoning", text };
    case "args":
      return { type: "tool_call_args", index: channel.index, delta: text };
  }
}

const same = (a: TextChannel, b: TextChannel) => a.kind === b.kind && (a.kind !== "args" || (b.kind === "args" && a.index === b.index));

/**
 * A `stream_event_safe` filter over the answer's text: each text, reasoning and tool-argument
 * event goes through the rewrite, which may keep a tail back (a placeholder or a value cut in two
 * by the provider's chunking is released whole, never half). Text is held for one channel at a
 * time: an event of another channel, or any other event but a heartbeat, releases it first, so
 * the answer's order is kept. What it holds counts as one event.
 */
export function textFilter(rewrite: TextRewrite): StreamEventFilter {
  let channel: TextChannel | undefined;
  let held = "";
  const release = (): NeutralEvent[] => {
    if (channel === undefined) return [];
    const { out } = rewrite.step(held, channel, true);
    const ev = out === "" ? [] : [eventOf(channel, out)];
    channel = undefined;
    held = "";
    return ev;
  };
  return {
    event(ev) {
      // A keep-alive carries nothing: a value held across one stays held.
      if (ev.type === "heartbeat") return [ev];
      const c = channelOf(ev);
      if (c === undefined) return [...release(), ev];
      const before = channel !== undefined && !same(channel, c) ? release() : [];
      const text = held + (ev.type === "tool_call_args" ? ev.delta : (ev as { readonly text: string }).text);
      const { out, keep } = rewrite.step(text, c, false);
      channel = keep === "" ? undefined : c;
      held = keep;
      return out === "" ? before : [...before, eventOf(c, out)];
    },
    end: release,
    held: () => (held === "" ? 0 : 1),
  };
}
