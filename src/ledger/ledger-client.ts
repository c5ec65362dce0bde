import type { LedgerAmount, LedgerCounter, ReleaseResult, ReserveResult, ScopeBalance, ScopeLimits, ScopePath, SettleResult } from "./ledger.ts";

/** What a reservation asks for; the ledger object adds its own clock. */
export interface ReserveArgs {
  readonly scopes: ScopePath;
  readonly currency: string;
  readonly amount: LedgerAmount;
  readonly leaseMs?: number;
}

/**
 * One financial root's ledger, as the BudgetLedger Durable Object serves it over RPC (one object
 * per tenant, addressed by name). The object uses its own clock for every decision. An invalid
 * argument is rejected with a RangeError.
 */
export interface BudgetLedgerRpc {
  setLimits(scope: string, limits: ScopeLimits): Promise<void>;
  reserve(attemptId: string, args: ReserveArgs): Promise<ReserveResult>;
  settle(attemptId: string, actual: LedgerAmount | "unknown"): Promise<SettleResult>;
  release(attemptId: string): Promise<ReleaseResult>;
  balance(scope: string): Promise<ScopeBalance>;
  usage(scope: string): Promise<LedgerCounter[]>;
}

/** All tenants' ledgers: what the request path talks to. Attempts are routed by their root scope. */
export interface BudgetLedgerClient {
  reserve(attemptId: string, args: ReserveArgs): Promise<ReserveResult>;
  /** `root` is the attempt's root scope (`scopes[0]` of its reservation). */
  settle(root: string, attemptId: string, actual: LedgerAmount | "unknown"): Promise<SettleResult>;
  release(root: string, attemptId: string): Promise<ReleaseResult>;
  balance(root: string, scope: string): Promise<ScopeBalance>;
}

/**
 * A {@link BudgetLedgerClient} over per-root RPC objects. `objectFor` is called on every call,
 * because a Durable Object stub is an I/O object bound to the request that made it (in the Worker:
 * `(root) => env.BUDGET_LEDGER.getByName(root)`).
 */
export function budgetLedgerClient(objectFor: (root: string) => BudgetLedgerRpc): BudgetLedgerClient {
  return {
    reserve: async (attemptId, args) => {
      const root = args?.scopes?.[0];
      if (typeof root !== "string" || root.length === 0) throw new RangeError("scopes must name a root scope first");
      return await objectFor(root).reserve(attemptId, { scopes: [...args.scopes], currency: args.currency, amount: { micros: args.amount.micros, tokens: args.amount.tokens }, ...(args.leaseMs !== undefined ? { leaseMs: args.leaseMs } : {}) });
    },
    settle: async (root, attemptId, actual) => await objectFor(root).settle(attemptId, actual === "unknown" ? actual : { micros: actual.micros, tokens: actual.tokens }),
    release: async (root, attemptId) => await objectFor(root).release(attemptId),
    balance: async (root, scope) => await objectFor(root).balance(scope),
  };
}
