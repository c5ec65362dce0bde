/**
 * A minimal Chrome DevTools Protocol client for workerd's V8 inspector, shared by the CPU profile
 * (`bench:profile`) and the heap snapshots (`bench:heap`).
 */
import { BenchError } from "./entry.ts";

/** One inspector session: commands with answers, and events by method. */
export interface Inspector {
  send(method: string, params?: object): Promise<unknown>;
  /** Calls `listener` with the params of every event named `method`; returns a function that stops it. */
  on(method: string, listener: (params: unknown) => void): () => void;
  close(): void;
}

/** A minimal Chrome DevTools Protocol client over Node's WebSocket. */
export async function cdp(url: string): Promise<Inspector> {
  const ws = new WebSocket(url);
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener("open", () => resolve(), { once: true });
    ws.addEventListener("error", () => reject(new BenchError(`could not connect to the inspector at ${url}`)), { once: true });
  });
  let next = 1;
  const waiting = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();
  const listeners = new Map<string, Set<(params: unknown) => void>>();
  ws.addEventListener("message", (ev) => {
    const msg = JSON.parse(String(ev.data)) as { id?: number; method?: string; params?: unknown; result?: unknown; error?: { message: string } };
    if (msg.id === undefined) {
      if (msg.method !== undefined) for (const l of listeners.get(msg.method) ?? []) l(msg.params);
      return;
    }
    const w = waiting.get(msg.id);
    waiting.delete(msg.id);
    if (msg.error) w?.reject(new BenchError(`inspector: ${msg.error.message}`));
    else w?.resolve(msg.result);
  });
  return {
    send(method, params = {}) {
      const id = next++;
      ws.send(JSON.stringify({ id, method, params }));
      return new Promise((resolve, reject) => waiting.set(id, { resolve, reject }));
    },
    on(method, listener) {
      const set = listeners.get(method) ?? new Set();
      listeners.set(method, set);
      set.add(listener);
      return () => set.delete(listener);
    },
    close: () => ws.close(),
  };
}

/** The inspector target of the gateway's Worker (workerd lists one per service). */
export async function inspectorTarget(port: number): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${port}/json/list`);
  const targets = (await res.json()) as { webSocketDebuggerUrl?: string; title?: string; id?: string }[];
  const t = targets.find((x) => x.title === "sluice" || x.id === "sluice") ?? targets[0];
  if (!t?.webSocketDebuggerUrl) throw new BenchError(`workerd's inspector lists no target: ${JSON.stringify(targets)}`);
  return t.webSocketDebuggerUrl;
}
