import type { Capability } from "../config/publication-schema.ts";
import type { DecisionRecord } from "../context/request-record.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { ProtocolId } from "../protocol/codec.ts";
import type { NeutralRequest } from "../protocol/neutral.ts";
import type { ActiveModel, CompiledDecision, CompiledEntrypoint, CompiledPublication } from "../publication/compile-publication.ts";
import type { SignalSet } from "../signals/signal-set.ts";
import { chooseDecision, type DecisionOutcome } from "./decisions.ts";
import { validatePlan, type DispatchPlan, type PlannedModel } from "./dispatch-plan.ts";

/** What the decide phase reads besides the request and its entrypoint. */
export interface DecisionInput {
  readonly requestId: string;
  /** Epoch ms when the request was received; the deadline counts from here. */
  readonly receivedAt: number;
  readonly now: number;
  /** The clock model-backed signals' deadline is read on. */
  readonly clock: () => number;
  readonly clientProtocol: ProtocolId;
  /** Only the headers the bootstrap config marks trusted, lower-case names. */
  readonly trustedHeaders: ReadonlyMap<string, string>;
  /** The gateway's own bound on a request's life. */
  readonly requestDeadlineMs: number;
  /** The caller's (or parent request's) absolute deadline: it can only shorten ours. */
  readonly callerDeadlineAt?: number | undefined;
}

/** The decide phase's outcome for a chat request. */
export interface Decided {
  readonly plan: DispatchPlan;
  /** The decision that holds; undefined: none did, and the entrypoint's default serves. */
  readonly decision: CompiledDecision | undefined;
  /** The evidence, for the record, the span and the call ledger. */
  readonly record: DecisionRecord;
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
 * The decide phase: the entrypoint's decisions, over the request's signals, choose tiers of
 * logical models; each resolves to its active revision. The result is a plan with no address,
 * secret or health in it, and the record of how it was chosen.
 *
 * Synchronous when local signals decide; a promise when model-backed signals had to be awaited.
 *
 * @throws GatewayError deadline_exceeded when the deadline passed before the plan was made;
 *   signal_unavailable when a fail-closed decision could not be told; internal_error when the
 *   plan fails its own structural check.
 */
export function decideChat(publication: CompiledPublication, ep: CompiledEntrypoint, request: NeutralRequest, input: DecisionInput, signals: SignalSet): Decided | Promise<Decided> {
  const deadlineAt = deadlineOf(input);
  if (deadlineAt <= input.now) throw new GatewayError("deadline_exceeded", "The request deadline passed.");
  const outcome = ep.decisions.length === 0 ? NONE : chooseDecision(ep.decisions, signals, { at: Math.min(input.now + publication.signalDeadlineMs, deadlineAt), now: input.clock });
  return outcome instanceof Promise ? outcome.then((o) => decided(publication, ep, request, input, signals, o, deadlineAt)) : decided(publication, ep, request, input, signals, outcome, deadlineAt);
}

/** The plan the outcome of the decisions stands for, and its record. */
function decided(publication: CompiledPublication, ep: CompiledEntrypoint, request: NeutralRequest, input: DecisionInput, signals: SignalSet, outcome: DecisionOutcome, deadlineAt: number): Decided {
  const decision = outcome.decision;
  const needs = requestCapabilities(request);
  const tiers = (decision?.tiers ?? ep.defaultTiers).map((tier) =>
    tier.flatMap((id) => {
      const m = publication.models.get(id);
      return m ? [plannedModel(id, m, needs)] : [];
    }),
  );
  const name = decision?.name ?? "default";
  const plan = checkedPlan(
    {
      requestId: input.requestId,
      publicationRevision: publication.revision,
      entrypoint: ep.name,
      route: name,
      tiers: tiers.filter((t) => t.length > 0),
      retry: { maxAttempts: ep.maxAttempts },
      deadlineAt,
      affinityKey: ep.affinityHeader === undefined ? undefined : input.trustedHeaders.get(ep.affinityHeader),
      clientProtocol: input.clientProtocol,
      stream: request.stream,
    },
    input.clock(),
  );
  return { plan, decision, record: { name, signals: Object.fromEntries(signals.evaluated()), skipped: outcome.skipped } };
}

const NONE = { decision: undefined, skipped: [] } as const;

/**
 * The decide phase of a Looper step (a sub-call the engine makes for its parent's algorithm): the
 * tier the algorithm chose, planned as it is — no decision rules, no second semantic choice. The
 * route is the parent's decision, for the record.
 *
 * @throws GatewayError deadline_exceeded when the deadline passed; internal_error when the plan fails its check.
 */
export function decideTier(publication: CompiledPublication, ep: CompiledEntrypoint, request: NeutralRequest, input: DecisionInput, tier: readonly string[], route: string): Decided {
  const deadlineAt = deadlineOf(input);
  if (deadlineAt <= input.now) throw new GatewayError("deadline_exceeded", "The request deadline passed.");
  const needs = requestCapabilities(request);
  const planned = tier.flatMap((id) => {
    const m = publication.models.get(id);
    return m ? [plannedModel(id, m, needs)] : [];
  });
  const plan = checkedPlan(
    {
      requestId: input.requestId,
      publicationRevision: publication.revision,
      entrypoint: ep.name,
      route,
      tiers: planned.length > 0 ? [planned] : [],
      retry: { maxAttempts: ep.maxAttempts },
      deadlineAt,
      affinityKey: ep.affinityHeader === undefined ? undefined : input.trustedHeaders.get(ep.affinityHeader),
      clientProtocol: input.clientProtocol,
      stream: false,
    },
    input.clock(),
  );
  return { plan, decision: undefined, record: { name: route, signals: {}, skipped: [] } };
}

/** The request's one deadline: the gateway's bound from receipt, or the caller's if earlier. */
function deadlineOf(input: DecisionInput): number {
  return Math.min(input.receivedAt + input.requestDeadlineMs, input.callerDeadlineAt ?? Number.POSITIVE_INFINITY);
}

/** Capabilities this particular request needs from a backend, on top of the model revision's. */
export function requestCapabilities(req: NeutralRequest): Capability[] {
  const caps: Capability[] = ["chat"];
  if (req.stream) caps.push("streaming");
  if ((req.tools?.length ?? 0) > 0) caps.push("tools");
  if (req.messages.some((m) => m.content.some((p) => p.type === "image"))) caps.push("images");
  if (req.responseFormat?.type === "json_schema") caps.push("json-schema");
  if (req.logprobs !== undefined) caps.push("logprobs");
  return caps;
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
    deadlineAt: deadlineOf(input),
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
