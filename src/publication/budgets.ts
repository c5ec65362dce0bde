import type { ScopeLimitsConfig } from "../config/budget-schema.ts";
import type { EntrypointConfig, PublicationConfig } from "../config/publication-schema.ts";
import type { Principal } from "./principal.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import { DEFAULT_HISTORY_MS, DEFAULT_LEASE_MS, DEFAULT_RETENTION_MS, type ScopeLimits, type ScopeRef } from "../ledger/ledger.ts";
import { priceOf, type Price } from "./prices.ts";

/** How one caller's attempts are charged: its tenant's ledger and the scopes on its path. */
export interface PrincipalBudget {
  /** The financial root: the ledger object (or stripe set) holding this tenant's books. */
  readonly root: string;
  /** Root first: tenant, team, project, key, and the end user when the trusted header names one. */
  readonly scopes: readonly ScopeRef[];
  readonly stripes: number;
  readonly leaseMs: number;
  /** How long the tenant's ledger keeps finished attempts and closed periods (ms). */
  readonly retentionMs: number;
  /** How long the tenant's ledger keeps its daily usage rollups (ms). */
  readonly historyMs: number;
  /** Whether responses may carry the remaining budget. */
  readonly exposeBudget: boolean;
}

export interface EntrypointBudget {
  readonly mode: "strict" | "soft";
  readonly defaultMaxOutputTokens: number;
}

/** The publication's budgets, compiled once per publication. */
export interface BudgetPolicy {
  /**
   * The caller's path: its tenant, the team and project of its `chargeTo`, and its key (an API
   * key's configured scope, or a token caller's own). Undefined when its tenant does not use the
   * ledger.
   */
  forPrincipal(principal: Principal, trustedHeaders: ReadonlyMap<string, string>): PrincipalBudget | undefined;
  entrypoint(name: string): EntrypointBudget;
  /** The active price of a model revision; undefined when it has none. */
  price(logicalModel: string, revision: number): Price | undefined;
  /** The one currency of the publication's prices and budgets; undefined when it names none. */
  readonly currency: string | undefined;
  /** Active model revisions without a price (`model@revision`). */
  readonly unpricedModels: readonly string[];
  /** Every tenant that uses the ledger, with its root, stripes and the scopes it declares (admin). */
  tenants(): readonly { readonly id: string; readonly root: string; readonly stripes: number; readonly retentionMs: number; readonly historyMs: number; readonly scopes: readonly ScopeRef[] }[];
}

/** Longest end-user value accepted as a scope name; longer ones are refused, never truncated. */
export const MAX_END_USER_LENGTH = 128;

/** Ledger scope names. They are the caller's own ids, so they can be shown back to the caller. */
export const scopeName = {
  tenant: (id: string) => `tenant:${id}`,
  team: (id: string) => `team:${id}`,
  project: (team: string, id: string) => `project:${team}/${id}`,
  key: (id: string) => `key:${id}`,
  user: (value: string) => `user:${value}`,
};

/** From config units (durations and micro-units already converted by the schema). */
export function ledgerLimits(cfg: ScopeLimitsConfig): ScopeLimits {
  return {
    ...(cfg.money ? { money: { currency: cfg.money.currency, limitMicros: cfg.money.limit, periodMs: cfg.money.period } } : {}),
    ...(cfg.tokens ? { tokens: { limit: cfg.tokens.limit, windowMs: cfg.tokens.window } } : {}),
    ...(cfg.requests ? { requests: { perMinute: cfg.requests.perMinute, burst: cfg.requests.burst } } : {}),
    ...(cfg.balance ? { balance: { currency: cfg.balance.currency } } : {}),
  };
}

const ref = (name: string, limits: ScopeLimitsConfig | undefined): ScopeRef => (limits ? { name, limits: ledgerLimits(limits) } : { name });

/** One tenant that uses the ledger, compiled. */
interface LedgerTenant {
  readonly id: string;
  readonly root: string;
  readonly stripes: number;
  readonly leaseMs: number;
  readonly retentionMs: number;
  readonly historyMs: number;
  readonly endUsers: PublicationConfig["tenants"][number]["endUsers"];
  /** Every scope the tenant declares (admin). */
  readonly scopes: readonly ScopeRef[];
  /** The path above the key: `""` (the tenant alone), each `team` and each `team/project`. */
  readonly charged: ReadonlyMap<string, readonly ScopeRef[]>;
  /** Configured API keys: their own scope (with its limits) and whether they see their budget. */
  readonly keys: ReadonlyMap<string, { readonly ref: ScopeRef; readonly exposeBudget: boolean }>;
}

