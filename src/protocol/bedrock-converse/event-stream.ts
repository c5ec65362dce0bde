import { GatewayError } from "../../errors/gateway-error.ts";

/*
 * The AWS event stream framing (`application/vnd.amazon.eventstream`), the body of Bedrock's
 * ConverseStream. Each message is
 *
 *   total length (uint32) | headers length (uint32) | prelude CRC32 (of the 8 bytes before it)
 *   | headers | payload | message CRC32 (of every byte before it)
 *
 * all big-endian. A header is a name (uint8 length, UTF-8), a type byte and a typed value:
 * 0 true, 1 false, 2 int8, 3 int16, 4 int32, 5 int64, 6 bytes (uint16 length), 7 string (uint16
 * length, UTF-8), 8 timestamp (int64 milliseconds), 9 UUID (16 bytes).
 *
 * Written here on Uint8Array and DataView rather than taken from @smithy/eventstream-codec: that
 * package is built for the SDK's own middleware stack (its decoder pulls in the SDK's
 * utf8/hex helpers and async iterables), and this decoder sits on the streaming hot path, where
 * it must take bytes exactly as the runtime's reader hands them over and copy only what straddles
 * a chunk boundary.
 */

/** The smallest message: prelude (12) and message CRC (4), no headers, no payload. */
const MIN_MESSAGE = 16;
const PRELUDE = 12;
/** AWS's limits: a message of at most 16 MiB, headers of at most 128 KiB. */
export const MAX_EVENT_STREAM_MESSAGE = 16 * 1024 * 1024;
const MAX_HEADERS = 128 * 1024;

/** One header value with its wire type. */
export type EventStreamHeaderValue =
  | { readonly type: "boolean"; readonly value: boolean }
  | { readonly type: "byte" | "short" | "integer"; readonly value: number }
  | { readonly type: "long" | "timestamp"; readonly value: bigint }
  | { readonly type: "binary"; readonly value: Uint8Array }
  | { readonly type: "string"; readonly value: string }
  | { readonly type: "uuid"; readonly value: Uint8Array };

/** One decoded message: its headers by name and its payload bytes. */
export interface EventStreamMessage {
  readonly headers: ReadonlyMap<string, EventStreamHeaderValue>;
  readonly payload: Uint8Array;
}

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

/** CRC-32 (IEEE 802.3, the one the framing uses) of `bytes[start, end)`. */
export function crc32(bytes: Uint8Array, start = 0, end = bytes.length): number {
  let c = 0xffffffff;
  for (let i = start; i < end; i++) c = CRC_TABLE[(c ^ bytes[i]!) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });
const utf8Encoder = new TextEncoder();

/**
 * `bytes[start, end)` as a string. Header names and string values are short ASCII in practice
 * (`:event-type`, `contentBlockDelta`, …), three of each per message, so they are built here in
 * JavaScript: a call into the runtime's decoder per string (after a copy for each value) made
 * header reading the largest single cost of streaming from Bedrock. A longer string, or one with
 * a byte of 0x80 or above, takes the strict UTF-8 decoder.
 */
function decodeString(bytes: Uint8Array, start: number, end: number): string {
  if (end - start > 64) return strictUtf8(bytes, start, end);
  let s = "";
  for (let i = start; i < end; i++) {
    const b = bytes[i]!;
    if (b >= 0x80) return strictUtf8(bytes, start, end);
    s += String.fromCharCode(b);
  }
  return s;
}

/** The strict decoder's answer; bytes that are not UTF-8 are the provider's malformed stream, not the gateway's fault. */
function strictUtf8(bytes: Uint8Array, start: number, end: number): string {
  try {
    return utf8.decode(bytes.subarray(start, end));
  } catch {
    throw malformed("a header is not UTF-8");
  }
}

const malformed = (why: string): GatewayError => new GatewayError("upstream_protocol_error", `The provider's event stream was malformed: ${why}.`);

/** Headers of one message, `bytes[start, end)`. */
function readHeaders(bytes: Uint8Array, view: DataView, start: number, end: number): Map<string, EventStreamHeaderValue> {
  const headers = new Map<string, EventStreamHeaderValue>();
  let p = start;
  const need = (n: number) => {
    if (p + n > end) throw malformed("a header runs past the headers' length");
  };
  while (p < end) {
    need(1);
    const nameLength = bytes[p]!;
    p += 1;
    need(nameLength + 1);
    const name = decodeString(bytes, p, p + nameLength);
    p += nameLength;
    const type = bytes[p]!;
    p += 1;
    let value: EventStreamHeaderValue;
    switch (type) {
      case 0:
      case 1:
        value = { type: "boolean", value: type === 0 };
        break;
      case 2:
        need(1);
        value = { type: "byte", value: view.getInt8(p) };
        p += 1;
        break;
      case 3:
        need(2);
        value = { type: "short", value: view.getInt16(p) };
        p += 2;
        break;
      case 4:
        need(4);
        value = { type: "integer", value: view.getInt32(p) };
        p += 4;
        break;
      case 5:
      case 8:
        need(8);
        value = { type: type === 5 ? "long" : "timestamp", value: view.getBigInt64(p) };
        p += 8;
        break;
      case 6:
      case 7: {
        need(2);
        const length = view.getUint16(p);
        p += 2;
        need(length);
        // Only a binary value is copied out: a string is decoded from the bytes in place.
        value = type === 6 ? { type: "binary", value: bytes.slice(p, p + length) } : { type: "string", value: decodeString(bytes, p, p + length) };
        p += length;
        break;
      }
      case 9:
        need(16);
        value = { type: "uuid", value: bytes.slice(p, p + 16) };
        p += 16;
        break;
      default:
        throw malformed(`unknown header type ${type}`);
    }
    headers.set(name, value);
  }
  return headers;
}

