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

/** A listener address as the config and the CLI flags give it (an IPv6 host in brackets). */
export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

/**
 * Why `address` cannot be bound now (`EADDRINUSE`, `EACCES`, `EADDRNOTAVAIL` …), or undefined
 * when it can: a trial listen, closed at once. Another process may still take the port before
 * the real listener binds it, so a failed start checks again to say which port it was.
 */
export function bindProblem(address: ListenAddress): Promise<string | undefined> {
  const host = address.host.replace(/^\[(.*)\]$/, "$1");
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    srv.listen({ host, port: address.port, exclusive: true }, () => srv.close(() => resolve(undefined)));
  });
}

/** Plain words for the errors a trial listen meets. */
const BIND_PROBLEMS: Readonly<Record<string, string>> = {
  EADDRINUSE: "is already in use by another process",
  EACCES: "needs privileges this process does not have",
  EADDRNOTAVAIL: "is not an address of this machine",
};

/**
 * One line per listener that cannot be bound, naming it and its port; empty when all can. The
 * listeners are checked one after another, so two names for one address report it once each.
 */
export async function bindProblems(listeners: Readonly<Record<string, ListenAddress | undefined>>): Promise<string[]> {
  const problems: string[] = [];
  for (const [name, address] of Object.entries(listeners)) {
    if (address === undefined) continue;
    const problem = await bindProblem(address);
    if (problem !== undefined) problems.push(`the ${name} listener's port ${address.port} (${address.host}:${address.port}) ${BIND_PROBLEMS[problem] ?? `cannot be bound: ${problem}`}`);
  }
  return problems;
}
