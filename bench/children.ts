/**
 * Every process the bench starts is registered here, so one call stops them all: on success, on
 * error, and on SIGINT/SIGTERM. Once stopping has begun no new process may start, a start already
 * in flight is waited for and stopped, and a last-resort `exit` hook SIGKILLs whatever remains.
 */
import type { ChildProcess } from "node:child_process";

export interface Stoppable {
  readonly name: string;
  /** The OS process, when there is one (for the last-resort kill). */
  readonly process?: ChildProcess;
  stop(): Promise<void>;
}

/** Thrown by {@link starting} and {@link register} once the bench is shutting down. */
export class ShuttingDown extends Error {
  override name = "ShuttingDown";
}

const running = new Set<Stoppable>();
const pending = new Set<Promise<unknown>>();
let closing = false;

/** Whether {@link stopAll} has begun. */
export function shuttingDown(): boolean {
  return closing;
}

function killNow(s: Stoppable): void {
  const p = s.process;
  if (p && p.exitCode === null && p.signalCode === null) p.kill("SIGKILL");
}

/** Registers `s` and returns it; during shutdown stops it at once and throws {@link ShuttingDown}. */
export function register<T extends Stoppable>(s: T): T {
  if (closing) {
    killNow(s);
    void s.stop().catch(() => {});
    throw new ShuttingDown(`${s.name} started while the bench was stopping`);
  }
  running.add(s);
  return s;
}

/**
 * Runs `start` (which launches a process and resolves once it is up) and registers the result.
 * The start is remembered while in flight, so a shutdown meanwhile waits for it and stops it.
 */
export function starting<T extends Stoppable>(start: () => Promise<T>): Promise<T> {
  if (closing) return Promise.reject(new ShuttingDown("not starting anything while the bench is stopping"));
  const launched = start();
  pending.add(launched);
  const forget = () => pending.delete(launched);
  launched.then(forget, forget);
  return launched.then((s) => {
    if (!closing) return register(s);
    // stopAll() is waiting for this start and stops it itself.
    throw new ShuttingDown(`${s.name} started while the bench was stopping`);
  });
}

/** Stops one registered child. */
export async function stopOne(s: Stoppable): Promise<void> {
  running.delete(s);
  await s.stop();
}

async function stopWithin(s: Stoppable, timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      killNow(s);
      resolve();
    }, timeoutMs);
  });
  await Promise.race([s.stop().catch(() => killNow(s)), timeout]);
  clearTimeout(timer);
}

/**
 * Stops every registered child (each within `timeoutMs`) after waiting up to 40 s for starts in
 * flight, which are stopped too. Idempotent: later calls share the first one's work.
 */
let stoppingAll: Promise<void> | undefined;
export function stopAll(timeoutMs = 10_000): Promise<void> {
  stoppingAll ??= (async () => {
    closing = true;
    const started: Stoppable[] = [];
    if (pending.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      const limit = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), 40_000)));
      const settled = await Promise.race([Promise.allSettled([...pending]), limit]);
      clearTimeout(timer);
      if (settled !== "timeout") {
        for (const r of settled) if (r.status === "fulfilled") started.push(r.value as Stoppable);
      }
    }
    const all = [...started, ...[...running].reverse()];
    running.clear();
    await Promise.all(all.map((s) => stopWithin(s, timeoutMs)));
  })();
  return stoppingAll;
}

process.on("exit", () => {
  for (const s of running) killNow(s);
});

/** Keeps the last `limit` characters a child wrote, for error reports. */
export function captureOutput(proc: ChildProcess, limit = 16_000): () => string {
  let tail = "";
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString()).slice(-limit);
  };
  proc.stdout?.on("data", keep);
  proc.stderr?.on("data", keep);
  return () => tail;
}
