/**
 * The isolate's side of budget leases (the ledger's side is `ledger-leases.ts`): a
 * {@link BudgetLedgerClient} that admits most attempts from slices it holds, with no ledger call,
 * and reports them in batches.
 *
 * - **Per path** (the scope names and limits of a reservation) the isolate keeps the leases it
 *   holds. An attempt whose worst case fits what is left of one is admitted at once. One that
 *   fits none asks the ledger for a new lease and is admitted from it, or — near a limit, when the
 *   ledger answers with the attempt's own reservation — goes one by one like without leases.
 *   While a lease is being fetched, other attempts of the path wait for it (workerd runs each
 *   waiter's continuation in its own request), then reserve one by one if it has no room for
 *   them; the waiters count towards the size of the next lease.
 * - **Slice size adapts**: a new lease asks for room for twice the path's peak of attempts in
 *   flight during the last lease (at least {@link MIN_SLICES}), and a new one is fetched in the
 *   background when what is left falls below a quarter of the grant.
 * - **Settlements** are queued per ledger object and written by one `settleBatch` per batch:
 *   after at most `flushDelayMs` (100 ms), or at once when `maxBatch` are queued. `settle`
 *   answers `queued` at once; the ledger's answer goes to the caller's `report` callback, called
 *   from the request that writes the batch (resolving each caller's promise from there would
 *   cross request contexts). The request that arms a queue's timer keeps the isolate alive until
 *   the batch is written. A batch whose call fails is retried whole, in order; every item is
 *   idempotent by its id, so a retry changes nothing already changed.
 * - **Leases are closed** (what is left returned, with unused request tokens) in the same queue
 *   after their last attempt's report: when they stop admitting (`admitMs`, or the end of a
 *   budget window), when the path has been idle for `idleMs`, on `settleNow` and on drain.
 */
import type { Clock } from "../deps/clock.ts";
import type { Scheduler } from "../deps/scheduler.ts";
import type { BudgetLedgerClient, BudgetLedgerRpc, LedgerHandle, QueuedSettlement, ReserveArgs, SettleOptions } from "./ledger-client.ts";
import { hash, stripeObjectName, stripeScopes } from "./ledger-client.ts";
import type { LeaseGrant, LeaseUse, LedgerAmount, LimitRemaining, ReleaseResult, ReserveResult, SettleDetail, SettleResult, SettlementItem } from "./ledger-types.ts";
import { MAX_LEASE_SLICES } from "./ledger-types.ts";

/** How long a path the ledger found near a limit reserves one by one before it asks for a lease again. */
const NEAR_LIMIT_BACKOFF_MS = 1_000;

/** The smallest slice asked for, in worst cases. */
export const MIN_SLICES = 4;

/** Options of {@link LeasingLedgerClient}. */
export interface LeasingOptions {
  readonly clock: Clock;
  readonly scheduler: Scheduler;
  /** Lease ids: unique across isolates and restarts. */
  readonly newId: () => string;
  /** The stripe count of a root (as for the plain client). */
  readonly stripes: (root: string) => number;
  /** Longest a settlement waits in its queue, ms. */
  readonly flushDelayMs?: number;
  /** A queue this long is written at once. */
  readonly maxBatch?: number;
  /** How long a lease admits attempts, ms. */
  readonly admitMs?: number;
  /** A path with nothing in flight for this long returns its leases, ms. */
  readonly idleMs?: number;
  /** Tries of a batch before its items fail to their callers. */
  readonly batchTries?: number;
  readonly log?: (event: Readonly<Record<string, unknown>>) => void;
}

/** What the leasing client reports about itself (admin status). */
export interface LeasingStats {
  readonly leases: number;
  readonly inFlight: number;
  readonly queued: number;
}

type Report = NonNullable<SettleOptions["report"]>;

interface Waiter {
  readonly item: SettlementItem;
  readonly report: Report | undefined;
}

/** A lease this isolate holds. */
class HeldLease {
  readonly grant: LeaseGrant;
  readonly object: string;
  readonly path: PathLeases;
  available: LedgerAmount;
  /** Request tokens left; Infinity when no scope on the path limits requests. */
  requestsLeft: number;
  open = 0;
  closing = false;

