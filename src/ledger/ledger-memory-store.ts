import {
  LEDGER_DAY_MS,
  type AttemptRecord,
  type AttemptState,
  type AuditRecord,
  type BucketState,
  type LedgerCounter,
  type LedgerMetric,
  type LedgerStore,
  type RefusalCount,
  type RefusalReason,
  type ScopeLimitsView,
  type TopUpRecord,
  type ScopeSpend,
  type UsageRollup,
} from "./ledger-types.ts";

const byId = (a: AttemptRecord, b: AttemptRecord) => (a.attemptId < b.attemptId ? -1 : a.attemptId > b.attemptId ? 1 : 0);
const isFinished = (a: AttemptRecord) => a.state === "settled" || a.state === "released";

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
  readonly #refusals = new Map<string, RefusalCount & { scope: string }>();
  readonly #rollups = new Map<string, UsageRollup>();
  #retention: number | undefined;
  #history: number | undefined;
  #retiredBefore: number | undefined;

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
    return this.#matching((a) => a.state === "held" && a.leaseExpiresAt <= now).slice(0, limit);
  }
  earliestLease(): number | undefined {
    let min: number | undefined;
    for (const a of this.#attempts.values()) if (a.state === "held" && (min === undefined || a.leaseExpiresAt < min)) min = a.leaseExpiresAt;
    return min;
  }
  attemptsInState(state: AttemptState, limit: number, afterAttemptId?: string): AttemptRecord[] {
    return this.#matching((a) => a.state === state && (afterAttemptId === undefined || a.attemptId > afterAttemptId))
      .sort(byId)
      .slice(0, limit);
  }
  attemptsCharging(scope: string, fromMs: number, toMs: number, limit: number): AttemptRecord[] {
    return this.#matching((a) => a.createdAt >= fromMs && a.createdAt < toMs && a.scopes.includes(scope))
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
  getRetention(): number | undefined {
    return this.#retention;
  }
  putRetention(ms: number): void {
    this.#retention = ms;
  }
  addRefusal(scope: string, dayStart: number, reason: RefusalReason): void {
    const key = JSON.stringify([scope, dayStart, reason]);
    this.#refusals.set(key, { scope, dayStart, reason, count: (this.#refusals.get(key)?.count ?? 0) + 1 });
  }
  refusalsOf(scope: string, fromDay: number, toMs: number): RefusalCount[] {
    return [...this.#refusals.values()]
      .filter((r) => r.scope === scope && r.dayStart >= fromDay && r.dayStart < toMs)
      .sort((a, b) => a.dayStart - b.dayStart || (a.reason < b.reason ? -1 : 1))
      .map(({ dayStart, reason, count }) => ({ dayStart, reason, count }));
  }
  finishedBefore(before: number, limit: number): AttemptRecord[] {
    return this.#matching((a) => isFinished(a) && a.createdAt < before).slice(0, limit);
  }
  deleteAttempt(record: AttemptRecord): void {
    this.#attempts.delete(record.attemptId);
  }
  getHistory(): number | undefined {
    return this.#history;
  }
  putHistory(ms: number): void {
    this.#history = ms;
  }
  getRetiredBefore(): number | undefined {
    return this.#retiredBefore;
  }
  putRetiredBefore(ms: number): void {
    this.#retiredBefore = ms;
  }
  addRollup(row: UsageRollup): void {
    const key = JSON.stringify([row.scope, row.dayStart, row.model, row.priceVersion, row.currency]);
    const r = this.#rollups.get(key);
    this.#rollups.set(key, { ...row, attempts: (r?.attempts ?? 0) + row.attempts, settledMicros: (r?.settledMicros ?? 0) + row.settledMicros, settledTokens: (r?.settledTokens ?? 0) + row.settledTokens });
  }
  rollupsOf(scope: string, fromMs: number, toMs: number): UsageRollup[] {
    return [...this.#rollups.values()].filter((r) => r.scope === scope && r.dayStart >= fromMs && r.dayStart < toMs).map((r) => ({ ...r }));
  }
  rollupTotals(fromMs: number, toMs: number): ScopeSpend[] {
    const sums = new Map<string, { scope: string; model: string; currency: string; attempts: number; settledMicros: number; settledTokens: number }>();
    for (const r of this.#rollups.values()) {
      if (r.dayStart < fromMs || r.dayStart >= toMs) continue;
      const k = `${r.scope}\u0000${r.model}\u0000${r.currency}`;
      const s = sums.get(k) ?? { scope: r.scope, model: r.model, currency: r.currency, attempts: 0, settledMicros: 0, settledTokens: 0 };
      s.attempts += r.attempts;
      s.settledMicros += r.settledMicros;
      s.settledTokens += r.settledTokens;
      sums.set(k, s);
    }
    return [...sums.values()];
  }
  hasRollup(scope: string, dayStart: number): boolean {
    return [...this.#rollups.values()].some((r) => r.scope === scope && r.dayStart === dayStart);
  }
  deleteRollupsBefore(before: number, limit: number): number {
    const gone = [...this.#rollups].filter(([, r]) => r.dayStart < before).slice(0, limit);
    for (const [key] of gone) this.#rollups.delete(key);
    return gone.length;
  }
  oldestRollupDay(): number | undefined {
    const days = [...this.#rollups.values()].map((r) => r.dayStart);
    return days.length === 0 ? undefined : Math.min(...days);
  }
  deleteClosedCounters(before: number, limit: number): number {
    const gone = [...this.#counters].filter(([, c]) => c.windowEnd > 0 && c.windowEnd < before && c.held === 0).slice(0, limit);
    for (const [key] of gone) this.#counters.delete(key);
    return gone.length;
  }
  deleteRefusalsBefore(before: number, limit: number): number {
    const gone = [...this.#refusals].filter(([, r]) => r.dayStart < before).slice(0, limit);
    for (const [key] of gone) this.#refusals.delete(key);
    return gone.length;
  }
  oldestRemovable(): number | undefined {
    const times = [
      ...[...this.#attempts.values()].filter(isFinished).map((a) => a.createdAt),
      ...[...this.#counters.values()].filter((c) => c.windowEnd > 0 && c.held === 0).map((c) => c.windowEnd),
      ...[...this.#refusals.values()].map((r) => r.dayStart + LEDGER_DAY_MS),
    ];
    return times.length === 0 ? undefined : Math.min(...times);
  }
  /** Copies of the attempts that match (filtered first: copying is the cost). */
  #matching(ok: (a: AttemptRecord) => boolean): AttemptRecord[] {
    return [...this.#attempts.values()].filter(ok).map((a) => structuredClone(a));
  }
  /** Every attempt record (tests). */
  attempts(): AttemptRecord[] {
    return [...this.#attempts.values()].map((a) => structuredClone(a));
  }
  /** Every request bucket (tests). */
  buckets(): BucketState[] {
    return [...this.#buckets.values()].map((b) => ({ ...b }));
  }
  /** Every usage rollup (tests). */
  rollups(): UsageRollup[] {
    return [...this.#rollups.values()].map((r) => ({ ...r }));
  }
  /**
   * The rows this store would hold in SQLite, by table (tests): the attempt-scope index counts one
   * row per distinct scope an attempt charged.
   */
  rowCounts(): Record<string, number> {
    return {
      limits: this.#limits.size,
      counters: this.#counters.size,
      buckets: this.#buckets.size,
      credits: this.#credits.size,
      topUps: this.#topUps.size,
      attempts: this.#attempts.size,
      attemptScopes: [...this.#attempts.values()].reduce((n, a) => n + new Set(a.scopes).size, 0),
      audit: this.#audit.length,
      refusals: this.#refusals.size,
      rollups: this.#rollups.size,
      settings: [this.#retention, this.#history, this.#retiredBefore].filter((v) => v !== undefined).length,
    };
  }
}