/**
 * An incremental decoder: bytes in, in chunks cut anywhere, whole messages out. A bad CRC, a
 * length out of bounds or a malformed header throws GatewayError("upstream_protocol_error"); bytes
 * left over at the end are a cut message, which {@link EventStreamDecoder.end} reports.
 */
export class EventStreamDecoder {
  /**
   * Bytes of an unfinished message carried over from earlier chunks (`#buf[0, #len)`), grown by
   * doubling so a large message arriving in small chunks is copied a bounded number of times.
   */
  #buf: Uint8Array = new Uint8Array(0);
  #len = 0;

  /** The messages completed by this chunk, in order. */
  push(chunk: Uint8Array): EventStreamMessage[] {
    let bytes = chunk;
    const carried = this.#len > 0;
    if (carried) {
      const needed = this.#len + chunk.length;
      if (needed > this.#buf.length) {
        const grown = new Uint8Array(Math.max(needed, this.#buf.length * 2));
        grown.set(this.#buf.subarray(0, this.#len));
        this.#buf = grown;
      }
      this.#buf.set(chunk, this.#len);
      this.#len = needed;
      bytes = this.#buf.subarray(0, needed);
    }
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const out: EventStreamMessage[] = [];
    let p = 0;
    while (bytes.length - p >= PRELUDE) {
      const total = view.getUint32(p);
      const headersLength = view.getUint32(p + 4);
      if (crc32(bytes, p, p + 8) !== view.getUint32(p + 8)) throw malformed("prelude checksum mismatch");
      if (total < MIN_MESSAGE || total > MAX_EVENT_STREAM_MESSAGE) throw malformed(`message length ${total} out of bounds`);
      if (headersLength > MAX_HEADERS || headersLength > total - MIN_MESSAGE) throw malformed(`headers length ${headersLength} out of bounds`);
      if (bytes.length - p < total) break;
      const end = p + total;
      if (crc32(bytes, p, end - 4) !== view.getUint32(end - 4)) throw malformed("message checksum mismatch");
      const headersEnd = p + PRELUDE + headersLength;
      // A payload from the carry buffer is copied: the buffer is reused for the next message.
      const payload = carried ? bytes.slice(headersEnd, end - 4) : bytes.subarray(headersEnd, end - 4);
      out.push({ headers: readHeaders(bytes, view, p + PRELUDE, headersEnd), payload });
      p = end;
    }
    const rest = bytes.length - p;
    if (rest === 0) this.#len = 0;
    else if (carried) {
      this.#buf.copyWithin(0, p, bytes.length);
      this.#len = rest;
    } else {
      if (this.#buf.length < rest) this.#buf = new Uint8Array(Math.max(rest, 1024));
      this.#buf.set(chunk.subarray(p));
      this.#len = rest;
    }
    return out;
  }

  /** Bytes of an unfinished message still held. */
  get pending(): number {
    return this.#len;
  }

  /** End of input: throws GatewayError("upstream_stream_cut") when a message was cut short. */
  end(): void {
    if (this.#len > 0) {
      throw new GatewayError("upstream_stream_cut", "The provider's event stream ended inside a message.");
    }
  }
}

/** A header value to encode: strings, booleans and byte arrays (what the simulator and tests send). */
export type EncodableHeader = string | boolean | Uint8Array;

/** One message in the framing; the simulator and tests write streams with it. */
export function encodeEventStreamMessage(headers: Readonly<Record<string, EncodableHeader>>, payload: Uint8Array): Uint8Array {
  const parts: Uint8Array[] = [];
  let headersLength = 0;
  for (const [name, value] of Object.entries(headers)) {
    const nameBytes = utf8Encoder.encode(name);
    let part: Uint8Array;
    if (typeof value === "boolean") {
      part = new Uint8Array(1 + nameBytes.length + 1);
      part[1 + nameBytes.length] = value ? 0 : 1;
    } else {
      const raw = typeof value === "string" ? utf8Encoder.encode(value) : value;
      part = new Uint8Array(1 + nameBytes.length + 1 + 2 + raw.length);
      part[1 + nameBytes.length] = typeof value === "string" ? 7 : 6;
      new DataView(part.buffer).setUint16(2 + nameBytes.length, raw.length);
      part.set(raw, 4 + nameBytes.length);
    }
    part[0] = nameBytes.length;
    part.set(nameBytes, 1);
    parts.push(part);
    headersLength += part.length;
  }
  const total = PRELUDE + headersLength + payload.length + 4;
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  view.setUint32(0, total);
  view.setUint32(4, headersLength);
  view.setUint32(8, crc32(out, 0, 8));
  let p = PRELUDE;
  for (const part of parts) {
    out.set(part, p);
    p += part.length;
  }
  out.set(payload, p);
  view.setUint32(total - 4, crc32(out, 0, total - 4));
  return out;
}

/** A header's value as a string, when it is one. */
export function stringHeader(message: EventStreamMessage, name: string): string | undefined {
  const h = message.headers.get(name);
  return h?.type === "string" ? h.value : undefined;
}
