/**
 * The edges of a request, tried from outside against the running gateway: refusals a client that
 * is still uploading can read, a client that leaves mid-body, and a client that sends its body in
 * tiny chunks next to one that does not.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chunkedWire } from "../../local-stack/chunked-wire.ts";
import { rawExchange, rawSocket, upload, type UploadOutcome } from "./support/raw-http.ts";
import { DEMO_KEY, startStack, type Stack } from "./support/stack.ts";

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  await stack?.stop();
});

const chatUrl = () => `${stack.gateway.publicUrl}/v1/chat/completions`;
const json = { "content-type": "application/json" };
const auth = { authorization: `Bearer ${DEMO_KEY}` };

/** A chat request of about `bytes` bytes: valid JSON, so only the refusal under test applies. */
function chatBody(bytes: number): Buffer {
  return Buffer.from(JSON.stringify({ model: "sluice-chat", messages: [{ role: "user", content: "x".repeat(bytes) }], max_tokens: 4 }));
}

function expectRefusal(outcome: UploadOutcome, status: number, code: string): void {
  // A reset instead of the answer is the bug under test: show it plainly.
  expect(outcome).not.toHaveProperty("error");
  const o = outcome as { status: number; body: string };
  expect(o.status).toBe(status);
  expect((JSON.parse(o.body) as { error: { code: string } }).error.code).toBe(code);
}

describe("a refusal made before the body is read reaches a client still uploading", () => {
  const manyHeaders: Record<string, string> = {};
  for (let i = 0; i < 120; i++) manyHeaders[`x-pad-${i}`] = "1";
  const cases: { name: string; status: number; code: string; path?: string; method?: string; headers: Record<string, string> }[] = [
    { name: "wrong key", status: 401, code: "invalid_api_key", headers: { ...json, authorization: "Bearer sk-wrong" } },
    { name: "missing key", status: 401, code: "missing_api_key", headers: json },
    { name: "wrong content type", status: 415, code: "unsupported_media_type", headers: { ...auth, "content-type": "text/plain" } },
    { name: "too many headers", status: 431, code: "headers_too_large", headers: { ...auth, ...json, ...manyHeaders } },
    { name: "unknown path", status: 404, code: "not_found", path: "/v1/nothing-here", headers: { ...auth, ...json } },
    { name: "wrong method", status: 405, code: "method_not_allowed", method: "PUT", headers: { ...auth, ...json } },
  ];
  const body = chatBody(3 * 1024 * 1024);

  it.each(cases)("$name → $status, with a 3 MiB upload, every time", async (c) => {
    const url = c.path ? `${stack.gateway.publicUrl}${c.path}` : chatUrl();
    for (let i = 0; i < 4; i++) {
      expectRefusal(await upload(url, { method: c.method, headers: c.headers, body }), c.status, c.code);
      expectRefusal(await upload(url, { method: c.method, headers: c.headers, body, chunked: true }), c.status, c.code);
    }
  });

  it("an oversized body is still a readable 413, and the gateway keeps serving", async () => {
    expectRefusal(await upload(chatUrl(), { headers: { ...auth, ...json }, body: chatBody(6 * 1024 * 1024) }), 413, "request_too_large");
    expectRefusal(await upload(chatUrl(), { headers: { ...auth, ...json }, body: chatBody(6 * 1024 * 1024), chunked: true }), 413, "request_too_large");
    const ok = await upload(chatUrl(), { headers: { ...auth, ...json }, body: chatBody(100) });
    expect(ok).toMatchObject({ status: 200 });
  });
});

describe("error messages quote a short prefix of what the client sent", () => {
  const post = (path: string, body: unknown) =>
    fetch(`${stack.gateway.publicUrl}${path}`, { method: "POST", headers: { ...auth, ...json, "anthropic-version": "2023-06-01" }, body: JSON.stringify(body) });
  const small = async (res: Response, status: number) => {
    expect(res.status).toBe(status);
    const text = await res.text();
    expect(text.length).toBeLessThan(1024);
    return text;
  };

  it("a 1 MB model name → a short 404", async () => {
    const text = await small(await post("/v1/chat/completions", { model: "m".repeat(1024 * 1024), messages: [{ role: "user", content: "x" }] }), 404);
    expect(text).toContain("mmmm…");
  });

  it("a 2-million-character role → a short 400, in every protocol", async () => {
    const role = "r".repeat(2_000_000);
    await small(await post("/v1/chat/completions", { model: "sluice-chat", messages: [{ role, content: "x" }] }), 400);
    await small(await post("/v1/responses", { model: "sluice-chat", input: [{ role, content: "x" }] }), 400);
    await small(await post("/v1/messages", { model: "sluice-chat", max_tokens: 5, messages: [{ role, content: "x" }] }), 400);
  });

  it("a 1 MB unknown parameter → a short 400 whose param is cut too", async () => {
    const res = await post("/v1/chat/completions", { model: "sluice-chat", messages: [{ role: "user", content: "x" }], ["k".repeat(1024 * 1024)]: 1 });
    const body = JSON.parse(await small(res, 400)) as { error: { param: string } };
    expect(body.error.param.length).toBeLessThan(100);
  });

  it("a 100 KB unknown path → a short 404", async () => {
    await small(await fetch(`${stack.gateway.publicUrl}/v1/${"p".repeat(100_000)}`), 404);
  });
});

