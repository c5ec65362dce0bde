/** Injected time source, so every timed decision is testable with a fake clock. */
export interface Clock {
  /** Milliseconds on a monotonic-enough wall clock (`Date.now()` in production). */
  now(): number;
}

/** Injected randomness, so every random decision is testable with a seeded generator. */
export interface Rng {
  /** A float in [0, 1). */
  next(): number;
}

/** The production clock. */
export const systemClock: Clock = { now: () => Date.now() };

/** The production RNG. */
export const systemRng: Rng = { next: () => Math.random() };
