import type { A2aRouteConfig } from "../config/a2a-schema.ts";
import { GatewayError } from "../errors/gateway-error.ts";

/**
 * Capability routing for the virtual agent `/a2a`: a message asks for a skill (or tags), the
 * publication's route rules say which agents may serve that capability and in what order, and
 * the agents' cards say which skills they declare. Affinity keeps a conversation on one agent:
 * once a context (A2A `contextId`) or a trusted session is pinned, its later messages go to the
 * same agent, and when that agent cannot serve the caller hears "not routable now", never
 * another agent — a context handed to an agent that never saw it is not resumed, it is lost.
 *
 * Pure: the agents' skills, their health and the clock are inputs.
 */

/** A skill from an agent's card, as routing reads it. */
export interface AgentSkillFacts {
  readonly id: string;
  readonly tags: readonly string[];
}

/** An agent and the skills its last good card declares. */
export interface AgentFacts {
  readonly agent: string;
  readonly skills: readonly AgentSkillFacts[];
}

/** What a message asks for: a skill id, tags every chosen skill must carry, or neither. */
export interface CapabilityAsk {
  readonly skill?: string | undefined;
  readonly tags?: readonly string[] | undefined;
}

/** One message to route. */
export interface RouteQuestion {
  readonly tenant: string;
  readonly ask: CapabilityAsk;
  /** The message's A2A `contextId`, when it continues a context. */
  readonly contextId?: string | undefined;
  /** The request's trusted headers (lower-case names), already stripped of untrusted ones. */
  readonly trustedHeaders: ReadonlyMap<string, string>;
}

/** Why a message was not routed. */
export type RouteRefusalReason = "pinned_agent_unhealthy" | "pinned_agent_gone" | "pinned_agent_lacks_skill" | "not_permitted" | "no_healthy_agent" | "no_route";

/** A routing decision: the agent and the skill it serves the message with, or a typed refusal. */
export type RouteDecision =
  | {
      readonly ok: true;
      readonly agent: string;
      /** The declared skill that matched; undefined when a default route took a message that asked for none. */
      readonly skill: string | undefined;
      /** The rule that chose the agent; undefined when a pin did. */
      readonly rule: string | undefined;
      /** What pinned it, when affinity did. */
      readonly pinnedBy: "context" | "session" | undefined;
    }
  | { readonly ok: false; readonly reason: RouteRefusalReason; readonly error: GatewayError };

/** Bounds of the affinity table. */
export interface AffinityOptions {
  /** Pins kept at most; the least recently used goes first. */
  readonly maxEntries?: number;
  /** A pin unused this long is forgotten (each use renews it). */
  readonly ttlMs?: number;
  readonly now?: () => number;
}

/** One hour: longer than a typical interactive context's pauses, short enough to shed the idle. */
export const DEFAULT_AFFINITY_TTL_MS = 3_600_000;
export const DEFAULT_AFFINITY_MAX_ENTRIES = 10_000;

/**
 * Pins from (tenant, context id) and (tenant, route, session value) to an agent: bounded by count
 * (least recently used evicted) and by idle time. Keys carry the tenant, so one tenant's context
 * id never reaches another's pin.
 */
export class AffinityTable {
  readonly #max: number;
  readonly #ttl: number;
  readonly #now: () => number;
  /** Insertion order is recency: a use moves the entry to the end. */
  readonly #pins = new Map<string, { readonly agent: string; expires: number }>();

  constructor(options: AffinityOptions = {}) {
    this.#max = Math.max(1, options.maxEntries ?? DEFAULT_AFFINITY_MAX_ENTRIES);
    this.#ttl = Math.max(1, options.ttlMs ?? DEFAULT_AFFINITY_TTL_MS);
    this.#now = options.now ?? Date.now;
  }

  /** The key of a context's pin. */
  static contextKey(tenant: string, contextId: string): string {
    return JSON.stringify(["context", tenant, contextId]);
  }

  /** The key of a session's pin under one route rule (a session may use several capabilities). */
  static sessionKey(tenant: string, route: string, value: string): string {
    return JSON.stringify(["session", tenant, route, value]);
  }

  get size(): number {
    return this.#pins.size;
  }