/** Builds the policy; the publication's references were checked when it was loaded. */
export function compileBudgetPolicy(pub: PublicationConfig): BudgetPolicy {
  const tenants = new Map<string, LedgerTenant>();
  for (const t of pub.tenants) {
    const uses =
      t.ledger !== undefined ||
      t.limits !== undefined ||
      t.endUsers !== undefined ||
      t.governance?.taskDefault !== undefined ||
      t.teams.some((team) => team.limits !== undefined || team.projects.some((p) => p.limits !== undefined || p.taskLimits !== undefined)) ||
      t.apiKeys.some((k) => k.limits !== undefined);
    if (!uses) continue;
    const root = scopeName.tenant(t.id);
    const rootRef = ref(root, t.limits);
    const declared: ScopeRef[] = [rootRef];
    const charged = new Map<string, readonly ScopeRef[]>([["", [rootRef]]]);
    for (const team of t.teams) {
      const teamRef = ref(scopeName.team(team.id), team.limits);
      declared.push(teamRef);
      charged.set(team.id, [rootRef, teamRef]);
      for (const p of team.projects) {
        const projectRef = ref(scopeName.project(team.id, p.id), p.limits);
        declared.push(projectRef);
        charged.set(`${team.id}/${p.id}`, [rootRef, teamRef, projectRef]);
      }
    }
    const keys = new Map<string, { ref: ScopeRef; exposeBudget: boolean }>();
    for (const k of t.apiKeys) {
      const keyRef = ref(scopeName.key(k.id), k.limits);
      declared.push(keyRef);
      keys.set(k.id, { ref: keyRef, exposeBudget: k.exposeBudget });
    }
    tenants.set(t.id, {
      id: t.id,
      root,
      stripes: t.ledger?.stripes ?? 1,
      leaseMs: t.ledger?.lease ?? DEFAULT_LEASE_MS,
      retentionMs: t.ledger?.retention ?? DEFAULT_RETENTION_MS,
      historyMs: t.ledger?.history ?? Math.max(DEFAULT_HISTORY_MS, t.ledger?.retention ?? DEFAULT_RETENTION_MS),
      endUsers: t.endUsers,
      scopes: declared,
      charged,
      keys,
    });
  }

  const entrypoints = new Map<string, EntrypointConfig["budget"]>(pub.entrypoints.map((e) => [e.name, e.budget]));
  const prices = new Map<string, Price>();
  for (const m of pub.models) for (const r of m.revisions) if (r.price) prices.set(`${m.id}\u0000${r.revision}`, priceOf(r.price));
  const unpricedModels = pub.models.filter((m) => !m.revisions.some((r) => r.revision === m.activeRevision && r.price)).map((m) => `${m.id}@${m.activeRevision}`);
  // Load-time checks allow one currency; take it from a price, else from any budget.
  const currency =
    [...prices.values()][0]?.currency ??
    [...tenants.values()].flatMap((t) => [...t.scopes, ...(t.endUsers ? [{ name: "", limits: ledgerLimits(t.endUsers.limits) }] : [])]).map((r) => r.limits?.money?.currency ?? r.limits?.balance?.currency).find((c) => c !== undefined);

  return {
    forPrincipal(principal, trustedHeaders) {
      const tenant = tenants.get(principal.tenantId);
      if (!tenant) return undefined;
      // The same path for an API key and an OAuth token: tenant, then what the principal is
      // charged to, then the caller's own scope (a token's subject has one too, without limits).
      const above = tenant.charged.get(principal.chargeTo ?? "");
      if (!above) {
        // Authentication checks every charge target; one that names nothing must not charge less.
        throw new GatewayError("internal_error", "The gateway could not find the budget this caller is charged to.", { cause: `unknown chargeTo ${principal.chargeTo} in tenant ${tenant.id}` });
      }
      const key = tenant.keys.get(principal.keyId);
      let scopes: readonly ScopeRef[] = [...above, key?.ref ?? { name: scopeName.key(principal.keyId) }];
      const eu = tenant.endUsers;
      const user = eu ? trustedHeaders.get(eu.header) : undefined;
      if (eu && user !== undefined && user !== "") {
        if (user.length > MAX_END_USER_LENGTH || !/^[\x21-\x7e]+$/.test(user)) {
          throw new GatewayError("invalid_request", `The header '${eu.header}' must be 1-${MAX_END_USER_LENGTH} printable ASCII characters without spaces.`);
        }
        scopes = [...scopes, ref(scopeName.user(user), eu.limits)];
      }
      return { root: tenant.root, scopes, stripes: tenant.stripes, leaseMs: tenant.leaseMs, retentionMs: tenant.retentionMs, historyMs: tenant.historyMs, exposeBudget: key?.exposeBudget ?? false };
    },
    entrypoint(name) {
      const b = entrypoints.get(name);
      return { mode: b?.mode ?? "strict", defaultMaxOutputTokens: b?.defaultMaxOutputTokens ?? 4096 };
    },
    price: (logicalModel, revision) => prices.get(`${logicalModel}\u0000${revision}`),
    currency,
    unpricedModels,
    tenants: () => [...tenants.values()].map((t) => ({ id: t.id, root: t.root, stripes: t.stripes, retentionMs: t.retentionMs, historyMs: t.historyMs, scopes: t.scopes })),
  };
}
