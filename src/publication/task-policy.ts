import type { PublicationConfig } from "../config/publication-schema.ts";
import type { RequiredAttribution, TaskLimitsConfig } from "../config/task-schema.ts";
import type { ScopeLimits, ScopeRef } from "../ledger/ledger.ts";
import type { TaskSharing } from "../tasks/task-binding.ts";
import type { Principal } from "./principal.ts";

/**
 * A task has no period: its cap holds for its whole life. The ledger counts money per period, so a
 * task's period is one no clock reaches (its window starts at the epoch and never ends).
 */
export const TASK_PERIOD_MS = 2 ** 50;

/** The ledger scope of one task, under its tenant's root (a task id is bound to one tenant). */
export const taskScopeName = (taskId: string): string => `task:${taskId}`;

/** What attribution rules apply to one caller (its principal, and the entrypoint it calls, if any). */
export interface CallerTaskPolicy {
  /** `team/project` the principal is charged to; "" when it names no project. */
  readonly project: string;
  readonly sharing: TaskSharing;
  /** The API key's and the entrypoint's requirements together. */
  readonly required: ReadonlySet<RequiredAttribution>;
  /** The tenant's end-user trusted header, when it keeps per-user budgets. */
  readonly endUserHeader: string | undefined;
  /** The configured cap of each of the caller's tasks, as ledger limits. */
  readonly cap: ScopeLimits | undefined;
}

/** Ledger limits of a task cap. */
export function taskLimits(cfg: TaskLimitsConfig): ScopeLimits {
  return {
    ...(cfg.money ? { money: { currency: cfg.money.currency, limitMicros: cfg.money.limit, periodMs: TASK_PERIOD_MS } } : {}),
    ...(cfg.tokens ? { tokens: { limit: cfg.tokens.limit, windowMs: TASK_PERIOD_MS } } : {}),
  };
}

/**
 * The task scope a reservation adds to its path: the configured cap, lowered (never raised) by the
 * caller's per-request cap in micro-units. Without any cap the scope is still on the path, so the
 * task's spend is counted.
 */
export function taskScope(taskId: string, cap: ScopeLimits | undefined, loweredMicros: number | undefined, currency: string): ScopeRef {
  let limits = cap;
  if (loweredMicros !== undefined) {
    const money = cap?.money;
    limits = { ...cap, money: { currency: money?.currency ?? currency, limitMicros: Math.min(money?.limitMicros ?? loweredMicros, loweredMicros), periodMs: TASK_PERIOD_MS } };
  }
  return limits ? { name: taskScopeName(taskId), limits } : { name: taskScopeName(taskId) };
}

type Compiled = (principal: Principal, entrypoint: string | undefined) => CallerTaskPolicy | undefined;
const compiled = new WeakMap<PublicationConfig, Compiled>();

/**
 * The publication's attribution rules, compiled once per publication. Undefined: a tenant the
 * publication does not have.
 */
export function taskPolicyOf(pub: PublicationConfig): Compiled {
  // A publication is always compiled from a validated config; a partial stand-in (tests) has no rules.
  if (typeof pub !== "object" || pub === null) return () => undefined;
  let c = compiled.get(pub);
  if (!c) {
    c = compile(pub);
    compiled.set(pub, c);
  }
  return c;
}

interface TenantRules {
  readonly sharing: TaskSharing;
  readonly endUserHeader: string | undefined;
  /** The task cap of each `team/project`, and of "" (no project): the project's, else the tenant default. */
  readonly caps: ReadonlyMap<string, ScopeLimits | undefined>;
  readonly taskDefault: ScopeLimits | undefined;
  /** What each configured API key requires; a token caller requires nothing of its own. */
  readonly required: ReadonlyMap<string, readonly RequiredAttribution[]>;
}

function compile(pub: PublicationConfig): Compiled {
  const tenants = new Map<string, TenantRules>();
  for (const t of pub.tenants) {
    const taskDefault = t.governance?.taskDefault ? taskLimits(t.governance.taskDefault) : undefined;
    const caps = new Map<string, ScopeLimits | undefined>();
    for (const team of t.teams) for (const p of team.projects) caps.set(`${team.id}/${p.id}`, p.taskLimits ? taskLimits(p.taskLimits) : taskDefault);
    tenants.set(t.id, {
      sharing: t.governance?.taskSharing ?? "project",
      endUserHeader: t.endUsers?.header,
      caps,
      taskDefault,
      required: new Map(t.apiKeys.map((k) => [k.id, k.requireAttribution ?? []])),
    });
  }
  const entrypoints = new Map(pub.entrypoints.map((e) => [e.name, e.requireAttribution ?? []]));
  return (principal, entrypoint) => {
    const t = tenants.get(principal.tenantId);
    if (!t) return undefined;
    // The principal's charge target, whoever it came from (a key's config, a token's claim).
    const project = principal.chargeTo?.includes("/") ? principal.chargeTo : "";
    const required = new Set([...(t.required.get(principal.keyId) ?? []), ...(entrypoint === undefined ? [] : (entrypoints.get(entrypoint) ?? []))]);
    return { project, sharing: t.sharing, required, endUserHeader: t.endUserHeader, cap: project === "" ? t.taskDefault : (t.caps.get(project) ?? t.taskDefault) };
  };
}
