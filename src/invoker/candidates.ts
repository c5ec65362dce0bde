import { GatewayError } from "../errors/gateway-error.ts";
import type { DispatchPlan, PlannedModel } from "../decide/dispatch-plan.ts";
import type { BackendCodec, CodecRegistry } from "../protocol/codec.ts";
import type { RequestFeature } from "../protocol/features.ts";
import type { PinnedMember, PinnedSnapshot } from "../snapshot/pinned-snapshot.ts";
import type { SelectableBackend, SelectionContext } from "../traffic/selector.ts";

/** One model's eligible members, with the features each must drop under declared downgrades. */
export interface ModelCandidates {
  readonly model: PlannedModel;
  /** Position in the plan: tier index, then index within the tier. */
  readonly tier: number;
  readonly index: number;
  readonly members: readonly PinnedMember[];
  readonly drops: ReadonlyMap<string, readonly RequestFeature[]>;
}

/** A physical choice for one attempt. */
export interface Choice {
  readonly model: PlannedModel;
  readonly member: PinnedMember;
  /** Features the chosen backend's protocol cannot carry, all allowed by the revision's downgrades. */
  readonly drop: readonly RequestFeature[];
  readonly tier: number;
  readonly index: number;
}

/**
 * Every model of the plan, in priority order, narrowed to members that can serve this request: the
 * protocol has a codec, the backend declares every required capability, and the protocol carries
 * every request feature the revision does not allow dropping. Throws the client-facing reason when
 * NO model has any eligible member (a feature or capability gap, else no backend at all).
 */
export function eligibleCandidates(
  plan: DispatchPlan,
  features: readonly RequestFeature[],
  snapshot: PinnedSnapshot,
  codecs: CodecRegistry,
  /** Whether a protocol can carry this kind of request at all (the operation's wire, for embeddings and moderations). */
  serves: (codec: BackendCodec) => boolean,
): ModelCandidates[] {
  let capabilityGap: string[] | undefined;
  let featureGap: RequestFeature | undefined;
  const out: ModelCandidates[] = [];
  plan.tiers.forEach((tier, t) =>
    tier.forEach((model, i) => {
      const pool = snapshot.pools.get(model.pool);
      if (!pool) return;
      const drops = new Map<string, RequestFeature[]>();
      const members = pool.members.filter((m) => {
        const codec = codecs.backend(m.backend.protocol);
        if (!codec || !serves(codec)) return false;
        const missing = model.requires.filter((c) => !m.backend.capabilities.includes(c));
        if (missing.length > 0) {
          capabilityGap ??= missing;
          return false;
        }
        const uncarried = features.filter((f) => !codec.carries.has(f));
        const refused = uncarried.find((f) => !model.downgrades.includes(f));
        if (refused !== undefined) {
          featureGap ??= refused;
          return false;
        }
        drops.set(m.key, uncarried);
        return true;
      });
      if (members.length > 0) out.push({ model, tier: t, index: i, members, drops });
    }),
  );
  if (out.length > 0) return out;
  if (featureGap !== undefined) {
    const param = codecs.get(plan.clientProtocol)?.paramName(featureGap) ?? featureGap;
    throw new GatewayError("invalid_request", `The model '${plan.entrypoint}' does not support '${param}'.`, { param });
  }
  if (capabilityGap) {
    throw new GatewayError("invalid_request", `The model '${plan.entrypoint}' does not support ${capabilityGap.join(", ")} for this request.`);
  }
  throw new GatewayError("no_backend_available", `No backend is available for the model '${plan.entrypoint}'. Retry later.`, {
    retryAfterSeconds: 1,
  });
}

/** Picks one member with the pool's selector; `undefined` for an empty list. */
export type Pick = (c: ModelCandidates, members: readonly PinnedMember[], ctx: SelectionContext) => PinnedMember | undefined;

/**
 * The next backend to try, after `tried` members failed with known-zero evidence: an untried
 * member of the model last tried; else the next model in plan order (fallback only walks forward
 * through the tiers); else, with nothing untried left, the last model's members again (a
 * known-zero refusal such as a rate limit may clear after the backoff).
 */
export function nextChoice(
  candidates: readonly ModelCandidates[],
  tried: ReadonlySet<string>,
  last: { readonly tier: number; readonly index: number } | undefined,
  pick: Pick,
  ctx: SelectionContext,
): Choice | undefined {
  const choose = (c: ModelCandidates, members: readonly PinnedMember[]): Choice | undefined => {
    const member = pick(c, members, ctx);
    return member && { model: c.model, member, drop: c.drops.get(member.key) ?? [], tier: c.tier, index: c.index };
  };
  const at = last === undefined ? -1 : candidates.findIndex((c) => c.tier === last.tier && c.index === last.index);
  const start = at === -1 ? 0 : at;
  for (let i = start; i < candidates.length; i++) {
    const c = candidates[i]!;
    const untried = c.members.filter((m) => !tried.has(m.key));
    const choice = untried.length > 0 ? choose(c, untried) : undefined;
    if (choice) return choice;
  }
  const current = at === -1 ? undefined : candidates[at];
  return current ? choose(current, current.members) : undefined;
}

/** Adapts a selector's id-based pick to pinned members. */
export function pickWith(select: (c: ModelCandidates, options: readonly SelectableBackend[], ctx: SelectionContext) => SelectableBackend | undefined): Pick {
  return (c, members, ctx) => {
    const picked = select(c, members.map((m) => ({ id: m.key, weight: m.weight })), ctx);
    return picked && members.find((m) => m.key === picked.id);
  };
}
