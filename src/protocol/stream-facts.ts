import type { StreamFacts } from "./codec.ts";
import type { NeutralEvent } from "./neutral.ts";

/**
 * Tells `facts` what one neutral event means for the attempt's record: content reached the client
 * (text, reasoning or tool arguments, never an empty string; a tool call's start), a proposed
 * tool, the stop reason, the usage. The stream pump reads the full path's events this way, and a
 * pass-through that decodes some events reads them the same way.
 */
export function noteEventFacts(ev: NeutralEvent, facts: StreamFacts): void {
  switch (ev.type) {
    case "text":
    case "reasoning":
      if (ev.text !== "") facts.content(ev.text.length);
      return;
    case "tool_call_start":
      facts.content(0);
      facts.toolCall(ev.name);
      return;
    case "tool_call_args":
      if (ev.delta !== "") facts.content(ev.delta.length);
      return;
    case "stop":
      facts.stop(ev.reason);
      return;
    case "usage":
      facts.usage(ev.usage);
      return;
    case "start":
    case "heartbeat":
    case "reasoning_signature":
    case "error":
      return;
  }
}