  /** The pinned agent, renewing the pin; undefined when none or expired. */
  get(key: string): string | undefined {
    const pin = this.#pins.get(key);
    if (pin === undefined) return undefined;
    const now = this.#now();
    this.#pins.delete(key);
    if (pin.expires <= now) return undefined;
    pin.expires = now + this.#ttl;
    this.#pins.set(key, pin);
    return pin.agent;
  }

  /** Pins a key to an agent (replacing an older pin), evicting the least recently used beyond the bound. */
  set(key: string, agent: string): void {
    this.#pins.delete(key);
    this.#pins.set(key, { agent, expires: this.#now() + this.#ttl });
    while (this.#pins.size > this.#max) {
      const oldest = this.#pins.keys().next().value;
      if (oldest === undefined) break;
      this.#pins.delete(oldest);
    }
  }

  delete(key: string): void {
    this.#pins.delete(key);
  }
}

const quote = (s: string) => JSON.stringify(s.slice(0, 128));

function describeAsk(ask: CapabilityAsk): string {
  const parts = [ask.skill !== undefined ? `skill ${quote(ask.skill)}` : undefined, ask.tags?.length ? `tags ${ask.tags.map(quote).join(", ")}` : undefined].filter((p) => p !== undefined);
  return parts.length === 0 ? "any skill" : parts.join(" with ");
}

const globRe = (g: string) => new RegExp(`^${g.replace(/[.+?^${}()|[\]\\/:]/g, "\\$&").replace(/\*/g, ".*")}$`, "s");

interface CompiledRoute {
  readonly name: string;
  readonly skills: readonly RegExp[] | undefined;
  readonly tags: readonly string[] | undefined;
  readonly catchAll: boolean;
  readonly agents: readonly string[];
  readonly affinityHeader: string | undefined;
}

/**
 * The publication's route rules, compiled once, with the affinity table they share. Rules are
 * tried in order; the first under which some listed agent declares a skill that both the rule
 * and the message's ask match decides, even when none of its agents is healthy (a later rule is
 * another capability, not a fallback).
 */
export class A2aRouter {
  readonly #routes: readonly CompiledRoute[];
  readonly affinity: AffinityTable;

