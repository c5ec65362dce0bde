import { describe, expect, it } from "vitest";
import { decodeUtf8Lenient, decodeUtf8Strict, discardBounded, readBounded } from "../../../src/io/bounded-read.ts";

/** A source under test: its stream and what was done to it. */
interface Source {
  readonly stream: ReadableStream<Uint8Array>;
  readonly cancelled: () => boolean;
  /** Chunks the source handed out. */
  readonly delivered: () => number;
}

type Kind = "default" | "bytes" | "runtime";

/**
 * The same chunks as three kinds of stream: a JavaScript stream (read with the default reader),
 * a JavaScript byte stream and a runtime-owned stream (both read BYOB, like a request body).
 */
function source(kind: Kind, chunks: readonly Uint8Array[], options: { failAfter?: number } = {}): Source {
  let i = 0;
  let cancelled = false;
  const next = (): Uint8Array | undefined | "fail" => {
    if (options.failAfter !== undefined && i >= options.failAfter) return "fail";
    return i < chunks.length ? chunks[i++] : undefined;
  };
  if (kind === "runtime") {
    const t = new IdentityTransformStream();
    const w = t.writable.getWriter();
    void (async () => {
      try {
        for (;;) {
          const c = next();
          if (c === "fail") return void (await w.abort(new Error("sender failed")));
          if (c === undefined) return void (await w.close());
          await w.write(c);
        }
      } catch {
        cancelled = true;
      }
    })();
    return { stream: t.readable, cancelled: () => cancelled, delivered: () => i };
  }
  const pull = (controller: ReadableStreamDefaultController<Uint8Array> | ReadableByteStreamController) => {
    const c = next();
    if (c === "fail") controller.error(new Error("sender failed"));
    else if (c === undefined) controller.close();
    // A byte stream detaches what it is given: enqueue a copy so the test's chunks stay usable.
    else controller.enqueue(kind === "bytes" ? c.slice() : c);
  };
  const cancel = () => {
    cancelled = true;
  };
  const stream =
    kind === "bytes"
      ? new ReadableStream({ type: "bytes", pull, cancel })
      : (new ReadableStream<Uint8Array>({ pull, cancel }) as ReadableStream<Uint8Array>);
  return { stream, cancelled: () => cancelled, delivered: () => i };
}

const utf8 = (s: string) => new TextEncoder().encode(s);
const split = (bytes: Uint8Array, size: number) => Array.from({ length: Math.ceil(bytes.length / size) }, (_, k) => bytes.subarray(k * size, (k + 1) * size));

function seededSplit(bytes: Uint8Array, seed: number): Uint8Array[] {
  let a = seed >>> 0;
  const rand = () => {
    a = (a * 1664525 + 1013904223) >>> 0;
    return a / 4294967296;
  };
  const out: Uint8Array[] = [];
  for (let i = 0; i < bytes.length; ) {
    const n = 1 + Math.floor(rand() * 40);
    out.push(bytes.subarray(i, i + n));
    i += n;
  }
  return out;
}

// Two- three- and four-byte characters, so one-byte chunks split every one of them.
const TEXT = `{"content":"héllo wörld — 日本語 🙂🚀 ${"abc".repeat(500)} ✓"}`;
const KINDS: readonly Kind[] = ["default", "bytes", "runtime"];

