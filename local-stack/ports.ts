import { createServer } from "node:net";

/** Asks the OS for a free loopback port (bind to 0, read it, close). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** Polls a URL until it answers 2xx or the time runs out. */
export async function waitForHttp(url: string, timeoutMs: number, isAlive: () => boolean = () => true): Promise<void> {
  const until = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < until) {
    if (!isAlive()) throw new Error(`process exited before ${url} answered`);
    try {
      const res = await fetch(url);
      await res.arrayBuffer();
      if (res.ok) return;
      last = new Error(`status ${res.status}`);
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms: ${String(last)}`);
}
