import type { BudgetLedgerRpc } from "../../../src/ledger/ledger-client.ts";
import { MemoryLedgerStore } from "../../../src/ledger/ledger-memory-store.ts";
import { BudgetLedgerCore } from "../../../src/ledger/ledger.ts";
import { LeaseRules } from "../../../src/ledger/ledger-leases.ts";

/**
 * Ledger objects in memory, served like the Durable Object serves them over RPC: arguments and
 * answers are copied (structured clone), every call reads the shared fake clock.
 */
export function memoryLedgers(clock: { now: number }) {
  const cores = new Map<string, BudgetLedgerCore>();
  const leaseRules = new Map<string, LeaseRules>();
  const calls: string[] = [];
  const core = (name: string) => {
    let c = cores.get(name);
    if (c === undefined) {
      const store = new MemoryLedgerStore();
      cores.set(name, (c = new BudgetLedgerCore(store)));
      leaseRules.set(name, new LeaseRules(store, c));
    }
    return c;
  };
  const wire = <T>(v: T): T => (v === undefined ? v : structuredClone(v));
  const objectFor = (name: string): BudgetLedgerRpc => {
    const l = core(name);
    const leases = leaseRules.get(name)!;
    const call = <T>(method: string, fn: () => T): Promise<T> => {
      calls.push(`${name}.${method}`);
      return Promise.resolve().then(() => wire(fn()));
    };
    return {
      setLimits: (scope, limits, by) => call("setLimits", () => l.setLimits(scope, wire(limits), clock.now, wire(by))),
      limits: (scope) => call("limits", () => l.limits(scope)),
      reserve: (id, args) => call("reserve", () => l.reserve(id, { ...wire(args), now: clock.now })),
      acquire: (id, args, ask) => call("acquire", () => leases.acquire(id, { ...wire(args), now: clock.now }, wire(ask))),
      lease: (args, ask) => call("lease", () => leases.lease(ask?.leaseId, { ...wire(args), now: clock.now, slices: ask?.slices, admitMs: ask?.admitMs })),
      settleBatch: (items) => call("settleBatch", () => leases.apply(wire(items), clock.now)),
      settle: (id, actual, detail) => call("settle", () => l.settle(id, wire(actual), clock.now, wire(detail))),
      release: (id) => call("release", () => l.release(id, clock.now)),
      balance: (scope) => call("balance", () => l.balance(scope, clock.now)),
      usage: (scope) => call("usage", () => l.usage(scope)),
      topUp: (scope, amount, by) => call("topUp", () => l.topUp(scope, wire(amount), wire(by), clock.now)),
      attempt: (id) => call("attempt", () => l.attempt(id)),
      attemptsIn: (state, limit, after) => call("attemptsIn", () => l.attemptsIn(state, limit, after)),
      pendingReconciliations: (limit, after) => call("pendingReconciliations", () => l.pendingReconciliations(limit, after)),
      resolve: (id, actual, by) => call("resolve", () => l.resolve(id, wire(actual), wire(by), clock.now)),
      audit: (limit, after) => call("audit", () => l.audit(limit, after)),
      usageReport: (scope, from, to) => call("usageReport", () => l.usageReport(scope, from, to)),
      dailyUsage: (scope, from, to) => call("dailyUsage", () => l.dailyUsage(scope, from, to)),
      spendByScope: (from, to) => call("spendByScope", () => l.spendByScope(from, to)),
      refusals: (scope, from, to) => call("refusals", () => l.refusals(scope, from, to)),
    };
  };
  return { objectFor, core, calls };
}
