import type { Clock } from "../../../src/deps/clock.ts";
import type { Rng } from "../../../src/deps/rng.ts";
import type { LoadSignals, SelectableBackend } from "../../../src/traffic/selector.ts";

/** mulberry32: a tiny seeded PRNG, so every statistical assertion is reproducible. */
export function mulberry32(seed: number): Rng {
  let a = seed >>> 0;
  return {
    next() {
      a = (a + 0x6d2b79f5) >>> 0;
      let t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    },
  };
}

/** A clock that only moves when the test says so. */
export class FakeClock implements Clock {
  constructor(private t = 0) {}
  now(): number {
    return this.t;
  }
  advance(ms: number): void {
    this.t += ms;
  }
  set(ms: number): void {
    this.t = ms;
  }
}

/** Load signals set directly by the test (no decay, no freshness), to isolate selector logic. */
export class StaticLoad implements LoadSignals {
  readonly inflight = new Map<string, number>();
  readonly latency = new Map<string, number>();
  inFlight(id: string): number {
    return this.inflight.get(id) ?? 0;
  }
  latencyMs(id: string): number | undefined {
    return this.latency.get(id);
  }
}

export function backends(spec: Record<string, number> | string[]): SelectableBackend[] {
  if (Array.isArray(spec)) return spec.map((id) => ({ id, weight: 1 }));
  return Object.entries(spec).map(([id, weight]) => ({ id, weight }));
}

/** Counts picks per backend id over `n` calls. */
export function tally(n: number, pick: (i: number) => SelectableBackend | undefined): Map<string, number> {
  const counts = new Map<string, number>();
  for (let i = 0; i < n; i++) {
    const b = pick(i);
    if (b === undefined) throw new Error("selector returned undefined for a non-empty list");
    counts.set(b.id, (counts.get(b.id) ?? 0) + 1);
  }
  return counts;
}

/** Pearson chi-square statistic of observed counts against expected shares. */
export function chiSquare(counts: Map<string, number>, expectedShare: Record<string, number>, n: number): number {
  let x2 = 0;
  for (const [id, share] of Object.entries(expectedShare)) {
    const e = share * n;
    const o = counts.get(id) ?? 0;
    x2 += ((o - e) * (o - e)) / e;
  }
  return x2;
}

/**
 * Chi-square critical values at p = 0.001 by degrees of freedom: a correct selector exceeds them
 * with probability 0.1% for a random seed, and the seeds here are fixed.
 */
export const CHI2_P001: Record<number, number> = { 1: 10.83, 2: 13.82, 3: 16.27, 4: 18.47, 5: 20.52, 9: 27.88 };
