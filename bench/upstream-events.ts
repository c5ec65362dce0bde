/**
 * How many upstream events one streamed answer carries, counted rather than assumed: one request
 * straight to the simulator, with the knobs the bench set, and its body decoded with the parsers
 * the gateway itself uses — `eventsource-parser` for OpenAI Chat's SSE (every `data:` event,
 * `[DONE]` included), the gateway's own event-stream decoder for Bedrock ConverseStream (every
 * binary frame). The Bedrock request is SigV4-signed with the gateway's signer, which the simulator
 * verifies as it verifies the gateway's.
 */
import { createParser } from "eventsource-parser";
import { signSigV4 } from "../src/invoker/auth/aws-sigv4.ts";
import { EventStreamDecoder } from "../src/protocol/bedrock-converse/event-stream.ts";
import { SIMULATOR_API_KEY } from "../local-stack/stack.ts";
import { BenchError } from "./entry.ts";
import { BACKEND_MODEL, BEDROCK_MODEL_ID, BEDROCK_REGION, BENCH_AWS } from "./sluice-config.ts";
import { PROMPT } from "./workload.ts";

/** Upstream events per streamed answer, and the answer's size on the wire. */
export interface UpstreamCount {
  readonly events: number;
  readonly bytes: number;
}

async function post(url: string, headers: Record<string, string>, body: string): Promise<Uint8Array> {
  const res = await fetch(url, { method: "POST", headers, body });
  const bytes = new Uint8Array(await res.arrayBuffer());
  if (res.status !== 200) throw new BenchError(`counting upstream events: ${url} answered ${res.status}: ${new TextDecoder().decode(bytes).slice(0, 500)}`);
  return bytes;
}

/** SSE events of one OpenAI Chat stream with usage (role, content deltas, finish, usage, `[DONE]`). */
export async function countSseEvents(simUrl: string): Promise<UpstreamCount> {
  const body = JSON.stringify({ model: BACKEND_MODEL, messages: [{ role: "user", content: PROMPT }], stream: true, stream_options: { include_usage: true } });
  const bytes = await post(`${simUrl}/v1/chat/completions`, { authorization: `Bearer ${SIMULATOR_API_KEY}`, "content-type": "application/json" }, body);
  let events = 0;
  const parser = createParser({ onEvent: () => void events++ });
  parser.feed(new TextDecoder().decode(bytes));
  return { events, bytes: bytes.length };
}

/** Frames of one ConverseStream answer (messageStart, the deltas, contentBlockStop, messageStop, metadata). */
export async function countEventStreamFrames(simUrl: string): Promise<UpstreamCount> {
  const url = `${simUrl}/model/${encodeURIComponent(BEDROCK_MODEL_ID)}/converse-stream`;
  const body = JSON.stringify({ messages: [{ role: "user", content: [{ text: PROMPT }] }] });
  const headers = { "content-type": "application/json" };
  const signed = await signSigV4({ method: "POST", url, headers, body, credentials: BENCH_AWS, region: BEDROCK_REGION, service: "bedrock", now: new Date() });
  const bytes = await post(url, { ...headers, ...signed }, body);
  const decoder = new EventStreamDecoder();
  const events = decoder.push(bytes).length;
  decoder.end();
  return { events, bytes: bytes.length };
}
