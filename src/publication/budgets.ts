import type { ScopeLimitsConfig } from "../config/budget-schema.ts";
import type { EntrypointConfig, PublicationConfig } from "../config/publication-schema.ts";
import type { Principal } from "./principal.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import { DEFAULT_LEASE_MS, DEFAULT_RETENTION_MS, type ScopeLimits, type ScopeRef } from "../ledger/ledger.ts";
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
  /** Whether responses may carry the remaining budget. */
  readonly exposeBudget: boolean;
}

export interface EntrypointBudget {
  readonly mode: "strict" | "soft";
  readonly defaultMaxOutputTokens: number;
}

/** The publication's budgets, compiled once per publication. */
export interface BudgetPolicy {
  /** Undefined when the caller's tenant does not use the ledger. */
  forPrincipal(principal: Principal, trustedHeaders: ReadonlyMap<string, string>): PrincipalBudget | undefined;
  entrypoint(name: string): EntrypointBudget;
  /** The active price of a model revision; undefined when it has none. */
  price(logicalModel: string, revision: number): Price | undefined;
  /** The one currency of the publication's prices and budgets; undefined when it names none. */
  readonly currency: string | undefined;
  /** Active model revisions without a price (`model@revision`). */
  readonly unpricedModels: readonly string[];
  /** Every tenant that uses the ledger, with its root, stripes and the scopes it declares (admin). */
  tenants(): readonly { readonly id: string; readonly root: string; readonly stripes: number; readonly retentionMs: number; readonly scopes: readonly ScopeRef[] }[];
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

/** Builds the policy; the publication's references were checked when it was loaded. */
export function compileBudgetPolicy(pub: PublicationConfig): BudgetPolicy {
  const keys = new Map<string, { base: readonly ScopeRef[]; exposeBudget: boolean }>();
  const tenants = new Map<string, { id: string; root: string; stripes: number; leaseMs: number; retentionMs: number; endUsers: PublicationConfig["tenants"][number]["endUsers"]; scopes: ScopeRef[] }>();
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
    const declared: ScopeRef[] = [ref(root, t.limits)];
    const teams = new Map(t.teams.map((team) => [team.id, team]));
    for (const team of t.teams) {
      declared.push(ref(scopeName.team(team.id), team.limits));
      for (const p of team.projects) declared.push(ref(scopeName.project(team.id, p.id), p.limits));
    }
    for (const k of t.apiKeys) {
      const path: ScopeRef[] = [declared[0]!];
      if (k.chargeTo !== undefined) {
        const [teamId, projectId] = k.chargeTo.split("/") as [string, string | undefined];
        const team = teams.get(teamId);
        path.push(ref(scopeName.team(teamId), team?.limits));
        if (projectId !== undefined) path.push(ref(scopeName.project(teamId, projectId), team?.projects.find((p) => p.id === projectId)?.limits));
      }
      const keyRef = ref(scopeName.key(k.id), k.limits);
      path.push(keyRef);
      declared.push(keyRef);
      keys.set(`${t.id}\u0000${k.id}`, { base: path, exposeBudget: k.exposeBudget });
    }
    tenants.set(t.id, {
      id: t.id,
      root,
      stripes: t.ledger?.stripes ?? 1,
      leaseMs: t.ledger?.lease ?? DEFAULT_LEASE_MS,
      retentionMs: t.ledger?.retention ?? DEFAULT_RETENTION_MS,
      endUsers: t.endUsers,
      scopes: declared,
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
      const key = keys.get(`${principal.tenantId}\u0000${principal.keyId}`);
      if (!tenant || !key) return undefined;
      let scopes = key.base;
      const eu = tenant.endUsers;
      const user = eu ? trustedHeaders.get(eu.header) : undefined;
      if (eu && user !== undefined && user !== "") {
        if (user.length > MAX_END_USER_LENGTH || !/^[\x21-\x7e]+$/.test(user)) {
          throw new GatewayError("invalid_request", `The header '${eu.header}' must be 1-${MAX_END_USER_LENGTH} printable ASCII characters without spaces.`);
        }
        scopes = [...scopes, ref(scopeName.user(user), eu.limits)];
      }
      return { root: tenant.root, scopes, stripes: tenant.stripes, leaseMs: tenant.leaseMs, retentionMs: tenant.retentionMs, exposeBudget: key.exposeBudget };
    },
    entrypoint(name) {
      const b = entrypoints.get(name);
      return { mode: b?.mode ?? "strict", defaultMaxOutputTokens: b?.defaultMaxOutputTokens ?? 4096 };
    },
    price: (logicalModel, revision) => prices.get(`${logicalModel}\u0000${revision}`),
    currency,
    unpricedModels,
    tenants: () => [...tenants.values()].map((t) => ({ id: t.id, root: t.root, stripes: t.stripes, retentionMs: t.retentionMs, scopes: t.scopes })),
  };
}
