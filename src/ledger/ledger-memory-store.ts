import type { AttemptRecord, AttemptState, AuditRecord, BucketState, LedgerCounter, LedgerMetric, LedgerStore, ScopeLimitsView, TopUpRecord } from "./ledger-types.ts";

const byId = (a: AttemptRecord, b: AttemptRecord) => (a.attemptId < b.attemptId ? -1 : a.attemptId > b.attemptId ? 1 : 0);

/**
 * An in-memory {@link LedgerStore} (tests; single-isolate use). Scans instead of indexing: fine for
 * the attempt counts a test makes. Every value is copied in and out, as a real store would.
 */
export class MemoryLedgerStore implements LedgerStore {
  readonly #limits = new Map<string, Omit<ScopeLimitsView, "effective">>();
  readonly #counters = new Map<string, LedgerCounter>();
  readonly #buckets = new Map<string, BucketState>();
  readonly #credits = new Map<string, number>();
  readonly #topUps = new Map<string, TopUpRecord>();
  readonly #attempts = new Map<string, AttemptRecord>();
  readonly #audit: AuditRecord[] = [];

  getLimits(scope: string): Omit<ScopeLimitsView, "effective"> | undefined {
    const l = this.#limits.get(scope);
    return l && structuredClone(l);
  }
  putLimits(scope: string, limits: Omit<ScopeLimitsView, "effective">): void {
    this.#limits.set(scope, structuredClone(limits));
  }
  getCounter(scope: string, metric: LedgerMetric, windowStart: number): LedgerCounter | undefined {
    const c = this.#counters.get(JSON.stringify([scope, metric, windowStart]));
    return c && { ...c };
  }
  putCounter(c: LedgerCounter): void {
    this.#counters.set(JSON.stringify([c.scope, c.metric, c.windowStart]), { ...c });
  }
  countersOf(scope: string): LedgerCounter[] {
    return [...this.#counters.values()].filter((c) => c.scope === scope).map((c) => ({ ...c }));
  }
  getBucket(scope: string): BucketState | undefined {
    const b = this.#buckets.get(scope);
    return b && { ...b };
  }
  putBucket(bucket: BucketState): void {
    this.#buckets.set(bucket.scope, { ...bucket });
  }
  getCredited(scope: string, currency: string): number {
    return this.#credits.get(JSON.stringify([scope, currency])) ?? 0;
  }
  putCredited(scope: string, currency: string, credited: number): void {
    this.#credits.set(JSON.stringify([scope, currency]), credited);
  }
  getTopUp(opId: string): TopUpRecord | undefined {
    const t = this.#topUps.get(opId);
    return t && { ...t };
  }
  putTopUp(record: TopUpRecord): void {
    this.#topUps.set(record.opId, { ...record });
  }
  getAttempt(attemptId: string): AttemptRecord | undefined {
    const a = this.#attempts.get(attemptId);
    return a && structuredClone(a);
  }
  putAttempt(record: AttemptRecord): void {
    this.#attempts.set(record.attemptId, structuredClone(record));
  }
  expiredLeases(now: number, limit: number): AttemptRecord[] {
    return this.attempts()
      .filter((a) => a.state === "held" && a.leaseExpiresAt <= now)
      .slice(0, limit);
  }
  earliestLease(): number | undefined {
    let min: number | undefined;
    for (const a of this.#attempts.values()) if (a.state === "held" && (min === undefined || a.leaseExpiresAt < min)) min = a.leaseExpiresAt;
    return min;
  }
  attemptsInState(state: AttemptState, limit: number, afterAttemptId?: string): AttemptRecord[] {
    return this.attempts()
      .filter((a) => a.state === state && (afterAttemptId === undefined || a.attemptId > afterAttemptId))
      .sort(byId)
      .slice(0, limit);
  }
  attemptsCharging(scope: string, fromMs: number, toMs: number, limit: number): AttemptRecord[] {
    return this.attempts()
      .filter((a) => a.createdAt >= fromMs && a.createdAt < toMs && a.charges.some((c) => c.scope === scope))
      .sort((a, b) => a.createdAt - b.createdAt || byId(a, b))
      .slice(0, limit);
  }
  nextAuditSeq(): number {
    return this.#audit.length + 1;
  }
  putAudit(record: AuditRecord): void {
    this.#audit.push(structuredClone(record));
  }
  auditAfter(afterSeq: number, limit: number): AuditRecord[] {
    return structuredClone(this.#audit.filter((r) => r.seq > afterSeq).slice(0, limit));
  }
  /** Every attempt record (tests). */
  attempts(): AttemptRecord[] {
    return [...this.#attempts.values()].map((a) => structuredClone(a));
  }
  /** Every request bucket (tests). */
  buckets(): BucketState[] {
    return [...this.#buckets.values()].map((b) => ({ ...b }));
  }
}
