/**
 * The AWS event stream framing on its own: CRC-32, typed headers, and a stream decoded the same
 * whichever byte it is cut at; a bad checksum or a cut message is an error, never a skip.
 */
import { describe, expect, it } from "vitest";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import {
  crc32,
  encodeEventStreamMessage,
  EventStreamDecoder,
  type EventStreamMessage,
} from "../../../src/protocol/bedrock-converse/event-stream.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

function failure(fn: () => unknown): GatewayError {
  try {
    fn();
  } catch (err) {
    if (err instanceof GatewayError) return err;
    throw err;
  }
  throw new Error("expected a GatewayError");
}

/** A message with every header type, framed by hand (the encoder writes only strings, booleans and bytes). */
function everyTypeMessage(): Uint8Array {
  const h: number[] = [];
  const name = (n: string) => {
    const b = enc.encode(n);
    h.push(b.length, ...b);
  };
  name("t");
  h.push(0);
  name("f");
  h.push(1);
  name("b");
  h.push(2, 0xfe); // -2
  name("s");
  h.push(3, 0x80, 0x00); // -32768
  name("i");
  h.push(4, 0x7f, 0xff, 0xff, 0xff);
  name("l");
  h.push(5, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe); // -2n
  name("bytes");
  h.push(6, 0, 3, 1, 2, 3);
  name("str");
  h.push(7, 0, 2, 0xc3, 0xa9); // "é"
  name("ts");
  h.push(8, 0, 0, 1, 0x8b, 0xcf, 0xe5, 0x68, 0x00);
  name("id");
  h.push(9, ...Array.from({ length: 16 }, (_, i) => i));
  const payload = enc.encode("{}");
  const total = 12 + h.length + payload.length + 4;
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  view.setUint32(0, total);
  view.setUint32(4, h.length);
  view.setUint32(8, crc32(out, 0, 8));
  out.set(h, 12);
  out.set(payload, 12 + h.length);
  view.setUint32(total - 4, crc32(out, 0, total - 4));
  return out;
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let p = 0;
  for (const part of parts) {
    out.set(part, p);
    p += part.length;
  }
  return out;
}

/** A ConverseStream-like recording: events, an empty-payload message, and an exception. */
function recording(): Uint8Array {
  const event = (type: string, body: unknown) =>
    encodeEventStreamMessage({ ":event-type": type, ":content-type": "application/json", ":message-type": "event" }, enc.encode(JSON.stringify(body)));
  return concat([
    event("messageStart", { role: "assistant", p: "abc" }),
    event("contentBlockDelta", { contentBlockIndex: 0, delta: { text: "Héllo, wörld — ✓" } }),
    encodeEventStreamMessage({ ":message-type": "event", ":event-type": "empty", flag: true }, new Uint8Array(0)),
    event("contentBlockStop", { contentBlockIndex: 0 }),
    event("messageStop", { stopReason: "end_turn" }),
    event("metadata", { usage: { inputTokens: 3, outputTokens: 4, totalTokens: 7 }, metrics: { latencyMs: 5 } }),
    encodeEventStreamMessage({ ":message-type": "exception", ":exception-type": "throttlingException", ":content-type": "application/json" }, enc.encode('{"message":"slow down"}')),
  ]);
}

/** Messages as comparable plain data. */
function plain(messages: readonly EventStreamMessage[]): unknown[] {
  return messages.map((m) => ({ headers: Object.fromEntries([...m.headers].map(([k, v]) => [k, v.value instanceof Uint8Array ? [...v.value] : v.value])), payload: dec.decode(m.payload) }));
}

describe("crc32", () => {
  it("is the IEEE CRC-32 (the check value of '123456789')", () => {
    expect(crc32(enc.encode("123456789"))).toBe(0xcbf43926);
    expect(crc32(new Uint8Array(0))).toBe(0);
  });
});

