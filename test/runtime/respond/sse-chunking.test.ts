/**
 * Property: however a provider's SSE bytes are split into network chunks, every protocol's stream
 * decoder yields the same neutral events. Splits are seeded-random, including inside multi-byte
 * UTF-8 characters and inside CRLF pairs.
 */
import { createParser } from "eventsource-parser";
import { describe, expect, it } from "vitest";
import { PROTOCOL_IDS, type Codec } from "../../../src/protocol/codec.ts";
import type { NeutralEvent, NeutralRequest } from "../../../src/protocol/neutral.ts";
import { builtinCodecs } from "../../../src/protocol/registry.ts";
import { mulberry32 } from "../traffic/helpers.ts";

/** A seeded RNG as a function, so every random case is reproducible. */
const seededRandom = (seed: number): (() => number) => {
  const r = mulberry32(seed);
  return () => r.next();
};

const request: NeutralRequest = { model: "m", messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }], stream: true, streamUsage: true };
const events: NeutralEvent[] = [
  { type: "start" },
  { type: "text", text: "héllo " },
  { type: "text", text: "日本 🙂" },
  { type: "heartbeat" },
  { type: "text", text: " done" },
  { type: "tool_call_start", index: 0, id: "call_1", name: "lookup" },
  { type: "tool_call_args", index: 0, delta: '{"q":"é' },
  { type: "tool_call_args", index: 0, delta: '🙂"}' },
  { type: "stop", reason: "tool_use" },
  { type: "usage", usage: { inputTokens: 9, outputTokens: 7, source: "provider" } },
];

function decode(codec: Codec, chunks: readonly Uint8Array[]): NeutralEvent[] {
  const decoder = codec.createStreamDecoder();
  const text = new TextDecoder();
  const out: NeutralEvent[] = [];
  const parser = createParser({
    onEvent: (e) => out.push(...decoder.decode({ event: e.event, data: e.data })),
    onComment: () => out.push({ type: "heartbeat" }),
  });
  for (const c of chunks) parser.feed(text.decode(c, { stream: true }));
  parser.feed(text.decode());
  out.push(...decoder.finish());
  return out;
}

function split(bytes: Uint8Array, rand: () => number): Uint8Array[] {
  const out: Uint8Array[] = [];
  let i = 0;
  while (i < bytes.length) {
    const n = 1 + Math.floor(rand() * 12);
    out.push(bytes.subarray(i, i + n));
    i += n;
  }
  return out;
}

const codecs = PROTOCOL_IDS.flatMap((id) => builtinCodecs.get(id) ?? []);

describe.each(codecs.map((c) => ({ codec: c, id: c.id })))("$id stream decoder", ({ codec }) => {
  const encoder = codec.createStreamEncoder({ id: "0123456789abcdef0123456789abcdef", created: 1, model: "m" }, request);
  const lf = events.map((e) => encoder.encode(e)).join("") + encoder.end();
  const variants = { lf, crlf: lf.replaceAll("\n", "\r\n") };

  it.each(Object.entries(variants))("decodes the same events under 300 random splits (%s)", (_name, sse) => {
    const bytes = new TextEncoder().encode(sse);
    const whole = decode(codec, [bytes]);
    expect(whole.some((e) => e.type === "error")).toBe(false);
    expect(whole.filter((e) => e.type === "text").map((e) => (e.type === "text" ? e.text : "")).join("")).toBe("héllo 日本 🙂 done");
    const rand = seededRandom(0x5eed + sse.length);
    for (let run = 0; run < 300; run++) expect(decode(codec, split(bytes, rand))).toEqual(whole);
  });
});
