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
export async function waitForHttp(
  url: string,
  timeoutMs: number,
  isAlive: () => boolean = () => true,
  signal?: AbortSignal,
  /** How one poll asks (an HTTPS listener whose certificate the platform does not trust); fetch by default. */
  get: (url: string, signal: AbortSignal) => Promise<{ readonly status: number }> = async (u, s) => {
    const res = await fetch(u, { signal: s });
    await res.arrayBuffer();
    return res;
  },
): Promise<void> {
  const until = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < until) {
    if (signal?.aborted) throw new Error("stopped by a signal before it was ready");
    if (!isAlive()) throw new Error(`process exited before ${url} answered`);
    try {
      // Bounded per poll: a listener that accepts and never answers must not stall the wait.
      const res = await get(url, AbortSignal.timeout(5_000));
      if (res.status >= 200 && res.status < 300) return;
      last = new Error(`status ${res.status}`);
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms: ${String(last)}`);
}
