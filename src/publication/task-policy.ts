import type { PublicationConfig } from "../config/publication-schema.ts";
import type { RequiredAttribution, TaskLimitsConfig } from "../config/task-schema.ts";
import type { ScopeLimits, ScopeRef } from "../ledger/ledger.ts";
import type { TaskSharing } from "../tasks/task-binding.ts";

/**
 * A task has no period: its cap holds for its whole life. The ledger counts money per period, so a
 * task's period is one no clock reaches (its window starts at the epoch and never ends).
 */
export const TASK_PERIOD_MS = 2 ** 50;

/** The ledger scope of one task, under its tenant's root (a task id is bound to one tenant). */
export const taskScopeName = (taskId: string): string => `task:${taskId}`;

/** What attribution rules apply to one caller (a key, and the entrypoint it calls, if any). */
export interface CallerTaskPolicy {
  /** `team/project` the key is charged to; "" when it names no project. */
  readonly project: string;
  readonly sharing: TaskSharing;
  /** The key's and the entrypoint's requirements together. */
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

type Compiled = (tenant: string, keyId: string, entrypoint: string | undefined) => CallerTaskPolicy | undefined;
const compiled = new WeakMap<PublicationConfig, Compiled>();

/** The publication's attribution rules, compiled once per publication. Undefined: unknown key. */
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

function compile(pub: PublicationConfig): Compiled {
  const keys = new Map<string, Omit<CallerTaskPolicy, "required"> & { readonly required: readonly RequiredAttribution[] }>();
  for (const t of pub.tenants) {
    const projectCaps = new Map<string, TaskLimitsConfig | undefined>();
    for (const team of t.teams) for (const p of team.projects) projectCaps.set(`${team.id}/${p.id}`, p.taskLimits);
    for (const k of t.apiKeys) {
      const project = k.chargeTo?.includes("/") ? k.chargeTo : "";
      const cfg = projectCaps.get(project) ?? t.governance?.taskDefault;
      keys.set(`${t.id}\u0000${k.id}`, {
        project,
        sharing: t.governance?.taskSharing ?? "project",
        required: k.requireAttribution ?? [],
        endUserHeader: t.endUsers?.header,
        cap: cfg ? taskLimits(cfg) : undefined,
      });
    }
  }
  const entrypoints = new Map(pub.entrypoints.map((e) => [e.name, e.requireAttribution ?? []]));
  return (tenant, keyId, entrypoint) => {
    const k = keys.get(`${tenant}\u0000${keyId}`);
    if (!k) return undefined;
    const required = new Set([...k.required, ...(entrypoint === undefined ? [] : (entrypoints.get(entrypoint) ?? []))]);
    return { ...k, required };
  };
}
