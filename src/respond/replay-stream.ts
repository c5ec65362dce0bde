import type { StreamEncoder } from "../protocol/codec.ts";
import type { NeutralEvent, NeutralResponse } from "../protocol/neutral.ts";

/**
 * A finished answer as the events a provider's stream would have carried: start, reasoning (with
 * its signatures), the text, the stop and the usage. A client's encoder turns them into a stream
 * its SDK cannot tell from a live one.
 */
export function eventsOfResponse(response: NeutralResponse): NeutralEvent[] {
  const events: NeutralEvent[] = [{ type: "start" }];
  for (const r of response.reasoning ?? []) {
    events.push({ type: "reasoning", text: r.text });
    if (r.signature !== undefined) events.push({ type: "reasoning_signature", signature: r.signature });
  }
  if (response.text !== "") events.push({ type: "text", text: response.text });
  response.toolCalls.forEach((c, index) => events.push({ type: "tool_call_start", index, id: c.id, name: c.name }, { type: "tool_call_args", index, delta: c.arguments }));
  events.push({ type: "stop", reason: response.stopReason, stopSequence: response.stopSequence });
  if (response.usage !== undefined) events.push({ type: "usage", usage: response.usage });
  return events;
}

/** An answer the gateway already holds (a cache hit), as the client protocol's SSE stream, in one piece. */
export function replayStream(response: NeutralResponse, encoder: StreamEncoder): ReadableStream<Uint8Array> {
  let text = "";
  for (const ev of eventsOfResponse(response)) text += encoder.encode(ev);
  text += encoder.end();
  const bytes = new TextEncoder().encode(text);
  return new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(bytes);
      controller.close();
    },
  });
}
