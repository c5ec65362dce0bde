/** Injected timer source, so anything that fires later is testable without real timers. */
export interface Scheduler {
  /**
   * Runs `fn` once, about `delayMs` ms from now (never synchronously). The returned function
   * cancels it; calling it after the timer ran, or twice, is harmless.
   */
  schedule(delayMs: number, fn: () => void): () => void;
}

/** Longest delay handed to `setTimeout` (larger values overflow to 0 in most runtimes). */
const MAX_TIMER_DELAY_MS = 2_147_483_647;

/**
 * The production scheduler (`setTimeout`). Long delays are capped, so a caller that needs an
 * exact time re-arms when it fires early.
 */
export const systemScheduler: Scheduler = {
  schedule(delayMs, fn) {
    const handle = setTimeout(fn, Math.min(Math.max(0, delayMs), MAX_TIMER_DELAY_MS));
    return () => clearTimeout(handle);
  },
};
