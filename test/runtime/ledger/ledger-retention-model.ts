import { expect } from "vitest";
import { mulberry32 } from "../traffic/helpers.ts";
import {
  BUCKET_UNITS_PER_TOKEN,
  LEDGER_DAY_MS,
  type AuditRecord,
  type BudgetLedgerCore,
  type LedgerAmount,
  type LedgerCounter,
  type RefusalReason,
  type RefusalTally,
  type ScopeBalance,
  type ScopeLimits,
  type ScopeRef,
  type UsageReport,
  type UsageRow,
} from "../../../src/ledger/ledger.ts";

/**
 * Many periods of ledger traffic and an independent model of what the books must say, with
 * retention applied: the model keeps every attempt it ever made and derives from them (not from
 * the ledger) the counters, balances, usage reports, refusal tallies and audit log, then drops what
 * retention drops.
 */

export const DAY = LEDGER_DAY_MS;
export const H6 = 6 * 3_600_000;
export const LEASE = 10 * 60_000;

export const PATHS: readonly (readonly string[])[] = [
  ["org:o", "team:a", "key:a1"],
  ["org:o", "team:a", "key:a2"],
  ["org:o", "team:b", "key:b1"],
];
export const SCOPES = [...new Set(PATHS.flat())];
const CONFIGURED: Readonly<Record<string, ScopeLimits>> = {
  "org:o": { money: { currency: "USD", limitMicros: 420_000, periodMs: DAY } },
  "team:a": { tokens: { limit: 22_000, windowMs: H6 } },
  "team:b": { money: { currency: "USD", limitMicros: 150_000, periodMs: DAY } },
  "key:a2": { requests: { perMinute: 1, burst: 2 } },
  "key:b1": { balance: { currency: "USD" } },
};
/** The scope refs a reservation on `path` passes: every scope with its configured limits. */
export const refsOf = (path: readonly string[]): ScopeRef[] => path.map((name) => (CONFIGURED[name] ? { name, limits: CONFIGURED[name] } : { name }));

const MODELS = [
  ["m1@1", "p1"],
  ["m1@1", "p2"],
  ["m2@3", "p1"],
] as const;
const REASONS = 5;

type State = "held" | "settled" | "pending" | "released";
interface Attempt {
  readonly id: string;
  readonly path: readonly string[];
  readonly amount: LedgerAmount;
  readonly createdAt: number;
  readonly model: string;
  readonly priceVersion: string;
  state: State;
  actual?: LedgerAmount;
  /** Has a settlement (settled, or settled as unknown): a later settle returns it, release conflicts. */
  settled: boolean;
  removed: boolean;
}

const windowOf = (t: number, len: number) => t - (t % len);
const key = (...parts: (string | number)[]) => JSON.stringify(parts);

/** What the scenario needs of the ledger: the core, and a way to run each call atomically. */
export interface ScenarioLedger {
  readonly core: BudgetLedgerCore;
  readonly tx: <T>(fn: () => T) => T;
}

/** The read answers a check compares (sync core or async Durable Object alike). */
export interface LedgerReads {
  balance(scope: string): Promise<ScopeBalance>;
  usage(scope: string): Promise<LedgerCounter[]>;
  usageReport(scope: string, fromMs: number, toMs: number): Promise<UsageReport>;
  refusals(scope: string, fromMs: number, toMs: number): Promise<RefusalTally[]>;
  audit(): Promise<AuditRecord[]>;
}

export class RetentionScenario {
  readonly attempts = new Map<string, Attempt>();
  readonly refusals = new Map<string, number>();
  readonly deletedCounters = new Set<string>();
  readonly audit: [string, string, number, string][] = [];
  readonly credited = new Map<string, number>();
  readonly tally = { reserved: 0, refused: 0, byReason: new Map<string, number>(), resolved: 0, lateSettled: 0, lateReleased: 0 };
  readonly #ledger: ScenarioLedger;
  readonly #r: () => number;
  readonly #overrides = new Map<string, ScopeLimits>();
  readonly #buckets = new Map<string, { units: number; at: number }>();
  readonly #days = new Map<number, Attempt[]>();
  readonly retentionMs: number;
  now: number;
  #seq = 0;

  constructor(ledger: ScenarioLedger, opts: { start: number; retentionMs: number; seed: number }) {
    this.#ledger = ledger;
    this.now = opts.start;
    this.retentionMs = opts.retentionMs;
    // A seeded RNG, so every run replays the same traffic.
    const seeded = mulberry32(opts.seed);
    this.#r = () => seeded.next();
  }

