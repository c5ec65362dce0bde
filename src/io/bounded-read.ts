/**
 * Bounded reading of byte streams whose size someone else controls: a client's request body, a
 * provider's response body. Web streams only, so the same code serves the inbound and the
 * upstream side and runs under any runtime.
 *
 * Cost is linear in the bytes read whatever the sender's chunking: byte streams (every body
 * workerd hands out) are read into one growing buffer with `read(view, { min })`, so the runtime
 * fills each view natively and JavaScript runs once per slice instead of once per network chunk
 * (a JavaScript read costs tens of microseconds; one per 1-byte chunk was most of the old cost).
 * Nothing a read returns is kept: a stream of one-byte chunks cannot make the reader hold one
 * runtime-allocated buffer (4 KiB under workerd) per chunk.
 *
 * Reads are sliced, with a turn of the event loop between slices: while a sender keeps the socket
 * full, workerd parses its chunks on promises that are always ready, and those run ahead of every
 * other connection's events. Without the yield a fast sender of tiny chunks starves the isolate's
 * other requests for as long as its upload lasts.
 */

/** What {@link readBounded} found. */
export interface BoundedRead {
  /** The whole stream, or its first `maxBytes` bytes when it held more. */
  readonly bytes: Uint8Array;
  /** The stream held more than `maxBytes`; the rest was not kept. */
  readonly overflowed: boolean;
}

/** Limits of one {@link readBounded} call. */
export interface BoundedReadOptions {
  /** Most bytes kept; one byte more makes the read `overflowed`. */
  readonly maxBytes: number;
  /**
   * After an overflow, how many more bytes to read and drop before cancelling the stream. Dropping
   * the rest of a client's upload lets it read the refusal instead of a connection reset; 0 (the
   * default) cancels at once, which is right for a provider's body.
   */
  readonly discardAfterOverflow?: number | undefined;
  /**
   * The size the stream's own framing announces (an HTTP body's Content-Length): sizes the first
   * buffer, and a size up to one slice is read in one native call. Pass it only when the framing
   * holds the stream to it; otherwise a larger stream is still cut at `maxBytes`.
   */
  readonly expectedBytes?: number | undefined;
}

/** Largest first allocation, whatever the sender announced. */
const MAX_INITIAL_BYTES = 1024 * 1024;
/** First allocation when nothing was announced. */
const STEP_BYTES = 64 * 1024;
/**
 * Most bytes one read may take before the reader yields. At 1-byte chunks workerd needs about
 * 10 ms of native parsing for 16 KiB, which bounds the stall another request sees.
 */
const SLICE_BYTES = 16 * 1024;

/**
 * Largest announced body read in one native call. The sender's framing (Content-Length) bounds
 * such a body, so it cannot outgrow the announcement, and one slice of native parsing is all it
 * can cost: reading it in JavaScript would only add work to every ordinary request.
 */
const NATIVE_MAX_BYTES = SLICE_BYTES;

/** Lets the event loop serve other connections (a timer, not a microtask: those run first). */
const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 0));

/**
 * `read(view, { min })` from the WHATWG Streams standard. The workerd type declarations in use
 * declare only `read(view)`; the runtime implements the option.
 */
interface MinByobReader {
  read<T extends ArrayBufferView>(view: T, options: { min: number }): Promise<ReadableStreamReadResult<T>>;
  cancel(reason?: unknown): Promise<void>;
}

type Reader = { readonly kind: "byob"; readonly reader: MinByobReader } | { readonly kind: "default"; readonly reader: ReadableStreamDefaultReader<Uint8Array> };

/** A BYOB reader when the stream is a byte stream, else the default reader. Locks the stream. */
function readerOf(stream: ReadableStream<Uint8Array>): Reader {
  try {
    // Throws (without locking) for a stream that is not a byte stream.
    return { kind: "byob", reader: stream.getReader({ mode: "byob" }) as unknown as MinByobReader };
  } catch {
    return { kind: "default", reader: stream.getReader() };
  }
}

