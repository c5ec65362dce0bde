/**
 * Provider bodies are bounded wherever the provider controls their size: a buffered answer past
 * the limit is `upstream_protocol_error` (bytes counted, not UTF-16 units), an error body is read
 * only as a short prefix, and in both cases the rest is cancelled unread.
 */
import { describe, expect, it } from "vitest";
import { MAX_UPSTREAM_ERROR_BYTES, MAX_UPSTREAM_JSON_BYTES } from "../../../src/invoker/upstream-body.ts";
import { harness, live, okBody, plan, snapshot } from "../support/executor-harness.ts";

/** A provider body produced on demand: `prefix`, then `repeat` copies of `chunk`, then `suffix`. */
function lazyBody(prefix: string, chunk: Uint8Array, repeat: number, suffix: string) {
  let pulled = 0;
  let cancelled = false;
  const enc = new TextEncoder();
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(enc.encode(prefix));
    },
    pull(c) {
      if (pulled < repeat) {
        pulled++;
        c.enqueue(chunk);
      } else {
        c.enqueue(enc.encode(suffix));
        c.close();
      }
    },
    cancel() {
      cancelled = true;
    },
  });
  return { stream, pulled: () => pulled, cancelled: () => cancelled };
}

const MiB = 1024 * 1024;
const PREFIX = '{"id":"chatcmpl-big","model":"x","choices":[{"index":0,"message":{"role":"assistant","content":"';
const SUFFIX = '"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}';

async function run(respond: () => Response) {
  const h = harness(respond);
  const a = plan();
  const snap = await snapshot([{ name: "a", port: 9001 }]);
  const r = await h.executor.execute(a.plan, a.request, { snapshot: snap, clientSignal: live() });
  const result = r.ok ? { ok: true as const, r } : { ok: false as const, error: r.error };
  return { ...h, result, again: () => h.executor.execute(a.plan, a.request, { snapshot: snap, clientSignal: live() }) };
}

describe("buffered provider bodies", () => {
  it("reads an ordinary answer with a small announced length natively, as leniently as Response.text()", async () => {
    // A malformed byte inside a string becomes U+FFFD, as it did with the bounded reader.
    const bytes = new Uint8Array([...new TextEncoder().encode(`${PREFIX}ok `), 0xff, ...new TextEncoder().encode(SUFFIX)]);
    const { result } = await run(() => new Response(bytes, { headers: { "content-type": "application/json", "content-length": String(bytes.byteLength) } }));
    expect(result.ok && result.r.kind === "buffered" && result.r.response.text).toBe("ok \uFFFD");
  });

  it("refuses an ordinary answer with a small announced length that is not JSON", async () => {
    const text = "{not json";
    const { result, attempts } = await run(() => new Response(text, { headers: { "content-type": "application/json", "content-length": String(text.length) } }));
    expect(!result.ok && result.error.code).toBe("upstream_protocol_error");
    expect(attempts[0]).toMatchObject({ outcome: "protocol_error" });
  });

  it("counts bytes: a body under the limit in UTF-16 units but over it in bytes is refused", async () => {
    // 'é' is one UTF-16 unit and two bytes: 17 MiB of them are 34 MiB on the wire, a valid JSON
    // answer that a check on text length would have let through.
    const e = new TextEncoder().encode("é".repeat(MiB / 2));
    const body = lazyBody(PREFIX, e, 34, SUFFIX);
    const { result, attempts } = await run(() => new Response(body.stream, { headers: { "content-type": "application/json" } }));
    expect(result.ok).toBe(false);
    expect(!result.ok && result.error.code).toBe("upstream_protocol_error");
    expect(attempts[0]).toMatchObject({ outcome: "protocol_error", errorCode: "upstream_protocol_error" });
    // Read to just past the limit, then cancelled: never to the end.
    expect(body.cancelled()).toBe(true);
    expect(body.pulled()).toBeLessThanOrEqual(MAX_UPSTREAM_JSON_BYTES / MiB + 2);
  });

  it("refuses a declared length over the limit without reading the body", async () => {
    const body = lazyBody(PREFIX, new Uint8Array(MiB).fill(0x61), 40, SUFFIX);
    const { result, attempts } = await run(
      () => new Response(body.stream, { headers: { "content-type": "application/json", "content-length": String(MAX_UPSTREAM_JSON_BYTES + 1) } }),
    );
    expect(!result.ok && result.error.code).toBe("upstream_protocol_error");
    expect(attempts[0]?.outcome).toBe("protocol_error");
    expect(body.pulled()).toBeLessThanOrEqual(1);
    expect(body.cancelled()).toBe(true);
  });

  it("accepts a large answer within the limit, multi-byte text intact", async () => {
    const e = new TextEncoder().encode("日本🙂".repeat(1000));
    const body = lazyBody(PREFIX, e, 100, SUFFIX);
    const { result } = await run(() => new Response(body.stream, { headers: { "content-type": "application/json" } }));
    expect(result.ok).toBe(true);
    const r = result.ok ? result.r : undefined;
    expect(r?.kind).toBe("buffered");
    if (r?.kind === "buffered") expect(r.response.text).toBe("日本🙂".repeat(100_000));
  });
});

describe("provider error bodies", () => {
  it("are read only as a short prefix and the rest is cancelled; the gateway keeps serving", async () => {
    const body = lazyBody('{"error":{"message":"', new Uint8Array(64 * 1024).fill(0x62), 10_000, '"}}');
    let calls = 0;
    const { result, attempts, again } = await run(() =>
      calls++ === 0 ? new Response(body.stream, { status: 500, headers: { "content-type": "application/json" } }) : okBody(),
    );
    expect(!result.ok && result.error.code).toBe("upstream_error");
    expect(attempts[0]).toMatchObject({ outcome: "upstream_status", status: 500 });
    expect(body.cancelled()).toBe(true);
    // 640 MB offered; a prefix read.
    expect(body.pulled() * 64 * 1024).toBeLessThanOrEqual(MAX_UPSTREAM_ERROR_BYTES + 2 * 64 * 1024);
    const cause = (!result.ok && (result.error.cause as { detail: string })) || { detail: "" };
    expect(cause.detail.startsWith('{"error":{"message":"bbb')).toBe(true);
    expect(cause.detail.length).toBeLessThanOrEqual(2000);
    const next = await again();
    expect(next.ok && next.kind).toBe("buffered");
  });

  it("an error body that fails mid-read still yields the status's error", async () => {
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new TextEncoder().encode('{"error":'));
      },
      pull(c) {
        c.error(new Error("connection reset"));
      },
    });
    const { result, attempts } = await run(() => new Response(stream, { status: 503 }));
    expect(!result.ok && result.error.code).toBe("upstream_overloaded");
    expect(attempts[0]?.outcome).toBe("upstream_status");
  });
});
