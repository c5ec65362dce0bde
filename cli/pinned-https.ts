import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { request } from "node:https";
import type { TLSSocket } from "node:tls";

/** An answer of {@link pinnedRequest}. */
export interface PinnedAnswer {
  readonly status: number;
  readonly text: string;
}

/**
 * One HTTPS request to a listener this process started, accepted only when it presents the leaf
 * certificate of `certFile`: the CLI talks to its own child, whose chain it may have no CA for.
 * The request (an admin token with it) is written only after the pin matched.
 */
export function pinnedRequest(url: string, certFile: string, init: { method?: string; headers?: Record<string, string>; body?: string; signal?: AbortSignal } = {}): Promise<PinnedAnswer> {
  const pin = new X509Certificate(readFileSync(certFile)).fingerprint256;
  return new Promise((resolve, reject) => {
    // A fresh connection every time (no agent): a kept-alive socket would skip the handshake, and with it the pin check that releases the body.
    const req = request(url, { method: init.method ?? "GET", headers: init.headers, rejectUnauthorized: false, signal: init.signal, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.on("socket", (socket) => {
      socket.once("secureConnect", () => {
        const peer = (socket as TLSSocket).getPeerCertificate();
        if (peer.fingerprint256 !== pin) req.destroy(new Error(`${url} presented a certificate other than the one it was started with`));
        else req.end(init.body);
      });
    });
  });
}
