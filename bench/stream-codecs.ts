/**
 * `npm run bench:stream-codecs`: the CPU one provider stream event costs in the respond phase's
 * codecs, in this process, for each protocol that has a pass-through: the full path (decode to
 * neutral events, encode for the client) against the pass-through scanner, over the same
 * provider streams. What both paths share (SSE framing, the pump, bytes in and out) is left out,
 * so the figures are the codecs' own; the whole path's per-event cost is the `bedrock-streaming`
 * stage of `npm run bench`.
 *
 *   npm run bench:stream-codecs -- [--tokens 256] [--streams 200] [--rounds 7]
 *
 * Each stream is `--tokens` text deltas of a few characters between the protocol's usual opening
 * and closing events, written the way the providers write them. Rounds run every path in rotating
 * order; the report gives each path's median nanoseconds per event and the pass-through's ratio
 * to the full path per round. It checks that both paths give a client the same text.
 */
import type { ResponseStamp, SseEvent, StreamFacts } from "../src/protocol/codec.ts";
import type { NeutralRequest } from "../src/protocol/neutral.ts";
import { anthropicMessagesCodec } from "../src/protocol/anthropic-messages/index.ts";
import { openAiChatCodec } from "../src/protocol/openai-chat/index.ts";
import type { Codec } from "../src/protocol/codec.ts";
import { BenchError, numberFlag, parseFlags, runBench } from "./entry.ts";
import { median } from "./stats.ts";

const USAGE = `Usage: npm run bench:stream-codecs -- [options]
  --tokens N    text deltas per stream (default 256)
  --streams N   streams per path per round (default 200)
  --rounds N    rounds; each path runs once per round, in rotating order (default 7)
  --help        show this text`;

const STAMP: ResponseStamp = { id: "gw-1", created: 1_760_000_000, model: "public-model" };
const REQUEST: NeutralRequest = { model: "public-model", messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }], stream: true, streamUsage: true };
const WORDS = ["The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", "."];
const NO_FACTS: StreamFacts = { content: () => {}, toolCall: () => {}, stop: () => {}, usage: () => {} };

/** An OpenAI Chat Completions stream as OpenAI writes one (its id, fingerprint and model on every chunk). */
function chatStream(tokens: number): SseEvent[] {
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
    data: JSON.stringify({ id: "chatcmpl-PROVIDER", object: "chat.completion.chunk", created: 1_111_111_111, model: "gpt-provider", system_fingerprint: "fp_x", choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] }),
  });
  return [
    chunk({ role: "assistant", content: "", refusal: null }),
    ...Array.from({ length: tokens }, (_, i) => chunk({ content: WORDS[i % WORDS.length] })),
    chunk({}, "stop"),
    { data: JSON.stringify({ id: "chatcmpl-PROVIDER", object: "chat.completion.chunk", created: 1_111_111_111, model: "gpt-provider", choices: [], usage: { prompt_tokens: 12, completion_tokens: tokens, total_tokens: 12 + tokens } }) },
    { data: "[DONE]" },
  ];
}

/** An Anthropic Messages stream as Anthropic writes one. */
function messagesStream(tokens: number): SseEvent[] {
  const ev = (type: string, body: Record<string, unknown> = {}): SseEvent => ({ event: type, data: JSON.stringify({ type, ...body }) });
  return [
    ev("message_start", { message: { id: "msg_PROVIDER", type: "message", role: "assistant", model: "claude-provider", content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 12, output_tokens: 1 } } }),
    ev("content_block_start", { index: 0, content_block: { type: "text", text: "" } }),
    ...Array.from({ length: tokens }, (_, i) => ev("content_block_delta", { index: 0, delta: { type: "text_delta", text: WORDS[i % WORDS.length] } })),
    ev("content_block_stop", { index: 0 }),
    ev("message_delta", { delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: tokens } }),
    ev("message_stop"),
  ];
}

/** The client's text for one stream on the full path: decoded once, encoded last. */
function fullPath(codec: Codec, events: readonly SseEvent[]): string {
  const decoder = codec.createStreamDecoder();
  const encoder = codec.createStreamEncoder(STAMP, REQUEST);
  let out = "";
  for (const sse of events) for (const ev of decoder.decode(sse)) out += encoder.encode(ev);
  for (const ev of decoder.finish()) out += encoder.encode(ev);
  return out + encoder.end();
}

