/** Small statistics helpers shared by the load generator and the orchestrator. */

/** Nearest-rank percentile of an ascending-sorted sample; `NaN` when empty. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

/** Median of a sample (mean of the two middle values for even sizes); `NaN` when empty. */
export function median(values: readonly number[]): number {
  const xs = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (xs.length === 0) return Number.NaN;
  const mid = xs.length >> 1;
  return xs.length % 2 === 1 ? xs[mid]! : (xs[mid - 1]! + xs[mid]!) / 2;
}

/** A growable array of doubles (latency samples) without boxing. */
export class Samples {
  #data = new Float64Array(4096);
  #size = 0;

  push(value: number): void {
    if (this.#size === this.#data.length) {
      const next = new Float64Array(this.#data.length * 2);
      next.set(this.#data);
      this.#data = next;
    }
    this.#data[this.#size++] = value;
  }

  get size(): number {
    return this.#size;
  }

  /** The samples, sorted ascending (a copy). */
  sorted(): Float64Array {
    return this.#data.slice(0, this.#size).sort();
  }
}