/** Copies the first `used` bytes into a larger buffer. Doubling keeps the total copying linear. */
function grow(buffer: ArrayBuffer, used: number, capacity: number): ArrayBuffer {
  const next = new ArrayBuffer(capacity);
  new Uint8Array(next).set(new Uint8Array(buffer, 0, used));
  return next;
}

/** The bytes of a chunk from a default reader, whatever kind of view it came as. */
function bytesOf(chunk: unknown): Uint8Array {
  if (chunk instanceof Uint8Array) return chunk;
  if (ArrayBuffer.isView(chunk)) return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  if (chunk instanceof ArrayBuffer) return new Uint8Array(chunk);
  throw new TypeError("the stream yielded a chunk that is not bytes");
}

/**
 * Reads until the end or until `limit` bytes are in; `ended` says which. Reading one byte past a
 * caller's maximum is how "exactly full" is told from "more".
 */
async function fill(r: Reader, limit: number, initial: number): Promise<{ bytes: Uint8Array; ended: boolean }> {
  let buffer = new ArrayBuffer(Math.max(1, Math.min(limit, initial)));
  let used = 0;
  if (r.kind === "byob") {
    let sinceYield = 0;
    for (;;) {
      if (used === buffer.byteLength) {
        if (used === limit) return { bytes: new Uint8Array(buffer, 0, used), ended: false };
        buffer = grow(buffer, used, Math.min(limit, buffer.byteLength * 2));
      }
      // Only a body past a whole slice yields: an ordinary one is read with no timer at all.
      if (sinceYield >= SLICE_BYTES) {
        sinceYield = 0;
        await yieldToEventLoop();
      }
      const space = Math.min(buffer.byteLength - used, SLICE_BYTES);
      // The view's buffer is transferred to the stream and comes back as `value.buffer`.
      const { done, value } = await r.reader.read(new Uint8Array(buffer, used, space), { min: space });
      if (value === undefined) throw new TypeError("the stream was released while it was being read");
      buffer = value.buffer as ArrayBuffer;
      used += value.byteLength;
      sinceYield += value.byteLength;
      if (done) return { bytes: new Uint8Array(buffer, 0, used), ended: true };
    }
  }
  let sinceYield = 0;
  for (;;) {
    if (sinceYield >= SLICE_BYTES) {
      sinceYield = 0;
      await yieldToEventLoop();
    }
    const { done, value } = await r.reader.read();
    if (done) return { bytes: new Uint8Array(buffer, 0, used), ended: true };
    const chunk = bytesOf(value);
    const take = Math.min(chunk.byteLength, limit - used);
    if (used + take > buffer.byteLength) {
      let capacity = buffer.byteLength * 2;
      while (capacity < used + take) capacity *= 2;
      buffer = grow(buffer, used, Math.min(limit, capacity));
    }
    // Copied, never kept: the chunk's own backing store can be collected at once.
    new Uint8Array(buffer, used, take).set(take === chunk.byteLength ? chunk : chunk.subarray(0, take));
    used += take;
    sinceYield += take;
    if (used === limit) return { bytes: new Uint8Array(buffer, 0, used), ended: false };
  }
}

/** Reads and drops up to `maxBytes`; resolves true if the stream ended within them. */
async function drop(r: Reader, maxBytes: number): Promise<boolean> {
  let seen = 0;
  let sinceYield = 0;
  let scratch = new ArrayBuffer(SLICE_BYTES);
  while (seen <= maxBytes) {
    if (sinceYield >= SLICE_BYTES) {
      sinceYield = 0;
      await yieldToEventLoop();
    }
    if (r.kind === "byob") {
      const { done, value } = await r.reader.read(new Uint8Array(scratch), { min: scratch.byteLength });
      if (value === undefined) return done;
      scratch = value.buffer as ArrayBuffer;
      seen += value.byteLength;
      sinceYield += value.byteLength;
      if (done) return true;
    } else {
      const { done, value } = await r.reader.read();
      if (done) return true;
      const n = bytesOf(value).byteLength;
      seen += n;
      sinceYield += n;
    }
  }
  return false;
}

