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

/** Polls a URL until it answers 2xx, the time runs out, the process dies or `signal` aborts. */
export async function waitForHttp(url: string, timeoutMs: number, isAlive: () => boolean = () => true, signal?: AbortSignal): Promise<void> {
  const until = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < until) {
    if (signal?.aborted) throw new Error("stopped by a signal before it was ready");
    if (!isAlive()) throw new Error(`process exited before ${url} answered`);
    try {
      // Bounded per poll: a listener that accepts and never answers must not stall the wait.
      const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
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
