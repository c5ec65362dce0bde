import { createServer, type IncomingMessage, type ServerResponse } from "node:http";

/** A test's HTTP server on a free loopback port, its body read whole before `handle` runs. */
export interface LoopbackServer {
  /** `http://127.0.0.1:<port>` */
  readonly origin: string;
  close(): Promise<void>;
}

/** Starts `handle` on a free loopback port; a handler that throws answers 500. */
export async function startLoopbackServer(handle: (req: IncomingMessage, body: Buffer, res: ServerResponse) => Promise<void>): Promise<LoopbackServer> {
  const http = createServer((req, res) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      await handle(req, Buffer.concat(chunks), res);
    })().catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500).end(String(err));
    });
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const addr = http.address();
  const port = typeof addr === "object" && addr ? addr.port : 0;
  return { origin: `http://127.0.0.1:${port}`, close: () => new Promise<void>((resolve) => http.close(() => resolve())) };
}
