/** A cached lookup that found no row. */
const ABSENT = Symbol("absent");

/**
 * Rows a ledger store has read or written, by key. A ledger object is the only writer of its
 * database, so a row it wrote or read cannot change behind its back: keeping rows saves the hot
 * path its SELECTs. Lookups that found nothing are kept too. Past `maxRows` the cache starts
 * over (old periods and one-off scopes fall out). After a rolled-back transaction, `clear()`:
 * rows remembered during it were never committed.
 */
export class LedgerRowCache {
  readonly #rows = new Map<string, unknown>();
  readonly #maxRows: number;

  constructor(maxRows = 10_000) {
    this.#maxRows = maxRows;
  }

  /** The remembered row, else `load()`'s answer, remembered. */
  get<T>(key: string, load: () => T | undefined): T | undefined {
    const hit = this.#rows.get(key);
    if (hit !== undefined) return hit === ABSENT ? undefined : (hit as T);
    const value = load();
    this.set(key, value);
    return value;
  }

  set(key: string, value: unknown): void {
    if (this.#rows.size >= this.#maxRows) this.#rows.clear();
    this.#rows.set(key, value === undefined ? ABSENT : value);
  }

  clear(): void {
    this.#rows.clear();
  }

  get size(): number {
    return this.#rows.size;
  }
}