/** The client's text for one stream through the protocol's pass-through scanner. */
function passThrough(codec: Codec, events: readonly SseEvent[]): string {
  const scanner = codec.createPassThrough!(STAMP, REQUEST, { decoder: codec.createStreamDecoder(), encoder: codec.createStreamEncoder(STAMP, REQUEST) })!;
  let out = "";
  for (const sse of events) {
    const text = scanner.scan(sse, NO_FACTS);
    if (typeof text !== "string") throw new BenchError(`the ${codec.id} pass-through failed the stream: ${text.code}`);
    out += text;
  }
  if (scanner.finish() !== undefined) throw new BenchError(`the ${codec.id} pass-through saw a cut stream`);
  return out + scanner.end();
}

/** The text a client reads from a stream (every JSON string under `content` or `text`), for the check that both paths agree. */
function clientText(sse: string): string {
  let text = "";
  for (const line of sse.split("\n")) {
    if (!line.startsWith("data: {")) continue;
    const v = JSON.parse(line.slice(6)) as { choices?: { delta?: { content?: string } }[]; delta?: { text?: string } };
    text += v.choices?.[0]?.delta?.content ?? v.delta?.text ?? "";
  }
  return text;
}

interface Path {
  readonly label: string;
  readonly codec: Codec;
  readonly events: readonly SseEvent[];
  readonly run: (codec: Codec, events: readonly SseEvent[]) => string;
}

async function main(): Promise<number> {
  const values = parseFlags({ tokens: { type: "string" }, streams: { type: "string" }, rounds: { type: "string" }, help: { type: "boolean" } }, USAGE);
  const tokens = numberFlag("tokens", values.tokens, 256, 1, 100_000, true);
  const streams = numberFlag("streams", values.streams, 200, 1, 100_000, true);
  const rounds = numberFlag("rounds", values.rounds, 7, 1, 101, true);
  const chat = chatStream(tokens);
  const messages = messagesStream(tokens);
  const paths: Path[] = [
    { label: "openai-chat full", codec: openAiChatCodec, events: chat, run: fullPath },
    { label: "openai-chat pass", codec: openAiChatCodec, events: chat, run: passThrough },
    { label: "anthropic full", codec: anthropicMessagesCodec, events: messages, run: fullPath },
    { label: "anthropic pass", codec: anthropicMessagesCodec, events: messages, run: passThrough },
  ];
  const want = Array.from({ length: tokens }, (_, i) => WORDS[i % WORDS.length]).join("");
  for (const p of paths) {
    const text = clientText(p.run(p.codec, p.events));
    if (text !== want) throw new BenchError(`${p.label}: the client would read ${JSON.stringify(text.slice(0, 60))}…, not the stream's text`);
  }
  // Warm-up: every path compiled and optimised before anything counts.
  for (const p of paths) for (let i = 0; i < streams; i++) p.run(p.codec, p.events);
  const perEvent = new Map<string, number[]>(paths.map((p) => [p.label, []]));
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < paths.length; k++) {
      const p = paths[(r + k) % paths.length]!;
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < streams; i++) p.run(p.codec, p.events);
      const ns = Number(process.hrtime.bigint() - t0);
      perEvent.get(p.label)!.push(ns / (streams * p.events.length));
    }
  }
  console.log(`stream codecs: ${tokens} text deltas per stream, ${streams} streams per path per round, ${rounds} rounds (node ${process.version}, this process)`);
  console.log("path               ns/event (median)  min   max");
  for (const p of paths) {
    const v = perEvent.get(p.label)!;
    console.log(`${p.label.padEnd(18)} ${median(v).toFixed(0).padStart(17)}  ${Math.min(...v).toFixed(0).padStart(4)}  ${Math.max(...v).toFixed(0).padStart(4)}`);
  }
  for (const proto of ["openai-chat", "anthropic"]) {
    const full = perEvent.get(`${proto} full`)!;
    const pass = perEvent.get(`${proto} pass`)!;
    const ratios = full.map((f, i) => pass[i]! / f);
    console.log(`${proto}: pass-through / full path per event, median ×${median(ratios).toFixed(2)} (per round ${ratios.map((x) => x.toFixed(2)).join(", ")})`);
  }
  return 0;
}

await runBench(main);