describe("the request head limit workerd enforces", () => {
  /** Status and content type of a GET whose head is exactly `total` bytes, padded in one header. */
  async function headOf(total: number): Promise<{ status: number; type: string; code: string | undefined }> {
    const u = new URL(stack.gateway.publicUrl);
    const base = `GET /v1/models HTTP/1.1\r\nhost: ${u.host}\r\nauthorization: Bearer ${DEMO_KEY}\r\nconnection: close\r\nx-pad: \r\n\r\n`;
    const head = base.replace("x-pad: ", `x-pad: ${"a".repeat(total - base.length)}`);
    expect(head.length).toBe(total);
    const sock = await rawSocket(stack.gateway.publicUrl);
    // The status line and headers are all this needs: resolve on them, whatever the connection does next.
    const answer = await new Promise<string>((resolve) => {
      let a = "";
      sock.on("data", (d) => {
        a += d.toString("latin1");
        if (a.includes("\r\n\r\n")) resolve(a);
      });
      sock.on("close", () => resolve(a));
      sock.write(head);
    });
    sock.destroy();
    return {
      status: Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]),
      type: /\r\ncontent-type: ([^\r]*)/i.exec(answer)?.[1] ?? "",
      code: /\r\nx-sluice-error-code: ([^\r]*)/i.exec(answer)?.[1],
    };
  }

  it("is 131072 bytes: up to it the gateway decides, past it workerd answers alone", async () => {
    // The gateway's own limit (32 KiB by default) refuses in its envelope.
    expect(await headOf(128 * 1024)).toMatchObject({ status: 431, type: "application/json", code: "headers_too_large" });
    // One byte more never reaches the Worker: workerd's plain-text 431.
    const past = await headOf(128 * 1024 + 1);
    expect(past.status).toBe(431);
    expect(past.type).not.toContain("json");
    expect(past.code).toBeUndefined();
  });
});

describe("a client that leaves mid-body", () => {
  it("is logged as a cancellation (client_closed), not as an internal failure", async () => {
    const lines = () => stack.gateway.output().split("\n");
    const cancelledBefore = lines().filter((l) => l.includes('"kind":"request_cancelled"')).length;
    const sock = await rawSocket(chatUrl());
    const u = new URL(chatUrl());
    sock.write(`POST ${u.pathname} HTTP/1.1\r\nhost: ${u.host}\r\nauthorization: Bearer ${DEMO_KEY}\r\ncontent-type: application/json\r\ncontent-length: 1048576\r\n\r\n`);
    sock.write(chatBody(64 * 1024).subarray(0, 64 * 1024));
    sock.destroy();

    await expect.poll(() => lines().filter((l) => l.includes('"kind":"request_cancelled"')).length, { timeout: 10_000 }).toBeGreaterThan(cancelledBefore);
    const line = lines().filter((l) => l.includes('"kind":"request_cancelled"')).at(-1)!;
    expect(JSON.parse(line.slice(line.indexOf("{")))).toMatchObject({ kind: "request_cancelled", code: "client_closed" });
    expect(stack.gateway.output()).not.toContain('"kind":"request_failed"');
  });
});

describe("a client sending its body in tiny chunks", () => {
  it("does not hold up another client's requests", async () => {
    const probe = async () => {
      const started = performance.now();
      const res = await fetch(chatUrl(), { method: "POST", headers: { ...auth, ...json }, body: chatBody(10) });
      await res.arrayBuffer();
      expect(res.status).toBe(200);
      return performance.now() - started;
    };
    for (let i = 0; i < 3; i++) await probe();

    // 1 MiB in 1-byte chunks, all on the wire at once: the fast sender of tiny chunks the fuzz found.
    const u = new URL(chatUrl());
    const head = `POST ${u.pathname} HTTP/1.1\r\nhost: ${u.host}\r\nauthorization: Bearer ${DEMO_KEY}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n`;
    const wire = chunkedWire(chatBody(1024 * 1024), 1);
    const started = performance.now();
    let uploadMs: number | undefined;
    const tiny = rawExchange(chatUrl(), head, wire).then((status) => {
      uploadMs = performance.now() - started;
      return status;
    });
    const during: number[] = [];
    while (uploadMs === undefined) during.push(await probe());
    expect(await tiny).toBe(200);

    // Before the fix one probe waited for the whole upload. Now others are served alongside it:
    // several probes finish while it runs, none waiting anywhere near its whole length.
    expect(during.length).toBeGreaterThanOrEqual(3);
    expect(Math.max(...during)).toBeLessThan(uploadMs! / 2);
  });
});