  #int(n: number): number {
    return Math.floor(this.#r() * n);
  }

  #lim(scope: string): ScopeLimits {
    return this.#overrides.get(scope) ?? CONFIGURED[scope] ?? {};
  }

  /** One day of traffic from `dayStart`, skipping reservations inside the `quiet` windows (kept free by the test). */
  day(dayStart: number, dayIndex: number, quiet: readonly { from: number; to: number }[] = []): void {
    const { core, tx } = this.#ledger;
    this.now = dayStart;
    if (dayIndex % 5 === 0) this.#topUp(`top-${dayIndex}`, 300_000);
    if (dayIndex === 20) this.#setOverride("team:b", { money: { currency: "USD", limitMicros: 400_000, periodMs: DAY } });
    if (dayIndex === 40) this.#setOverride("team:b", null);
    for (let i = 0; i < 34; i++) {
      this.now += 1 + this.#int(Math.floor(DAY / 36));
      this.expireLeases(this.now);
      if (quiet.some((q) => this.now >= q.from && this.now < q.to)) continue;
      // Now and then a burst on the rate-limited key, so its bucket refuses some.
      const burst = this.#int(10) === 0 ? 3 : 1;
      for (let b = 0; b < burst; b++) this.#reserve(burst > 1 ? PATHS[1]! : PATHS[this.#int(PATHS.length)]!);
    }
    // Reconciliation of the attempts pending for two days: resolutions (audited), late settlements
    // and releases. One in eight is never reconciled, so pending attempts of every age stay.
    for (const a of [...this.attempts.values()]) {
      if (a.state !== "pending" || a.createdAt > this.now - 2 * DAY || this.stuck(a.id)) continue;
      const actual = { micros: this.#int(a.amount.micros + 1), tokens: this.#int(a.amount.tokens + 1) };
      this.now += 1;
      const move = a.settled ? 0 : this.#int(3);
      if (move === 0) {
        expect(tx(() => core.resolve(a.id, actual, { actor: "ops" }, this.now))).toMatchObject({ ok: true, state: "settled" });
        Object.assign(a, { state: "settled", actual, settled: true });
        this.audit.push(["resolve", "ops", this.now, a.id]);
        this.tally.resolved++;
      } else if (move === 1) {
        expect(tx(() => core.settle(a.id, actual, this.now))).toMatchObject({ ok: true, state: "settled" });
        Object.assign(a, { state: "settled", actual, settled: true });
        this.tally.lateSettled++;
      } else {
        expect(tx(() => core.release(a.id, this.now))).toMatchObject({ ok: true, state: "released" });
        a.state = "released";
        this.tally.lateReleased++;
      }
    }
  }

  /** Pending attempts nobody reconciles. */
  stuck(id: string): boolean {
    return Number(id.slice(-1)) === 7;
  }

  #topUp(opId: string, micros: number): void {
    const { core, tx } = this.#ledger;
    const credited = (this.credited.get("key:b1") ?? 0) + micros;
    expect(tx(() => core.topUp("key:b1", { currency: "USD", micros }, { opId, actor: "billing" }, this.now))).toEqual({ ok: true, opId, credited });
    this.credited.set("key:b1", credited);
    this.audit.push(["top_up", "billing", this.now, "key:b1"]);
  }

  #setOverride(scope: string, limits: ScopeLimits | null): void {
    const { core, tx } = this.#ledger;
    tx(() => core.setLimits(scope, limits, this.now, { actor: "ops" }));
    if (limits) this.#overrides.set(scope, limits);
    else this.#overrides.delete(scope);
    this.audit.push(["set_limits", "ops", this.now, scope]);
  }

  /** The alarm's lease part at `t`: held attempts whose lease ran out become pending (in the ledger too unless told not to). */
  expireLeases(t: number, inLedger = true): void {
    const { core, tx } = this.#ledger;
    if (inLedger) {
      tx(() => {
        while (core.expireLeases(t) > 0);
      });
    }
    for (const a of this.attempts.values()) if (a.state === "held" && a.createdAt + LEASE <= t) a.state = "pending";
  }

  /** Units in a scope's bucket now (the model's own refill). */
  #bucket(scope: string): number {
    const q = this.#lim(scope).requests!;
    const b = this.#buckets.get(scope);
    return Math.min(q.burst * BUCKET_UNITS_PER_TOKEN, b === undefined ? Infinity : b.units + (this.now - b.at) * q.perMinute);
  }

  #used(scope: string, k: "micros" | "tokens", inWindow: (a: Attempt) => boolean, all = false): number {
    let n = 0;
    // Periods and windows are at most a day long: only today's attempts can be in the current one.
    for (const a of all ? this.attempts.values() : (this.#days.get(windowOf(this.now, DAY)) ?? [])) {
      if (!a.path.includes(scope) || !inWindow(a)) continue;
      n += a.state === "held" || a.state === "pending" ? a.amount[k] : a.state === "settled" ? a.actual![k] : 0;
    }
    return n;
  }

  /** The model's own admission decision: the first failure leaf first, else a grant. */
  #decide(path: readonly string[], amount: LedgerAmount, counts: boolean): { scope: string; reason: RefusalReason } | undefined {
    for (const s of [...path].reverse()) {
      const L = this.#lim(s);
      if (L.money && this.#used(s, "micros", (a) => windowOf(a.createdAt, DAY) === windowOf(this.now, DAY)) + amount.micros > L.money.limitMicros) return { scope: s, reason: "money_budget_exceeded" };
      if (L.tokens && this.#used(s, "tokens", (a) => windowOf(a.createdAt, H6) === windowOf(this.now, H6)) + amount.tokens > L.tokens.limit) return { scope: s, reason: "token_limit_exceeded" };
      if (L.balance && this.#used(s, "micros", () => true, true) + amount.micros > (this.credited.get(s) ?? 0)) return { scope: s, reason: "balance_exhausted" };
      if (counts && L.requests && this.#bucket(s) < BUCKET_UNITS_PER_TOKEN) return { scope: s, reason: "request_rate_exceeded" };
    }
    return undefined;
  }

  #reserve(path: readonly string[]): void {
    const { core, tx } = this.#ledger;
    const id = `att-${String(++this.#seq).padStart(6, "0")}`;
    const amount = { micros: 1 + this.#int(50_000), tokens: 1 + this.#int(6_000) };
    const [model, priceVersion] = MODELS[this.#int(MODELS.length)]!;
    const expected = this.#decide(path, amount, true);
    const res = tx(() => core.reserve(id, { scopes: refsOf(path), currency: "USD", amount, now: this.now, leaseMs: LEASE, countsRequest: true, retentionMs: this.retentionMs, meta: { model, priceVersion } }));
    expect(res.ok ? undefined : res).toEqual(expected === undefined ? undefined : expect.objectContaining(expected));
    if (!res.ok) {
      const k = key(expected!.scope, windowOf(this.now, DAY), expected!.reason);
      this.refusals.set(k, (this.refusals.get(k) ?? 0) + 1);
      this.tally.refused++;
      this.tally.byReason.set(expected!.reason, (this.tally.byReason.get(expected!.reason) ?? 0) + 1);
      return;
    }
    this.tally.reserved++;
    for (const s of path) if (this.#lim(s).requests) this.#buckets.set(s, { units: this.#bucket(s) - BUCKET_UNITS_PER_TOKEN, at: this.now });
    const a: Attempt = { id, path, amount, createdAt: this.now, model, priceVersion, state: "held", settled: false, removed: false };
    this.attempts.set(id, a);
    const today = windowOf(this.now, DAY);
    this.#days.set(today, [...(this.#days.get(today) ?? []), a]);
    // Its finalizer, moments later: known usage (sometimes above the worst case), unknown usage, never sent, or nothing (the lease expires).
    const end = this.#int(20);
    this.now += 1 + this.#int(1_000);
    if (end < 12) {
      const f = end === 0 ? 1.25 : this.#r();
      const actual = { micros: Math.floor(amount.micros * f), tokens: Math.floor(amount.tokens * f) };
      expect(tx(() => core.settle(id, actual, this.now))).toMatchObject({ ok: true, state: "settled" });
      Object.assign(a, { state: "settled", actual, settled: true });
    } else if (end < 14) {
      expect(tx(() => core.settle(id, "unknown", this.now))).toMatchObject({ ok: true, state: "pending_reconciliation" });
      Object.assign(a, { state: "pending", settled: true });
    } else if (end < 18) {
      expect(tx(() => core.release(id, this.now))).toMatchObject({ ok: true, state: "released" });
      a.state = "released";
    }
  }

  /** Applies retention as of `t` to the model: what the ledger must have removed once its runs are done. */
  retain(t: number): void {
    const before = t - this.retentionMs;
    for (const a of this.attempts.values()) if ((a.state === "settled" || a.state === "released") && a.createdAt < before) a.removed = true;
    for (const [k, c] of this.counters(true)) if (c.windowEnd > 0 && c.windowEnd < before && c.held === 0) this.deletedCounters.add(k);
    for (const k of this.refusals.keys()) if ((JSON.parse(k) as [string, number])[1] < before - DAY) this.refusals.delete(k);
  }

  /** Every counter the model's attempts booked, by (scope, metric, window); deleted ones left out unless asked. */
  counters(includeDeleted = false): Map<string, LedgerCounter> {
    const out = new Map<string, LedgerCounter>();
    for (const a of this.attempts.values()) {
      for (const scope of a.path) {
        const L = CONFIGURED[scope] ?? {};
        const booked: [LedgerCounter["metric"], number, number, "micros" | "tokens"][] = [
          ["money:USD", L.money ? windowOf(a.createdAt, DAY) : 0, L.money ? DAY : 0, "micros"],
          ["tokens", L.tokens ? windowOf(a.createdAt, H6) : 0, L.tokens ? H6 : 0, "tokens"],
          ...(L.balance ? [["balance:USD", 0, 0, "micros"] as [LedgerCounter["metric"], number, number, "micros"]] : []),
        ];
        for (const [metric, windowStart, len, part] of booked) {
          const k = key(scope, metric, windowStart);
          if (!includeDeleted && this.deletedCounters.has(k)) continue;
          const c = out.get(k) ?? { scope, metric, windowStart, windowEnd: len > 0 ? windowStart + len : 0, spent: 0, held: 0, pending: 0, overrun: 0 };
          const live = a.state === "held" || a.state === "pending" ? a.amount[part] : 0;
          const spent = a.state === "settled" ? a.actual![part] : 0;
          out.set(k, {
            ...c,
            held: c.held + live,
            pending: c.pending + (a.state === "pending" ? a.amount[part] : 0),
            spent: c.spent + spent,
            overrun: c.overrun + (a.state === "settled" ? Math.max(0, spent - a.amount[part]) : 0),
          });
        }
      }
    }
    return out;
  }

  /** The usage report the model expects: every attempt it ever made, removed ones included. */
  usageReport(scope: string, fromMs: number, toMs: number): UsageRow[] {
    const rows = new Map<string, { -readonly [K in keyof UsageRow]: UsageRow[K] }>();
    for (const a of this.attempts.values()) {
      if (!a.path.includes(scope) || a.createdAt < fromMs || a.createdAt >= toMs || a.state === "released") continue;
      const k = JSON.stringify([a.model, a.priceVersion, "USD"]);
      const row = rows.get(k) ?? { model: a.model, priceVersion: a.priceVersion, currency: "USD", attempts: 0, settledMicros: 0, settledTokens: 0, pendingMicros: 0, pendingTokens: 0 };
      row.attempts++;
      if (a.state === "settled") (row.settledMicros += a.actual!.micros), (row.settledTokens += a.actual!.tokens);
      else (row.pendingMicros += a.amount.micros), (row.pendingTokens += a.amount.tokens);
      rows.set(k, row);
    }
    return [...rows.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, r]) => r);
  }

  /** The refusal tallies the model expects of a scope, by day. */
  refusalTallies(scope: string): RefusalTally[] {
    const days = new Map<number, { dayStart: number; dayEnd: number; total: number; byReason: Record<string, number> }>();
    for (const [k, n] of this.refusals) {
      const [s, day, reason] = JSON.parse(k) as [string, number, string];
      if (s !== scope) continue;
      const d = days.get(day) ?? { dayStart: day, dayEnd: day + DAY, total: 0, byReason: {} };
      d.total += n;
      d.byReason[reason] = (d.byReason[reason] ?? 0) + n;
      days.set(day, d);
    }
    return [...days.values()].sort((a, b) => a.dayStart - b.dayStart);
  }

  /** The figures `balance` must show at `t` for the scope's limited metrics (and today's refusals). */
  balanceAt(scope: string, t: number): Record<string, unknown> {
    const L = this.#lim(scope);
    const counters = this.counters();
    const fig = (metric: string, limit: number, len: number) => {
      const windowStart = len > 0 ? windowOf(t, len) : 0;
      const c = counters.get(key(scope, metric, windowStart));
      const [spent, held, pending, overrun] = [c?.spent ?? 0, c?.held ?? 0, c?.pending ?? 0, c?.overrun ?? 0];
      return { metric, limit, windowStart, windowEnd: len > 0 ? windowStart + len : 0, spent, held, pending, overrun, remaining: Math.max(0, limit - spent - held) };
    };
    const today = this.refusalTallies(scope).find((d) => d.dayStart === windowOf(t, DAY));
    return {
      scope,
      limits: L,
      ...(L.money ? { money: fig("money:USD", L.money.limitMicros, DAY) } : {}),
      ...(L.tokens ? { tokens: fig("tokens", L.tokens.limit, H6) } : {}),
      ...(L.balance ? { balance: fig("balance:USD", this.credited.get(scope) ?? 0, 0) } : {}),
      ...(today ? { refusals: today } : {}),
    };
  }

  /** Attempts the ledger must still hold a record of. */
  kept(): Attempt[] {
    return [...this.attempts.values()].filter((a) => !a.removed);
  }

  /**
   * The most rows the books may take at `t` apart from the usage rollups: per scope a limits row,
   * a bucket, a credit and lifetime counters; counters of the windows inside the retention (plus
   * the current one and the ones still holding a pending attempt); refusal tallies of the days
   * inside it; the attempts (and their scope index rows) inside it or held or pending; the audit
   * log and top-ups. None of it grows with the traffic of older periods.
   */
  rowBound(t: number): number {
    const retained = (len: number) => Math.ceil(this.retentionMs / len) + 2;
    let counters = 0;
    for (const s of SCOPES) counters += 3 + (CONFIGURED[s]?.money ? retained(DAY) : 0) + (CONFIGURED[s]?.tokens ? retained(H6) : 0);
    const pending = [...this.attempts.values()].filter((a) => a.state === "pending" || a.state === "held");
    counters += pending.length * 3 * 2;
    const inside = [...this.attempts.values()].filter((a) => a.createdAt >= t - this.retentionMs || a.state === "pending" || a.state === "held").length;
    const topUps = this.audit.filter(([action]) => action === "top_up").length;
    return SCOPES.length * 3 + counters + SCOPES.length * REASONS * retained(DAY) + inside * (1 + 3) + this.audit.length + topUps + 1;
  }

  /** Most usage-rollup rows after `days` days: one per scope, day and model / price version at most. */
  rollupBound(days: number): number {
    return SCOPES.length * MODELS.length * days;
  }

  /**
   * Compares every answer the ledger gives at `t` with the model: balances, usage counters,
   * usage reports over whole UTC days (and any range inside the retention), refusals and the audit.
   */
  async check(reads: LedgerReads, t: number, firstDay: number): Promise<void> {
    for (const s of SCOPES) {
      const b = await reads.balance(s);
      const { requests: _bucket, ...figures } = b;
      expect({ s, figures }).toEqual({ s, figures: this.balanceAt(s, t) });
      const byKey = (cs: LedgerCounter[]) => new Map(cs.map((c) => [key(c.scope, c.metric, c.windowStart), c]));
      expect(byKey(await reads.usage(s))).toEqual(new Map([...this.counters()].filter(([, c]) => c.scope === s)));
      expect(await reads.refusals(s, 0, t + DAY)).toEqual(this.refusalTallies(s));
    }
    const today = windowOf(t, DAY);
    // The first whole day inside the retention: no rollup can cut a range starting in it.
    const inside = windowOf(t - this.retentionMs, DAY) + DAY;
    // Whole days: all history, single old days, spans; and ranges inside the retention with edges anywhere.
    const ranges: [number, number][] = [
      [0, today + DAY],
      [firstDay, firstDay + DAY],
      [firstDay + 3 * DAY, Math.max(firstDay + 3 * DAY, today - 10 * DAY)],
      [Math.max(firstDay, today - 9 * DAY), today],
      [inside + 3 * 3_600_000 + 17, t + 1],
      [inside + 1, inside + DAY + 5_000_001],
    ];
    for (const s of SCOPES) for (const [from, to] of ranges) expect({ s, from, to, r: await reads.usageReport(s, from, to) }).toEqual({ s, from, to, r: { ok: true, rows: this.usageReport(s, from, to) } });
    const audit = (await reads.audit()).map((r) => [r.action, r.actor, r.at, r.scope ?? r.attemptId]);
    expect(audit).toEqual(this.audit);
  }
}
