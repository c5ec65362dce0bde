/** Injected time source, so every timed decision is testable with a fake clock. */
export interface Clock {
  /** Milliseconds on a monotonic-enough wall clock (`Date.now()` in production). */
  now(): number;
}

/** The production clock. */
export const systemClock: Clock = { now: () => Date.now() };