/** Cancels without letting a failure to cancel (a stream already gone) mask the outcome. */
async function cancelQuietly(r: Reader): Promise<void> {
  await r.reader.cancel().catch(() => {});
}

/**
 * Whether a body whose framing announces `announced` bytes (its Content-Length) may be read in one
 * native call (`arrayBuffer()`, `text()`) instead of through {@link readBounded}: the framing holds
 * it to that size, so it cannot outgrow the announcement, and one slice of native parsing is all it
 * can cost. Reading the body object itself also skips wrapping its stream in another one.
 */
export function readableNatively(announced: number | undefined, maxBytes: number): announced is number {
  return announced !== undefined && Number.isInteger(announced) && announced >= 0 && announced <= Math.min(maxBytes, NATIVE_MAX_BYTES);
}

/**
 * Reads a body that {@link readableNatively} allows in one native call. The framing held it to
 * its announced size; more than `maxBytes` would be a runtime that did not, and is cut.
 */
export async function readAnnounced(body: { arrayBuffer(): Promise<ArrayBuffer> }, maxBytes: number): Promise<BoundedRead> {
  const bytes = new Uint8Array(await body.arrayBuffer());
  return bytes.byteLength > maxBytes ? { bytes: bytes.subarray(0, maxBytes), overflowed: true } : { bytes, overflowed: false };
}

/**
 * Reads a stream up to `maxBytes`, stopping as soon as it holds more: a lying or missing length
 * cannot make the caller buffer past its limit. Bytes are counted, never UTF-16 units. A stream
 * error rejects with that error; the caller knows whose stream it was.
 */
export async function readBounded(stream: ReadableStream<Uint8Array>, options: BoundedReadOptions): Promise<BoundedRead> {
  const { maxBytes } = options;
  const limit = maxBytes + 1;
  const announced = options.expectedBytes;
  const initial = Math.min(MAX_INITIAL_BYTES, announced !== undefined && Number.isFinite(announced) && announced >= 0 ? announced + 1 : STEP_BYTES);
  if (readableNatively(announced, maxBytes)) return await readAnnounced(new Response(stream), maxBytes);
  const r = readerOf(stream);
  let read: { bytes: Uint8Array; ended: boolean };
  try {
    read = await fill(r, limit, initial);
  } catch (err) {
    await cancelQuietly(r);
    throw err;
  }
  if (read.ended) return { bytes: read.bytes, overflowed: false };
  const discard = options.discardAfterOverflow ?? 0;
  // Past the discard allowance the stream is cancelled: whoever is still sending sees the cut.
  const ended = discard > 0 ? await drop(r, discard).catch(() => true) : false;
  if (!ended) await cancelQuietly(r);
  return { bytes: read.bytes.subarray(0, maxBytes), overflowed: true };
}

/**
 * Reads and drops a stream nobody will use, up to `maxBytes`, then cancels what is left. Resolves
 * true when the whole stream was consumed. Never rejects: a stream that fails was consumed as far
 * as anyone can.
 */
export async function discardBounded(stream: ReadableStream<Uint8Array>, maxBytes: number): Promise<boolean> {
  const r = readerOf(stream);
  const ended = await drop(r, maxBytes).catch(() => false);
  if (!ended) await cancelQuietly(r);
  return ended;
}

// One decoder of each kind per isolate: `decode` without `stream` keeps no state between calls.
const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });
const lenientUtf8 = new TextDecoder("utf-8");

/** Strict UTF-8: malformed input throws (a `TypeError`) instead of becoming replacement characters. */
export function decodeUtf8Strict(bytes: Uint8Array): string {
  return strictUtf8.decode(bytes);
}

/**
 * Lenient UTF-8 for text kept only as an internal cause (e.g. a prefix of a provider's error
 * body, which may end inside a character): malformed bytes become U+FFFD.
 */
export function decodeUtf8Lenient(bytes: Uint8Array): string {
  return lenientUtf8.decode(bytes);
}
