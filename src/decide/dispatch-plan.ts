import type { Capability } from "../config/publication-schema.ts";
import type { ProtocolId } from "../protocol/codec.ts";
import type { RequestFeature } from "../protocol/features.ts";

/** A logical model revision the engine chose. Names a pool, never an address, secret or health. */
export interface PlannedModel {
  readonly logicalModel: string;
  readonly revision: number;
  /** BackendSnapshot pool name; the executor resolves it in the pinned snapshot. */
  readonly pool: string;
  /** Capabilities every backend serving this request must have (revision's plus the request's). */
  readonly requires: readonly Capability[];
  /** Request features the revision allows dropping when the backend's protocol lacks them. */
  readonly downgrades: readonly RequestFeature[];
}

/**
 * The engine's logical decision for one request. The executor turns it into physical attempts from
 * the pinned BackendSnapshot; backends can only narrow this plan, never grow it.
 */
export interface DispatchPlan {
  readonly requestId: string;
  /** Publication revision this request pinned. */
  readonly publicationRevision: string;
  readonly entrypoint: string;
  /** Decision rule that matched, or "default". */
  readonly route: string;
  /** Priority tiers: tier 0 first; fallback (when allowed) only walks forward. */
  readonly tiers: readonly (readonly PlannedModel[])[];
  /** Upper bound on upstream attempts for the whole request (retries and fallbacks included). */
  readonly retry: { readonly maxAttempts: number };
  /** One absolute deadline (epoch ms); retries and fallbacks never move it. */
  readonly deadlineAt: number;
  /** Trusted affinity key for the affinity selector. */
  readonly affinityKey?: string | undefined;
  readonly clientProtocol: ProtocolId;
  readonly stream: boolean;
}

const FORBIDDEN_KEYS = new Set(["url", "baseUrl", "address", "host", "secret", "credential", "apiKey", "health"]);

/**
 * Frozen parts of plans (the planned models the decide phase keeps per model revision) already
 * found clean: each is scanned once, not on every request that carries it.
 */
const clean = new WeakSet<object>();

/**
 * Structural check of a plan before it leaves the engine. Returns the problems found (empty when
 * valid). The key scan guards invariant 1 against a future field smuggling physical detail in.
 */
export function validatePlan(plan: DispatchPlan, now: number): string[] {
  const problems: string[] = [];
  if (plan.tiers.length === 0 || plan.tiers.some((t) => t.length === 0)) problems.push("plan has an empty tier");
  if (plan.retry.maxAttempts < 1) problems.push("plan allows no attempt");
  if (!(plan.deadlineAt > now)) problems.push("plan deadline is not in the future");
  // The path is spelled only for a finding: building it for every key was most of the check's cost.
  const path: string[] = ["plan"];
  const scan = (value: unknown): boolean => {
    if (value === null || typeof value !== "object" || clean.has(value)) return true;
    let ok = true;
    for (const k in value) {
      path.push(k);
      if (FORBIDDEN_KEYS.has(k)) {
        problems.push(`plan carries physical detail at ${path.join(".")}`);
        ok = false;
      }
      if (!scan((value as Record<string, unknown>)[k])) ok = false;
      path.pop();
    }
    if (ok && Object.isFrozen(value)) clean.add(value);
    return ok;
  };
  scan(plan);
  return problems;
}