  constructor(grant: LeaseGrant, object: string, path: PathLeases) {
    this.grant = grant;
    this.object = object;
    this.path = path;
    this.available = grant.amount;
    this.requestsLeft = grant.requests < 0 ? Infinity : grant.requests;
  }

  admits(now: number): boolean {
    return !this.closing && now < this.grant.admitUntil;
  }

  fits(w: LedgerAmount, counts: boolean): boolean {
    return this.available.micros >= w.micros && this.available.tokens >= w.tokens && (!counts || this.requestsLeft >= 1);
  }

  /** Less than a quarter of the grant is left on some dimension. */
  low(): boolean {
    const g = this.grant.amount;
    return this.available.micros * 4 < g.micros || this.available.tokens * 4 < g.tokens || this.requestsLeft * 4 < Math.max(0, this.grant.requests);
  }

  /**
   * Whether what is gone from the slice went mostly to settled spending rather than to the worst
   * cases of the attempts still in flight (each about `w`): at least half of the grant spent.
   */
  spendingDriven(w: LedgerAmount): boolean {
    const g = this.grant.amount;
    const spentMicros = g.micros - this.available.micros - this.open * w.micros;
    const spentTokens = g.tokens - this.available.tokens - this.open * w.tokens;
    const spentRequests = this.grant.requests < 0 ? 0 : this.grant.requests - this.requestsLeft - this.open;
    return (g.micros > 0 && spentMicros * 2 >= g.micros) || (g.tokens > 0 && spentTokens * 2 >= g.tokens) || (this.grant.requests > 0 && spentRequests * 2 >= this.grant.requests);
  }

  /** What remains on each limit if the rest of this slice went back: the grant's figures plus it. */
  remaining(): LimitRemaining[] {
    return this.grant.remaining.map((r) => ({
      ...r,
      remaining: r.remaining + (r.metric === "requests" ? (Number.isFinite(this.requestsLeft) ? this.requestsLeft : 0) : r.metric === "tokens" ? Math.max(0, this.available.tokens) : Math.max(0, this.available.micros)),
    }));
  }
}

/** The leases of one path, and what sizes the next one. */
class PathLeases {
  readonly key: string;
  leases: HeldLease[] = [];
  /** Settles when the lease being fetched for the path has arrived (or did not come). */
  fetch: Promise<void> | undefined;
  /** Attempts waiting for that lease. */
  waiting = 0;
  /** Attempts of the path in flight (from leases and one by one). */
  open = 0;
  peakOpen = 0;
  lastActive = 0;
  /** Until when the ledger said the path is near a limit (no lease is asked for meanwhile). */
  nearLimitUntil = 0;
  /** Worst cases a slice adds for what the path spends while it lives: doubled when one runs low. */
  extra = 0;

  constructor(key: string) {
    this.key = key;
  }

  slices(): number {
    return Math.min(MAX_LEASE_SLICES, Math.max(MIN_SLICES, 2 * (this.peakOpen + this.waiting) + 2 + this.extra));
  }
}

interface OpenAttempt {
  readonly lease: HeldLease;
  readonly use: LeaseUse;
  /** The admitting request's keep-alive, for the idle check its end may start. */
  readonly keepAlive: ((p: Promise<unknown>) => void) | undefined;
}

const TEXT_OF_PATH = new WeakMap<readonly unknown[], string>();

/** The path's identity: scope names and configured limits, and the currency. */
function pathKeyOf(args: ReserveArgs): string {
  let k = TEXT_OF_PATH.get(args.scopes);
  if (k === undefined) TEXT_OF_PATH.set(args.scopes, (k = JSON.stringify(args.scopes)));
  return `${args.currency} ${k}`;
}


/** A {@link BudgetLedgerClient} that leases (see the module comment); everything else is the plain client's. */
export class LeasingLedgerClient implements BudgetLedgerClient {
  readonly #plain: BudgetLedgerClient;
  readonly #objectFor: (name: string) => BudgetLedgerRpc;
  readonly #o: Required<Omit<LeasingOptions, "log">> & Pick<LeasingOptions, "log">;
  readonly #paths = new Map<string, PathLeases>();
  readonly #open = new Map<string, OpenAttempt>();
  readonly #queues = new Map<string, Waiter[]>();
  /** When each queue's flush timer was armed. */
  readonly #armed = new Map<string, number>();
  /** When the isolate's one idle timer is due; undefined while none is armed. */
  #idleDue: number | undefined;
  #draining = false;

