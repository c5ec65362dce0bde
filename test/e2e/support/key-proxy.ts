import { createServer, request } from "node:http";

/** A loopback proxy that adds a caller's API key to every request it passes on. */
export interface KeyProxy {
  /** `http://127.0.0.1:<port>` */
  readonly origin: string;
  close(): Promise<void>;
}

/**
 * Clients that cannot send a header of their own (the MCP conformance runner has no option for
 * one) reach the gateway through this: every request goes to `target` unchanged (method, path,
 * headers, Host included, body streamed) with `authorization: Bearer <key>` added, and the answer
 * comes back streamed as it arrives, so SSE passes through as SSE.
 */
export async function startKeyProxy(target: string, key: string): Promise<KeyProxy> {
  const to = new URL(target);
  const http = createServer((req, res) => {
    const upstream = request(
      { host: to.hostname, port: to.port, method: req.method, path: req.url, headers: { ...req.headers, authorization: `Bearer ${key}` } },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on("error", () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    res.on("close", () => upstream.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const addr = http.address();
  const port = typeof addr === "object" && addr ? addr.port : 0;
  return {
    origin: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}