describe("the event stream decoder", () => {
  it("reads every header type", () => {
    const [m] = new EventStreamDecoder().push(everyTypeMessage());
    expect(Object.fromEntries(m!.headers)).toEqual({
      t: { type: "boolean", value: true },
      f: { type: "boolean", value: false },
      b: { type: "byte", value: -2 },
      s: { type: "short", value: -32768 },
      i: { type: "integer", value: 2147483647 },
      l: { type: "long", value: -2n },
      bytes: { type: "binary", value: new Uint8Array([1, 2, 3]) },
      str: { type: "string", value: "é" },
      ts: { type: "timestamp", value: 1700000000000n },
      id: { type: "uuid", value: new Uint8Array(Array.from({ length: 16 }, (_, i) => i)) },
    });
    expect(dec.decode(m!.payload)).toBe("{}");
  });

  it("reads string header names and values of any length and script exactly as UTF-8", () => {
    const headers = {
      ":event-type": "contentBlockDelta",
      "ünïcode-name": "value",
      ascii64: "a".repeat(64),
      ascii65: "b".repeat(65),
      long: "x".repeat(300),
      late: `${"c".repeat(10)}→✓`,
      empty: "",
    };
    const [m] = new EventStreamDecoder().push(encodeEventStreamMessage(headers, enc.encode("{}")));
    expect(Object.fromEntries([...m!.headers].map(([k, v]) => [k, v.value]))).toEqual(headers);
    expect([...m!.headers.values()].every((v) => v.type === "string")).toBe(true);
  });

  it("decodes the same messages whichever byte the stream is cut at, once or at every byte", () => {
    const bytes = recording();
    const whole = plain(new EventStreamDecoder().push(bytes));
    expect(whole).toHaveLength(7);
    expect(whole[1]).toEqual({
      headers: { ":event-type": "contentBlockDelta", ":content-type": "application/json", ":message-type": "event" },
      payload: JSON.stringify({ contentBlockIndex: 0, delta: { text: "Héllo, wörld — ✓" } }),
    });
    for (let cut = 0; cut <= bytes.length; cut++) {
      const d = new EventStreamDecoder();
      const got = [...d.push(bytes.subarray(0, cut)), ...d.push(bytes.subarray(cut))];
      expect(plain(got)).toEqual(whole);
      expect(d.pending).toBe(0);
      d.end();
    }
    // Every byte its own chunk, and payloads kept across later pushes are not overwritten.
    const d = new EventStreamDecoder();
    const kept: EventStreamMessage[] = [];
    for (let i = 0; i < bytes.length; i++) kept.push(...d.push(bytes.subarray(i, i + 1)));
    expect(plain(kept)).toEqual(whole);
    d.end();
  });

  it("reports a stream cut inside a message at its end, for every cut point", () => {
    const bytes = recording();
    const first = encodeEventStreamMessage({ ":event-type": "messageStart" }, enc.encode("{}")).length;
    for (let cut = 1; cut < first; cut++) {
      const d = new EventStreamDecoder();
      expect(d.push(bytes.subarray(0, cut))).toEqual([]);
      expect(failure(() => d.end()).code).toBe("upstream_stream_cut");
    }
  });

  it("refuses a flipped bit anywhere in a message: prelude, headers, payload or checksum", () => {
    const message = encodeEventStreamMessage({ ":event-type": "contentBlockDelta" }, enc.encode('{"delta":{"text":"hi"}}'));
    for (let i = 0; i < message.length; i++) {
      const bad = message.slice();
      bad[i]! ^= 0x04;
      const err = failure(() => new EventStreamDecoder().push(bad));
      expect(err.code).toBe("upstream_protocol_error");
    }
  });

  it("refuses lengths out of bounds and unknown header types", () => {
    const tiny = new Uint8Array(12);
    const v = new DataView(tiny.buffer);
    v.setUint32(0, 8);
    v.setUint32(8, crc32(tiny, 0, 8));
    expect(failure(() => new EventStreamDecoder().push(tiny)).message).toMatch(/length 8 out of bounds/);

    const unknownType = new Uint8Array([1, 0x78, 42]);
    const total = 12 + unknownType.length + 4;
    const m = new Uint8Array(total);
    const mv = new DataView(m.buffer);
    mv.setUint32(0, total);
    mv.setUint32(4, unknownType.length);
    mv.setUint32(8, crc32(m, 0, 8));
    m.set(unknownType, 12);
    mv.setUint32(total - 4, crc32(m, 0, total - 4));
    expect(failure(() => new EventStreamDecoder().push(m)).message).toMatch(/unknown header type 42/);
  });

  it("refuses a header name or string value that is not UTF-8 as the provider's malformed stream, short or long", () => {
    /** One framed message whose only header is `name` (a string value `value`), checksums right. */
    const framed = (name: number[], value: number[]) => {
      const h = [name.length, ...name, 7, value.length >> 8, value.length & 0xff, ...value];
      const total = 12 + h.length + 4;
      const m = new Uint8Array(total);
      const mv = new DataView(m.buffer);
      mv.setUint32(0, total);
      mv.setUint32(4, h.length);
      mv.setUint32(8, crc32(m, 0, 8));
      m.set(h, 12);
      mv.setUint32(total - 4, crc32(m, 0, total - 4));
      return m;
    };
    const ok = [...enc.encode(":event-type")];
    for (const m of [framed([0x61, 0xff], [0x61]), framed(ok, [0xc3]), framed(ok, [...Array(70).fill(0x61), 0xed, 0xa0, 0x80])]) {
      const err = failure(() => new EventStreamDecoder().push(m));
      expect(err.code).toBe("upstream_protocol_error");
      expect(err.message).toMatch(/not UTF-8/);
    }
  });
});