describe.each(KINDS)("readBounded over a %s stream", (kind) => {
  it("reads one-byte chunks, multi-byte UTF-8 split across them, back to the same text", async () => {
    const bytes = utf8(TEXT);
    const s = source(kind, split(bytes, 1));
    const r = await readBounded(s.stream, { maxBytes: 1 << 20 });
    expect(r.overflowed).toBe(false);
    expect(r.bytes.byteLength).toBe(bytes.byteLength);
    expect(decodeUtf8Strict(r.bytes)).toBe(TEXT);
  });

  it("gives the same bytes whatever the chunking", async () => {
    const bytes = utf8(TEXT);
    for (const seed of [1, 2, 3, 4, 5]) {
      const r = await readBounded(source(kind, seededSplit(bytes, seed)).stream, { maxBytes: bytes.byteLength });
      expect(r.overflowed).toBe(false);
      expect(decodeUtf8Strict(r.bytes)).toBe(TEXT);
    }
    for (const size of [2, 3, 7, 4096, 1 << 20]) {
      const r = await readBounded(source(kind, split(bytes, size)).stream, { maxBytes: bytes.byteLength, expectedBytes: bytes.byteLength });
      expect(decodeUtf8Strict(r.bytes)).toBe(TEXT);
    }
  });

  it("accepts a body of exactly the limit and refuses one byte more", async () => {
    const exact = new Uint8Array(1000).fill(0x61);
    const atLimit = await readBounded(source(kind, split(exact, 1)).stream, { maxBytes: 1000 });
    expect(atLimit).toMatchObject({ overflowed: false });
    expect(atLimit.bytes.byteLength).toBe(1000);

    const over = source(kind, split(new Uint8Array(1001).fill(0x62), 1));
    const past = await readBounded(over.stream, { maxBytes: 1000 });
    expect(past.overflowed).toBe(true);
    // The kept prefix is exactly the limit, never the byte that crossed it.
    expect(past.bytes.byteLength).toBe(1000);
    expect(past.bytes.every((b) => b === 0x62)).toBe(true);
  });

  it("counts bytes, not UTF-16 units", async () => {
    // 600 characters, 1200 bytes: a check on string length would let it through.
    const text = "é".repeat(600);
    expect(text.length).toBe(600);
    const r = await readBounded(source(kind, split(utf8(text), 5)).stream, { maxBytes: 1000 });
    expect(r.overflowed).toBe(true);
    expect(r.bytes.byteLength).toBe(1000);
    // Four-byte characters: 250 emoji are 500 UTF-16 units and 1000 bytes, exactly the limit.
    const emoji = "🙂".repeat(250);
    const fits = await readBounded(source(kind, split(utf8(emoji), 3)).stream, { maxBytes: 1000 });
    expect(fits.overflowed).toBe(false);
    expect(decodeUtf8Strict(fits.bytes)).toBe(emoji);
  });

  it("stops at the limit and cancels the rest instead of reading it", async () => {
    const chunks = Array.from({ length: 1000 }, () => new Uint8Array(100));
    const s = source(kind, chunks);
    const r = await readBounded(s.stream, { maxBytes: 1000 });
    expect(r.overflowed).toBe(true);
    await expect.poll(() => s.cancelled()).toBe(true);
    // Read just past the limit (allowing for what the stream buffers ahead), never to the end.
    expect(s.delivered()).toBeLessThan(100);
  });

  it("drops the rest within the discard allowance, reading it to the end", async () => {
    const s = source(kind, Array.from({ length: 50 }, () => new Uint8Array(100)));
    const r = await readBounded(s.stream, { maxBytes: 1000, discardAfterOverflow: 10_000 });
    expect(r.overflowed).toBe(true);
    expect(s.delivered()).toBe(50);
    expect(s.cancelled()).toBe(false);
  });

  it("cancels once the discard allowance is spent", async () => {
    const s = source(kind, Array.from({ length: 1000 }, () => new Uint8Array(100)));
    const r = await readBounded(s.stream, { maxBytes: 1000, discardAfterOverflow: 5000 });
    expect(r.overflowed).toBe(true);
    await expect.poll(() => s.cancelled()).toBe(true);
    expect(s.delivered()).toBeLessThan(1000);
  });

  it("reads an empty stream as no bytes", async () => {
    const r = await readBounded(source(kind, []).stream, { maxBytes: 10 });
    expect(r).toMatchObject({ overflowed: false });
    expect(r.bytes.byteLength).toBe(0);
  });

  it("rejects with the stream's own error when the sender fails mid-body", async () => {
    const s = source(kind, split(utf8(TEXT), 10), { failAfter: 5 });
    await expect(readBounded(s.stream, { maxBytes: 1 << 20 })).rejects.toThrow();
  });

  it("discardBounded consumes a stream within its allowance and cancels one beyond it", async () => {
    const small = source(kind, Array.from({ length: 20 }, () => new Uint8Array(100)));
    expect(await discardBounded(small.stream, 10_000)).toBe(true);
    expect(small.delivered()).toBe(20);
    const big = source(kind, Array.from({ length: 1000 }, () => new Uint8Array(100)));
    expect(await discardBounded(big.stream, 5000)).toBe(false);
    await expect.poll(() => big.cancelled()).toBe(true);
    // A failing stream is as consumed as it gets: no rejection.
    expect(await discardBounded(source(kind, [new Uint8Array(5)], { failAfter: 1 }).stream, 10_000)).toBe(false);
  });
});

describe("readBounded over runtime bodies", () => {
  it("reads a Response body and a Request body", async () => {
    const r = await readBounded(new Response(TEXT).body!, { maxBytes: 1 << 20 });
    expect(decodeUtf8Strict(r.bytes)).toBe(TEXT);
    const req = new Request("http://x/", { method: "POST", body: TEXT });
    const q = await readBounded(req.body!, { maxBytes: 100, expectedBytes: 10 });
    expect(q.overflowed).toBe(true);
    expect(q.bytes.byteLength).toBe(100);
  });

  it("never trusts the announced size beyond sizing the first buffer", async () => {
    const bytes = utf8(TEXT);
    for (const expectedBytes of [0, 1, 10, bytes.byteLength - 1, 1e12, Number.NaN]) {
      const r = await readBounded(source("runtime", split(bytes, 13)).stream, { maxBytes: 1 << 20, expectedBytes });
      expect(decodeUtf8Strict(r.bytes)).toBe(TEXT);
    }
  });
});

describe("UTF-8 decoding", () => {
  it("strict decoding refuses malformed bytes; lenient decoding replaces a cut character", () => {
    const cut = utf8("ok 🙂").subarray(0, 5);
    expect(() => decodeUtf8Strict(cut)).toThrow(TypeError);
    expect(decodeUtf8Lenient(cut)).toBe("ok \uFFFD");
  });
});