  constructor(plain: BudgetLedgerClient, objectFor: (name: string) => BudgetLedgerRpc, options: LeasingOptions) {
    this.#plain = plain;
    this.#objectFor = objectFor;
    this.#o = { flushDelayMs: 100, maxBatch: 256, admitMs: 30_000, idleMs: 1_000, batchTries: 3, ...options };
  }

  stats(): LeasingStats {
    let leases = 0;
    for (const p of this.#paths.values()) leases += p.leases.length;
    let queued = 0;
    for (const q of this.#queues.values()) queued += q.length;
    return { leases, inFlight: this.#open.size, queued };
  }

  async reserve(attemptId: string, args: ReserveArgs, keepAlive?: (p: Promise<unknown>) => void): Promise<{ readonly result: ReserveResult; readonly handle: LedgerHandle }> {
    const root = args?.scopes?.[0]?.name;
    // Malformed arguments, and everything while draining, take the plain path, which answers them.
    if (typeof root !== "string" || this.#draining) return await this.#plain.reserve(attemptId, args);
    const now = this.#o.clock.now();
    const path = this.#pathOf(args);
    path.lastActive = now;
    // A crowd arriving at once waits for the one lease being fetched (its waiters size the next
    // one), rather than each going to the ledger.
    for (let round = 0; ; round++) {
      const local = this.#admit(path, attemptId, args, this.#o.clock.now(), keepAlive);
      if (local) return local;
      if (path.fetch === undefined || round >= 2) break;
      path.waiting++;
      try {
        await path.fetch;
      } finally {
        path.waiting--;
      }
    }
    if (path.fetch !== undefined || this.#o.clock.now() < path.nearLimitUntil) return this.#oneByOne(path, attemptId, args, keepAlive);
    let answer;
    const { leaseId, object, stripeArgs } = this.#leaseTarget(root, args);
    const arrived = this.#fetching(path);
    try {
      answer = await this.#objectFor(object).acquire(attemptId, stripeArgs, { leaseId, slices: path.slices(), admitMs: this.#o.admitMs });
    } catch (err) {
      arrived();
      throw err;
    }
    if ("lease" in answer) {
      this.#hold(path, answer.lease, object);
      arrived();
      // The slice holds at least two of this worst case; nothing else ran since it was added.
      return this.#admit(path, attemptId, args, this.#o.clock.now(), keepAlive) ?? (await this.#oneByOne(path, attemptId, args, keepAlive));
    }
    path.nearLimitUntil = this.#o.clock.now() + NEAR_LIMIT_BACKOFF_MS;
    arrived();
    const r = answer.reserved;
    // A striped root tries its other stripes, as the plain client does.
    if (!r.ok && r.reason !== "invalid_argument" && r.reason !== "currency_mismatch" && this.#o.stripes(root) > 1) return this.#oneByOne(path, attemptId, args, keepAlive);
    if (r.ok) this.#track(path);
    return { result: r, handle: { object, path: path.key } };
  }

  async settle(handle: LedgerHandle, attemptId: string, actual: LedgerAmount | "unknown", detail?: SettleDetail, opts?: SettleOptions): Promise<QueuedSettlement> {
    const open = this.#open.get(attemptId);
    if (open) {
      const { lease } = open;
      const w = open.use.amount;
      // The rest of the worst case goes back to the slice: the actual cost (all of it, unknown) stays out.
      if (actual !== "unknown") lease.available = { micros: lease.available.micros + w.micros - actual.micros, tokens: lease.available.tokens + w.tokens - actual.tokens };
    }
    const lease = open?.use ?? handle.lease;
    this.#finish(handle, attemptId, { op: "settle", attemptId, actual, ...(detail ? { detail } : {}), ...(lease ? { lease } : {}) }, open, opts);
    return { ok: true, attemptId, state: "queued" };
  }

  async release(handle: LedgerHandle, attemptId: string, opts?: SettleOptions): Promise<QueuedSettlement> {
    const open = this.#open.get(attemptId);
    if (open) {
      const w = open.use.amount;
      open.lease.available = { micros: open.lease.available.micros + w.micros, tokens: open.lease.available.tokens + w.tokens };
    }
    const lease = open?.use ?? handle.lease;
    this.#finish(handle, attemptId, { op: "release", attemptId, ...(lease ? { lease } : {}) }, open, opts);
    return { ok: true, attemptId, state: "queued" };
  }

  balance(root: string, scope: string) {
    return this.#plain.balance(root, scope);
  }

  topUp(...args: Parameters<BudgetLedgerClient["topUp"]>) {
    return this.#plain.topUp(...args);
  }

  setLimits(...args: Parameters<BudgetLedgerClient["setLimits"]>) {
    return this.#plain.setLimits(...args);
  }

  /**
   * Writes every queued settlement now; with `closeIdle`, first closes every lease with nothing in
   * flight, so the ledger's figures are this isolate's own (admin reads, tests).
   */
  async settleNow(closeIdle: boolean): Promise<void> {
    if (closeIdle) for (const p of this.#paths.values()) for (const l of [...p.leases]) if (l.open === 0) this.#close(l);
    await Promise.all([...this.#queues.keys()].map((object) => this.#flush(object)));
  }

  /**
   * Stops leasing (every reservation goes one by one until `resume`), closes every lease with
   * nothing in flight (the others close after their last attempt) and writes the queues.
   */
  async drain(): Promise<void> {
    this.#draining = true;
    for (const p of this.#paths.values()) for (const l of p.leases) if (l.open > 0) l.closing = true;
    await this.settleNow(true);
  }

  resume(): void {
    this.#draining = false;
  }

  #pathOf(args: ReserveArgs): PathLeases {
    const key = pathKeyOf(args);
    let p = this.#paths.get(key);
    if (p === undefined) this.#paths.set(key, (p = new PathLeases(key)));
    return p;
  }

  #leaseTarget(root: string, args: ReserveArgs): { leaseId: string; object: string; stripeArgs: ReserveArgs } {
    const leaseId = `lease-${this.#o.newId()}`;
    const n = this.#o.stripes(root);
    if (n <= 1) return { leaseId, object: root, stripeArgs: args };
    const i = hash(leaseId) % n;
    return { leaseId, object: stripeObjectName(root, i), stripeArgs: { ...args, scopes: stripeScopes(args.scopes, i, n) } };
  }

  #hold(path: PathLeases, grant: LeaseGrant, object: string): void {
    path.leases.push(new HeldLease(grant, object, path));
    // The next lease is sized by the peak seen while this one lives.
    path.peakOpen = Math.max(path.open, Math.ceil(path.peakOpen / 2));
  }

  /** Admits from a held lease, or undefined when none has room. */
  #admit(path: PathLeases, attemptId: string, args: ReserveArgs, now: number, keepAlive?: (p: Promise<unknown>) => void): { result: ReserveResult; handle: LedgerHandle } | undefined {
    const w = args.amount;
    const counts = args.countsRequest === true;
    let lease: HeldLease | undefined;
    for (const l of path.leases) {
      if (!l.admits(now)) continue;
      if (l.fits(w, counts)) {
        lease = l;
        break;
      }
    }
    if (keepAlive) this.#retire(path, now, keepAlive);
    if (lease === undefined) return undefined;
    lease.available = { micros: lease.available.micros - w.micros, tokens: lease.available.tokens - w.tokens };
    if (counts) lease.requestsLeft -= 1;
    lease.open++;
    this.#track(path);
    const use: LeaseUse = { leaseId: lease.grant.leaseId, amount: { micros: w.micros, tokens: w.tokens }, admittedAt: now, ...(args.meta ? { meta: args.meta } : {}) };
    this.#open.set(attemptId, { lease, use, keepAlive });
    // Running low, and no other lease of the path has room to spare: fetch the next lease in the
    // background, so the path never waits for one. (Without the second condition, a lease kept
    // just above empty by small settlements asked for a new lease on every admission.)
    if (keepAlive && path.fetch === undefined && now >= path.nearLimitUntil && !this.#draining && lease.low() && !path.leases.some((l) => l !== lease && l.admits(now) && !l.low())) {
      // Spending used it up, not attempts in flight: the next slice needs a margin for spending.
      if (lease.spendingDriven(w)) path.extra = Math.min(MAX_LEASE_SLICES, Math.max(MIN_SLICES, path.extra * 2));
      keepAlive(this.#prefetch(path, args));
    }
    return { result: { ok: true, attemptId, leaseExpiresAt: lease.grant.leaseExpiresAt, remaining: lease.remaining() }, handle: { object: lease.object, lease: use } };
  }

  /** Marks a lease fetch for the path as under way; the returned function ends it. */
  #fetching(path: PathLeases): () => void {
    let done!: () => void;
    path.fetch = new Promise<void>((resolve) => (done = resolve));
    return () => {
      path.fetch = undefined;
      done();
    };
  }

  async #prefetch(path: PathLeases, args: ReserveArgs): Promise<void> {
    const arrived = this.#fetching(path);
    const { leaseId, object, stripeArgs } = this.#leaseTarget(args.scopes[0]!.name, args);
    try {
      const r = await this.#objectFor(object).lease(stripeArgs, { leaseId, slices: path.slices(), admitMs: this.#o.admitMs });
      if (r.ok) this.#hold(path, r, object);
      else path.nearLimitUntil = this.#o.clock.now() + NEAR_LIMIT_BACKOFF_MS;
    } catch (err) {
      // The attempts that need room will ask for it themselves.
      this.#o.log?.({ kind: "ledger_lease_failed", error: String(err) });
    } finally {
      arrived();
    }
  }

  /** Closes the path's leases that stopped admitting and have nothing in flight. */
  #retire(path: PathLeases, now: number, keepAlive: (p: Promise<unknown>) => void): void {
    for (const l of [...path.leases]) if (l.open === 0 && !l.admits(now)) keepAlive(this.#close(l));
  }

  async #oneByOne(path: PathLeases, attemptId: string, args: ReserveArgs, keepAlive?: (p: Promise<unknown>) => void): Promise<{ readonly result: ReserveResult; readonly handle: LedgerHandle }> {
    let r = await this.#plain.reserve(attemptId, args);
    if (!r.result.ok && r.result.reason !== "invalid_argument" && this.stats().queued > 0) {
      // Near a limit the room may sit in this isolate's queue (a closed lease, a release not yet
      // written): write it and ask once more.
      await this.settleNow(false);
      r = await this.#plain.reserve(attemptId, args);
    }
    if (r.result.ok) this.#track(path);
    else if (r.result.reason !== "invalid_argument") {
      // A lease this isolate was fetching meanwhile may hold the room the ledger no longer has.
      const local = this.#admit(path, attemptId, args, this.#o.clock.now(), keepAlive);
      if (local) return local;
    }
    return { result: r.result, handle: { ...r.handle, path: path.key } };
  }

  #track(path: PathLeases): void {
    path.open++;
    if (path.open > path.peakOpen) path.peakOpen = path.open;
  }

  #untrack(handle: LedgerHandle): void {
    const p = handle.path === undefined ? undefined : this.#paths.get(handle.path);
    if (p) p.open = Math.max(0, p.open - 1);
  }

  /** Queues an attempt's settlement and does this isolate's own accounting for it, once. */
  #finish(handle: LedgerHandle, attemptId: string, item: SettlementItem, open: OpenAttempt | undefined, opts: SettleOptions | undefined): void {
    this.#enqueue(handle.object, item, opts?.report, opts?.keepAlive);
    if (open === undefined) {
      if (handle.lease === undefined) this.#untrack(handle);
      return;
    }
    // Accounted once: a repeated settle (a caller's retry) only re-sends the item.
    this.#open.delete(attemptId);
    const { lease } = open;
    lease.open--;
    const path = lease.path;
    path.open = Math.max(0, path.open - 1);
    const now = this.#o.clock.now();
    path.lastActive = now;
    if (lease.open === 0 && (lease.closing || !lease.admits(now))) opts?.keepAlive?.(this.#close(lease));
    // The path went idle: one timer for the isolate returns idle leases if nothing comes. A timer
    // long overdue belonged to a request the runtime ended before it fired: armed again.
    if (path.open === 0 && opts?.keepAlive && (this.#idleDue === undefined || now > this.#idleDue + this.#o.idleMs)) opts.keepAlive(this.#idleCheck(now + this.#o.idleMs));
  }

  /**
   * The isolate's one idle timer: at `due`, closes the leases of every path idle for `idleMs`, then
   * waits for the earliest path that went idle meanwhile (its own deadline), until none is left.
   * Paths that go idle while the timer is armed are found by that scan, so admissions and
   * settlements arm nothing more; the scan runs once per deadline, not per request.
   */
  async #idleCheck(due: number): Promise<void> {
    const idleMs = this.#o.idleMs;
    this.#idleDue = due;
    for (let next: number | undefined = due; next !== undefined; ) {
      const at = next;
      await new Promise<void>((resolve) => this.#o.scheduler.schedule(Math.max(0, at - this.#o.clock.now()), resolve));
      // A newer timer took over (this one's request was presumed ended): it does the work.
      if (this.#idleDue !== at) return;
      const now = this.#o.clock.now();
      const closing = new Set<string>();
      next = undefined;
      for (const p of this.#paths.values()) {
        if (p.open > 0) continue;
        if (now - p.lastActive < idleMs) {
          // Idle, not for long enough yet: its own deadline may be the next one.
          if (p.leases.length > 0 && (next === undefined || p.lastActive + idleMs < next)) next = p.lastActive + idleMs;
          continue;
        }
        for (const l of [...p.leases]) {
          this.#close(l);
          closing.add(l.object);
        }
        if (p.leases.length === 0 && p.fetch === undefined) this.#paths.delete(p.key);
      }
      // Before the writes: a path going idle meanwhile is due after `next`, or arms a new timer.
      this.#idleDue = next;
      await Promise.all([...closing].map((o) => this.#flush(o)));
      if (this.#idleDue !== next) return;
    }
  }

  /** Queues a lease's close; the promise settles when it is written (never rejects). */
  #close(lease: HeldLease): Promise<void> {
    const path = lease.path;
    path.leases = path.leases.filter((l) => l !== lease);
    lease.closing = true;
    // Closed with more than three quarters unused: the path needs less for spending.
    if (lease.available.micros * 4 > lease.grant.amount.micros * 3 && lease.available.tokens * 4 > lease.grant.amount.tokens * 3) path.extra = Math.floor(path.extra / 2);
    const unusedRequests = Number.isFinite(lease.requestsLeft) ? Math.max(0, lease.requestsLeft) : 0;
    return new Promise<void>((resolve) => {
      this.#enqueue(lease.object, { op: "close", leaseId: lease.grant.leaseId, unusedRequests }, (r) => {
        // Left to expire: what remains moves to reconciliation, never lost.
        if ("error" in r) this.#o.log?.({ kind: "ledger_lease_close_failed", leaseId: lease.grant.leaseId, error: String(r.error) });
        resolve();
      });
    });
  }

  #enqueue(object: string, item: SettlementItem, report?: Report, keepAlive?: (p: Promise<unknown>) => void): void {
    let q = this.#queues.get(object);
    if (q === undefined) this.#queues.set(object, (q = []));
    q.push({ item, report });
    const now = this.#o.clock.now();
    const armedAt = this.#armed.get(object);
    if (q.length >= this.#o.maxBatch) {
      const written = this.#flush(object);
      keepAlive?.(written);
    } else if (armedAt === undefined || now - armedAt > 10 * this.#o.flushDelayMs + 1_000) {
      // The request that arms the timer keeps the isolate alive until the batch is written. A timer
      // whose request had no keep-alive may never fire: one armed long ago is armed again.
      this.#armed.set(object, now);
      const written = new Promise<void>((resolve) => this.#o.scheduler.schedule(this.#o.flushDelayMs, () => resolve(this.#flush(object))));
      keepAlive?.(written);
    }
  }

  async #flush(object: string): Promise<void> {
    this.#armed.delete(object);
    const batch = this.#queues.get(object);
    if (batch === undefined || batch.length === 0) return;
    this.#queues.delete(object);
    const items = batch.map((w) => w.item);
    for (let i = 1; ; i++) {
      try {
        const results = await this.#objectFor(object).settleBatch(items);
        // Plain calls: each report runs here, in the writing request, and starts no I/O.
        batch.forEach((w, k) => w.report?.(results[k] as SettleResult | ReleaseResult));
        return;
      } catch (err) {
        if (i >= this.#o.batchTries) {
          for (const w of batch) w.report?.({ error: err });
          return;
        }
        await new Promise<void>((resolve) => this.#o.scheduler.schedule(50 * i, resolve));
      }
    }
  }
}
