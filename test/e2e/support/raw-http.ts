import { request } from "node:http";
import { connect, type Socket } from "node:net";

/** What a client that uploads a body got back: the status and body, or the socket error instead. */
export type UploadOutcome = { readonly status: number; readonly body: string } | { readonly error: string };

/**
 * Uploads `body` with node:http (content-length, or chunked when `chunked`) on a fresh connection
 * and reads the whole answer. A reset before the answer is read comes back as `{ error }`.
 */
export function upload(url: string, init: { method?: string; headers: Record<string, string>; body: Buffer; chunked?: boolean }): Promise<UploadOutcome> {
  return new Promise((resolve) => {
    const u = new URL(url);
    const headers: Record<string, string> = { ...init.headers };
    if (!init.chunked) headers["content-length"] = String(init.body.length);
    const req = request({ host: u.hostname, port: u.port, path: `${u.pathname}${u.search}`, method: init.method ?? "POST", headers, agent: false }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
      res.on("error", (e: NodeJS.ErrnoException) => resolve({ error: e.code ?? e.message }));
    });
    req.on("error", (e: NodeJS.ErrnoException) => resolve({ error: e.code ?? e.message }));
    if (init.chunked) {
      // Several writes without a length: node:http frames them as chunks.
      for (let i = 0; i < init.body.length; i += 256 * 1024) req.write(init.body.subarray(i, i + 256 * 1024));
      req.end();
    } else req.end(init.body);
  });
}

/** A raw connection to `url`'s host: for request heads and bodies no HTTP client would send. */
export function rawSocket(url: string): Promise<Socket> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const sock = connect({ host: u.hostname, port: Number(u.port) }, () => resolve(sock));
    sock.setNoDelay(true);
    sock.once("error", reject);
  });
}

/** Writes `head` and `wire` on a raw socket and resolves with the status code of the answer. */
export async function rawExchange(url: string, head: string, wire: Buffer): Promise<number> {
  const sock = await rawSocket(url);
  return new Promise((resolve, reject) => {
    let answer = "";
    sock.on("data", (d) => {
      answer += d.toString("latin1");
      const m = /^HTTP\/1\.1 (\d{3})/.exec(answer);
      if (m && answer.includes("\r\n\r\n")) {
        resolve(Number(m[1]));
        sock.destroy();
      }
    });
    sock.on("error", reject);
    sock.on("close", () => reject(new Error(`closed before an answer: ${JSON.stringify(answer.slice(0, 200))}`)));
    sock.write(head);
    sock.write(wire);
  });
}

/**
 * fetch on a connection of its own, the whole answer read. A pooled keep-alive connection that sat
 * idle for about five seconds is closed by workerd just as a loaded client may reuse it, failing
 * the request with "other side closed" before the gateway saw it; tests that leave the gateway
 * idle between bursts (a race of 64 calls, a CLI command) take a fresh connection each time.
 */
export function freshFetch(url: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Response> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: init.method ?? "GET", headers: init.headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("error", reject);
      res.on("end", () => {
        const headers = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(", ") : v);
        const status = res.statusCode ?? 0;
        resolve(new Response(status === 204 || status === 304 ? null : Buffer.concat(chunks), { status, headers }));
      });
    });
    req.on("error", reject);
    req.end(init.body);
  });
}
