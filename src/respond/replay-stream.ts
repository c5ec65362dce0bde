import type { StreamEncoder } from "../protocol/codec.ts";
import type { NeutralEvent, NeutralResponse } from "../protocol/neutral.ts";

/** The neutral events a complete answer stands for, in the order a provider's stream would send them. */
export function responseEvents(response: NeutralResponse): NeutralEvent[] {
  const events: NeutralEvent[] = [{ type: "start" }];
  for (const r of response.reasoning ?? []) {
    events.push({ type: "reasoning", text: r.text });
    if (r.signature !== undefined) events.push({ type: "reasoning_signature", signature: r.signature });
  }
  if (response.text !== "") events.push({ type: "text", text: response.text });
  response.toolCalls.forEach((c, index) => {
    events.push({ type: "tool_call_start", index, id: c.id, name: c.name });
    if (c.arguments !== "") events.push({ type: "tool_call_args", index, delta: c.arguments });
  });
  events.push({ type: "stop", reason: response.stopReason, stopSequence: response.stopSequence });
  if (response.usage !== undefined) events.push({ type: "usage", usage: response.usage });
  return events;
}

/**
 * A complete answer as the client's SSE stream, encoded by its protocol's own stream encoder (so
 * a streaming client cannot tell it from a provider's stream): for answers the gateway holds whole
 * before the client hears anything, such as a Looper run's accepted step or a cache hit.
 */
export function replayStream(response: NeutralResponse, encoder: StreamEncoder): ReadableStream<Uint8Array> {
  let text = "";
  for (const e of responseEvents(response)) text += encoder.encode(e);
  text += encoder.end();
  const bytes = new TextEncoder().encode(text);
  return new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(bytes);
      controller.close();
    },
  });
}
