import type { Capability } from "../config/publication-schema.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { ProtocolId } from "../protocol/codec.ts";
import type { NeutralRequest } from "../protocol/neutral.ts";
import type { ActiveModel, CompiledEntrypoint, CompiledPublication } from "../publication/compile-publication.ts";
import { decide } from "./decision-rules.ts";
import { validatePlan, type DispatchPlan, type PlannedModel } from "./dispatch-plan.ts";
import { computeFacts, requestCapabilities } from "./request-facts.ts";
import type { SignalSet } from "../signals/signal-set.ts";

/** What the decide phase reads besides the request and its entrypoint. */
export interface DecisionInput {
  readonly requestId: string;
  /** Epoch ms when the request was received; the deadline counts from here. */
  readonly receivedAt: number;
  readonly now: number;
  readonly clientProtocol: ProtocolId;
  /** Only the headers the bootstrap config marks trusted, lower-case names. */
  readonly trustedHeaders: ReadonlyMap<string, string>;
  /** The gateway's own bound on a request's life. */
  readonly requestDeadlineMs: number;
  /** The caller's (or parent request's) absolute deadline: it can only shorten ours. */
  readonly callerDeadlineAt?: number | undefined;
  /**
   * The request's signals, each computed on its first ask (src/signals/). The decision rules of
   * this publication ask for none yet; decisions over signals read them from here.
   */
  readonly signals?: SignalSet | undefined;
}

/**
 * Planned models by active revision and the request's needs: the same few combinations recur on
 * every request, so each is built (and frozen, so the plan check scans it once) only the first time.
 */
const planned = new WeakMap<ActiveModel, Map<string, PlannedModel>>();

function plannedModel(id: string, m: ActiveModel, needs: readonly Capability[]): PlannedModel {
  let byNeeds = planned.get(m);
  if (byNeeds === undefined) planned.set(m, (byNeeds = new Map()));
  const key = needs.join(",");
  let p = byNeeds.get(key);
  if (p === undefined) {
    const requires = Object.freeze([...new Set<Capability>([...m.requires, ...needs])].sort());
    p = Object.freeze({ logicalModel: id, revision: m.revision, pool: m.pool, requires, downgrades: Object.freeze([...m.downgrades]) });
    byNeeds.set(key, p);
  }
  return p;
}

/**
 * The decide phase: decision rules on trusted inputs pick tiers of logical models; each resolves
 * to its active revision. The result is a plan with no address, secret or health in it.
 *
 * @throws GatewayError deadline_exceeded when the deadline passed before the plan was made;
 *   internal_error when the plan fails its own structural check.
 */
export function planRequest(publication: CompiledPublication, ep: CompiledEntrypoint, request: NeutralRequest, input: DecisionInput): DispatchPlan {
  const facts = computeFacts(request, input.trustedHeaders);
  const decision = decide(ep, facts);
  const needs = requestCapabilities(request, facts);
  const tiers: PlannedModel[][] = decision.tiers.map((tier) =>
    tier.flatMap((id) => {
      const m = publication.models.get(id);
      return m ? [plannedModel(id, m, needs)] : [];
    }),
  );
  const plan: DispatchPlan = {
    requestId: input.requestId,
    publicationRevision: publication.revision,
    entrypoint: ep.name,
    route: decision.route,
    tiers: tiers.filter((t) => t.length > 0),
    retry: { maxAttempts: ep.maxAttempts },
    deadlineAt: Math.min(input.receivedAt + input.requestDeadlineMs, input.callerDeadlineAt ?? Number.POSITIVE_INFINITY),
    affinityKey: ep.affinityHeader === undefined ? undefined : input.trustedHeaders.get(ep.affinityHeader),
    clientProtocol: input.clientProtocol,
    stream: request.stream,
  };
  return checkedPlan(plan, input.now);
}

/**
 * The decide phase of an input-only request (embeddings, moderations): the entrypoint's tiers at
 * their active revisions, each needing the capability of the entrypoint's operation. No decision
 * rules: such a request carries no conversation to route on.
 *
 * @throws GatewayError deadline_exceeded when the deadline passed before the plan was made;
 *   internal_error when the plan fails its own structural check.
 */
export function planInputOperation(publication: CompiledPublication, ep: CompiledEntrypoint, input: DecisionInput): DispatchPlan {
  const needs: readonly Capability[] = [ep.operation];
  const tiers: PlannedModel[][] = ep.defaultTiers.map((tier) =>
    tier.flatMap((id) => {
      const m = publication.models.get(id);
      return m ? [plannedModel(id, m, needs)] : [];
    }),
  );
  return checkedPlan({
    requestId: input.requestId,
    publicationRevision: publication.revision,
    entrypoint: ep.name,
    route: "default",
    tiers: tiers.filter((t) => t.length > 0),
    retry: { maxAttempts: ep.maxAttempts },
    deadlineAt: Math.min(input.receivedAt + input.requestDeadlineMs, input.callerDeadlineAt ?? Number.POSITIVE_INFINITY),
    affinityKey: ep.affinityHeader === undefined ? undefined : input.trustedHeaders.get(ep.affinityHeader),
    clientProtocol: input.clientProtocol,
    stream: false,
  }, input.now);
}

/** A plan whose deadline has not passed and which passes its own structural check. */
function checkedPlan(plan: DispatchPlan, now: number): DispatchPlan {
  // The request's life (or its caller's) ran out before it was even planned.
  if (plan.deadlineAt <= now) throw new GatewayError("deadline_exceeded", "The request deadline passed.");
  const problems = validatePlan(plan, now);
  if (problems.length > 0) throw new GatewayError("internal_error", "The gateway could not plan this request.", { cause: problems });
  return plan;
}
