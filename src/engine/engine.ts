import type { GatewayConfig } from "../config/gateway-schema.ts";
import type { Capability, PublicationConfig } from "../config/publication-schema.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import { echo } from "../errors/echo.ts";
import type { DispatchPlan, PlannedModel } from "../plan/dispatch-plan.ts";
import { validatePlan } from "../plan/dispatch-plan.ts";
import type { CodecRegistry, ProtocolId } from "../protocol/codec.ts";
import type { RequestFeature } from "../protocol/features.ts";
import type { NeutralRequest } from "../protocol/neutral.ts";
import type { Clock } from "../traffic/deps.ts";
import { compileRoutes, decide, type CompiledRoute } from "./decision-rules.ts";
import type { Principal } from "./principal.ts";
import { computeFacts, requestCapabilities } from "./request-facts.ts";

/** What the transport adapter hands the engine: nothing transport-specific. */
export interface Ingress {
  readonly principal: Principal;
  readonly protocol: ProtocolId;
  /** The parsed JSON body (size and depth limits already enforced by the adapter). */
  readonly body: unknown;
  readonly requestId: string;
  /** Epoch ms when the adapter received the request; the deadline counts from here. */
  readonly receivedAt: number;
  /** Only the headers the bootstrap config marks trusted, lower-case names. */
  readonly trustedHeaders: ReadonlyMap<string, string>;
  /** The caller's own absolute deadline (epoch ms), if it sent one: it can only shorten ours. */
  readonly callerDeadlineAt?: number | undefined;
}

/** Answer without calling a backend (deny, protocol error, later: cache hit). */
export interface ImmediateAction {
  readonly kind: "immediate";
  readonly error: GatewayError;
  /** Set when the request body was readable, so the error can be rendered for it. */
  readonly request?: NeutralRequest | undefined;
}

/** Call a backend according to the plan. */
export interface DispatchAction {
  readonly kind: "dispatch";
  readonly plan: DispatchPlan;
  readonly request: NeutralRequest;
}

export type Action = ImmediateAction | DispatchAction;

/** One request's passage through the engine's stages. */
export interface Session {
  prepare(): Action;
}

/** A model the caller may use, for `GET /v1/models`. */
export interface ListedModel {
  readonly id: string;
  readonly description?: string | undefined;
}

interface CompiledEntrypoint {
  readonly name: string;
  readonly description: string | undefined;
  readonly routes: readonly CompiledRoute[];
  readonly defaultTiers: readonly (readonly string[])[];
  readonly maxAttempts: number;
  readonly affinityHeader: string | undefined;
}

interface ActiveRevision {
  readonly revision: number;
  readonly pool: string;
  readonly requires: readonly Capability[];
  readonly downgrades: readonly RequestFeature[];
}

/** The transport-neutral gateway engine, built once per publication. */
export interface Engine {
  readonly publicationRevision: string;
  begin(ingress: Ingress): Session;
  listModels(principal: Principal): ListedModel[];
}

export interface EngineDeps {
  readonly clock: Clock;
  readonly codecs: CodecRegistry;
}

/**
 * Builds the engine: compiles decision rules and grant tables once, so per-request work is lookups
 * and the compiled predicates only.
 */
export function createEngine(gateway: GatewayConfig, publication: PublicationConfig, deps: EngineDeps): Engine {
  const entrypoints = new Map<string, CompiledEntrypoint>(
    publication.entrypoints.map((ep) => [
      ep.name,
      {
        name: ep.name,
        description: ep.description,
        routes: compileRoutes(ep),
        defaultTiers: ep.default,
        maxAttempts: ep.retry.maxAttempts,
        affinityHeader: ep.affinityHeader,
      },
    ]),
  );
  const models = new Map<string, ActiveRevision>();
  for (const m of publication.models) {
    const r = m.revisions.find((rev) => rev.revision === m.activeRevision);
    if (r) models.set(m.id, { revision: r.revision, pool: r.pool, requires: r.requires, downgrades: r.downgrades });
  }
  const grants = new Map<string, "*" | ReadonlySet<string>>();
  for (const t of publication.tenants) {
    for (const k of t.apiKeys) {
      grants.set(`${t.id}/${k.id}`, k.entrypoints.includes("*") ? "*" : new Set(k.entrypoints));
    }
  }
  const mayUse = (p: Principal, entrypoint: string): boolean => {
    const g = grants.get(`${p.tenantId}/${p.keyId}`);
    return g === "*" || (g !== undefined && g.has(entrypoint));
  };
  const deadlineMs = gateway.traffic.requestDeadlineMs;

  const plan = (ingress: Ingress, request: NeutralRequest): Action => {
    // Stage: entrypoint (the public model name).
    const ep = entrypoints.get(request.model);
    if (!ep) {
      return { kind: "immediate", request, error: new GatewayError("model_not_found", `The model '${echo(request.model)}' does not exist.`, { param: "model" }) };
    }
    // Stage: authorization.
    if (!mayUse(ingress.principal, ep.name)) {
      return {
        kind: "immediate",
        request,
        error: new GatewayError("model_not_allowed", `This API key may not use the model '${ep.name}'.`, { param: "model" }),
      };
    }
    // Stage: decision rules on trusted inputs.
    const facts = computeFacts(request, ingress.trustedHeaders);
    const decision = decide(ep.routes, ep.defaultTiers, facts);
    const needs = requestCapabilities(request, facts);
    // Stage: logical model revisions, in tiers.
    const tiers: PlannedModel[][] = decision.tiers.map((tier) =>
      tier.flatMap((id) => {
        const rev = models.get(id);
        if (!rev) return [];
        const requires = [...new Set<Capability>([...rev.requires, ...needs])].sort();
        return [{ logicalModel: id, revision: rev.revision, pool: rev.pool, requires, downgrades: rev.downgrades }];
      }),
    );
    const dispatchPlan: DispatchPlan = {
      requestId: ingress.requestId,
      publicationRevision: publication.revision,
      entrypoint: ep.name,
      route: decision.route,
      tiers: tiers.filter((t) => t.length > 0),
      retry: { maxAttempts: ep.maxAttempts },
      deadlineAt: Math.min(ingress.receivedAt + deadlineMs, ingress.callerDeadlineAt ?? Number.POSITIVE_INFINITY),
      affinityKey: ep.affinityHeader === undefined ? undefined : ingress.trustedHeaders.get(ep.affinityHeader),
      clientProtocol: ingress.protocol,
      stream: request.stream,
    };
    const problems = validatePlan(dispatchPlan, deps.clock.now());
    if (problems.length > 0) {
      return { kind: "immediate", request, error: new GatewayError("internal_error", "The gateway could not plan this request.", { cause: problems }) };
    }
    return { kind: "dispatch", plan: dispatchPlan, request };
  };

  return {
    publicationRevision: publication.revision,
    begin(ingress: Ingress): Session {
      return {
        prepare(): Action {
          const codec = deps.codecs.get(ingress.protocol);
          if (!codec) {
            return { kind: "immediate", error: new GatewayError("not_found", `Protocol '${ingress.protocol}' is not served.`) };
          }
          let request: NeutralRequest;
          try {
            // Stage: decode the client's request once, into the neutral model.
            request = codec.decodeRequest(ingress.body);
          } catch (err) {
            if (err instanceof GatewayError) return { kind: "immediate", error: err };
            throw err;
          }
          return plan(ingress, request);
        },
      };
    },
    listModels(principal: Principal): ListedModel[] {
      return [...entrypoints.values()]
        .filter((ep) => mayUse(principal, ep.name))
        .map((ep) => ({ id: ep.name, description: ep.description }));
    },
  };
}
