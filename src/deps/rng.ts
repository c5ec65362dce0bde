/** Injected randomness, so every random decision is testable with a seeded generator. */
export interface Rng {
  /** A float in [0, 1). */
  next(): number;
}

/** The production RNG. */
export const systemRng: Rng = { next: () => Math.random() };