  constructor(routes: readonly A2aRouteConfig[], affinity: AffinityTable = new AffinityTable()) {
    this.#routes = routes.map((r) => ({
      name: r.name,
      skills: r.match?.skills?.map(globRe),
      tags: r.match?.tags,
      catchAll: r.match === undefined,
      agents: r.agents,
      affinityHeader: r.affinityHeader,
    }));
    this.affinity = affinity;
  }

  /**
   * Routes one message. A pin by context wins over one by session; a new choice pins the session
   * at once, and the context as soon as it is known (here when the message carries one, else by
   * {@link A2aRouter.pinContext} once the agent's answer names it). `permits` is the caller's
   * policy: an agent it may not use with the matched skill is passed over, so a policy that
   * allows one agent of a route sends the caller there. A pin is kept without asking it; the
   * policy decides the pinned call as any other.
   */
  route(q: RouteQuestion, agents: readonly AgentFacts[], isHealthy: (agent: string) => boolean, permits: (agent: string, skill: string | undefined) => boolean = () => true): RouteDecision {
    const byName = new Map(agents.map((a) => [a.agent, a]));
    const contextKey = q.contextId === undefined ? undefined : AffinityTable.contextKey(q.tenant, q.contextId);
    const byContext = contextKey === undefined ? undefined : this.affinity.get(contextKey);
    if (byContext !== undefined) return this.#pinned(byContext, "context", `context ${quote(q.contextId!)}`, q.ask, byName, isHealthy);

    const route = this.#routes.find((r) => r.agents.some((a) => skillFor(r, q.ask, byName.get(a)) !== NONE));
    if (route === undefined) {
      const what = asksNothing(q.ask) ? "a message that asks for no skill or tags (there is no default route)" : describeAsk(q.ask);
      return refuse("no_route", new GatewayError("not_found", `No published A2A route serves ${what}.`));
    }
    const sessionValue = route.affinityHeader === undefined ? undefined : q.trustedHeaders.get(route.affinityHeader);
    const sessionKey = sessionValue === undefined ? undefined : AffinityTable.sessionKey(q.tenant, route.name, sessionValue);
    const bySession = sessionKey === undefined ? undefined : this.affinity.get(sessionKey);
    if (bySession !== undefined) {
      const pinned = this.#pinned(bySession, "session", `the session in ${route.affinityHeader}`, q.ask, byName, isHealthy);
      if (pinned.ok && contextKey !== undefined) this.affinity.set(contextKey, pinned.agent);
      return pinned.ok ? { ...pinned, rule: route.name } : pinned;
    }

    let permitted = false;
    for (const agent of route.agents) {
      const skill = skillFor(route, q.ask, byName.get(agent));
      if (skill === NONE || !permits(agent, skill)) continue;
      permitted = true;
      if (!isHealthy(agent)) continue;
      if (sessionKey !== undefined) this.affinity.set(sessionKey, agent);
      if (contextKey !== undefined) this.affinity.set(contextKey, agent);
      return { ok: true, agent, skill, rule: route.name, pinnedBy: undefined };
    }
    if (!permitted) {
      return refuse("not_permitted", new GatewayError("tool_not_allowed", `No agent of route ${route.name} that serves ${describeAsk(q.ask)} is allowed for this caller.`));
    }
    return refuse(
      "no_healthy_agent",
      new GatewayError("agent_not_routable", `No agent of route ${route.name} that serves ${describeAsk(q.ask)} is healthy now; retry later.`),
    );
  }

  /** The trusted headers the routes pin sessions by (lower-case). */
  get affinityHeaders(): readonly string[] {
    return this.#routes.flatMap((r) => (r.affinityHeader === undefined ? [] : [r.affinityHeader]));
  }

  /** Pins a context to the agent that answered, once the answer names the context. */
  pinContext(tenant: string, contextId: string, agent: string): void {
    this.affinity.set(AffinityTable.contextKey(tenant, contextId), agent);
  }

  #pinned(agent: string, by: "context" | "session", what: string, ask: CapabilityAsk, byName: ReadonlyMap<string, AgentFacts>, isHealthy: (agent: string) => boolean): RouteDecision {
    const facts = byName.get(agent);
    if (facts === undefined) {
      return refuse("pinned_agent_gone", new GatewayError("agent_not_routable", `${capitalize(what)} is held by agent ${agent}, which is no longer served; start a new one.`));
    }
    if (!isHealthy(agent)) {
      return refuse("pinned_agent_unhealthy", new GatewayError("agent_not_routable", `${capitalize(what)} is held by agent ${agent}, which is not healthy now; retry later.`));
    }
    const skill = askedSkill(ask, facts);
    if (skill === NONE) {
      return refuse("pinned_agent_lacks_skill", new GatewayError("invalid_request", `${capitalize(what)} is held by agent ${agent}, which offers no ${describeAsk(ask)}; start a new one to use another agent.`));
    }
    return { ok: true, agent, skill, rule: undefined, pinnedBy: by };
  }
}

const capitalize = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

const refuse = (reason: RouteRefusalReason, error: GatewayError): RouteDecision => ({ ok: false, reason, error });

/** No skill fits (distinct from `undefined`: a default route taking a message that asked for none). */
const NONE = Symbol("no skill");

const asks = (ask: CapabilityAsk, s: AgentSkillFacts) => (ask.skill === undefined || s.id === ask.skill) && (ask.tags ?? []).every((t) => s.tags.includes(t));
const asksNothing = (ask: CapabilityAsk) => ask.skill === undefined && (ask.tags === undefined || ask.tags.length === 0);

/** The skill of a pinned agent the ask fits, whatever rule first chose the agent. */
function askedSkill(ask: CapabilityAsk, facts: AgentFacts): string | undefined | typeof NONE {
  if (asksNothing(ask)) return undefined;
  return facts.skills.find((s) => asks(ask, s))?.id ?? NONE;
}

/** The first skill of an agent that both the rule and the ask match. */
function skillFor(route: CompiledRoute, ask: CapabilityAsk, facts: AgentFacts | undefined): string | undefined | typeof NONE {
  if (facts === undefined) return NONE;
  // A message that asks for nothing goes to a default route only: routes by capability serve
  // what is asked of them, never a guess at what an unlabelled message wants.
  if (asksNothing(ask)) return route.catchAll ? undefined : NONE;
  const fits = (s: AgentSkillFacts) => route.catchAll || (route.skills?.some((g) => g.test(s.id)) ?? false) || (route.tags?.some((t) => s.tags.includes(t)) ?? false);
  return facts.skills.find((s) => fits(s) && asks(ask, s))?.id ?? NONE;
}
