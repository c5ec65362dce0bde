import type { A2aAgentConfig } from "../config/a2a-agents-schema.ts";
import type { HealthCache, Schedule } from "../traffic/health-cache.ts";
import type { HealthClient } from "../traffic/health-client.ts";
import type { HealthStatus, ProbeTarget } from "../traffic/health.ts";

/**
 * Active health of A2A agents, on the backends' and MCP servers' machinery: one HealthMonitor
 * Durable Object per agent (`a2a:<name>`), its alarm, the same thresholds, and the same fail-open
 * reading (an agent never probed, not yet judged, or whose monitor cannot be read is healthy).
 *
 * The probe is a GET of the agent's card URL, as the card registry fetches it: it proves the agent
 * answers without sending it a message, which it could bill, log as work or act on. The caller's
 * credentials never go with it; the agent's own goes only when its card needs it
 * (`credential.onCardFetch`), exactly as with the card fetch.
 */

/** The HealthMonitor object of an agent: its own namespace beside backend ids and `mcp:<server>`. */
export function a2aHealthId(agent: string): string {
  return `a2a:${agent}`;
}

/** The probe target of an agent with `healthCheck`; undefined for one without (it is not probed). */
export function a2aProbeTarget(agent: A2aAgentConfig): ProbeTarget | undefined {
  const hc = agent.healthCheck;
  // The schema refuses healthCheck beside an inline card: there is nothing to fetch.
  if (hc === undefined || typeof agent.card !== "string") return undefined;
  const c = agent.credential;
  return {
    url: agent.card,
    method: "GET",
    headers: { accept: "application/json", "a2a-version": "1.0" },
    ...(c !== undefined && c.onCardFetch ? { credential: { authorizationSecret: c.secret, scheme: c.scheme } } : {}),
    timeoutMs: hc.timeoutMs,
    intervalMs: hc.intervalMs,
    jitterRatio: 0.2,
  };
}

/** The agents' health bound to one request's {@link Schedule}: what routing reads. */
export interface AgentHealthGate {
  /** False only when the agent's monitor says `unhealthy`; starts its probes (once per isolate) when it has `healthCheck`. */
  isHealthy(agent: string): boolean;
  /** The cached status, `unknown` when not probed or not judged yet; starts its probes like {@link isHealthy}. */
  status(agent: string): HealthStatus;
}

/**
 * An isolate's view of the configured agents' health, over the isolate's {@link HealthCache}:
 * answers synchronously from a view at most the cache's TTL old, so a request never waits on a
 * monitor. An agent's probes start with its first use in an isolate (its card read, or a message
 * routed to it), as an MCP server's do. Without a health cache (gateway.yaml `health.enabled:
 * false`) or `healthCheck`, every agent is `unknown`, so healthy.
 */
export class AgentHealth {
  readonly #cache: HealthCache | undefined;
  readonly #targets: ReadonlyMap<string, ProbeTarget>;

  constructor(cache: HealthCache | undefined, agents: readonly A2aAgentConfig[]) {
    this.#cache = cache;
    const targets = new Map<string, ProbeTarget>();
    for (const a of agents) {
      const t = a2aProbeTarget(a);
      if (t !== undefined) targets.set(a.name, t);
    }
    this.#targets = targets;
  }

  /** Whether `agent` is probed at all (configured with `healthCheck`, and health enabled). */
  probed(agent: string): boolean {
    return this.#cache !== undefined && this.#targets.has(agent);
  }

  /** This view with one request's {@link Schedule} bound. */
  forRequest(schedule: Schedule): AgentHealthGate {
    const status = (agent: string): HealthStatus => {
      const target = this.#targets.get(agent);
      const cache = this.#cache;
      if (target === undefined || cache === undefined) return "unknown";
      cache.ensureWatched(a2aHealthId(agent), target, schedule);
      return cache.status(a2aHealthId(agent), schedule);
    };
    return { status, isHealthy: (agent) => status(agent) !== "unhealthy" };
  }
}

/** One agent in `GET /admin/status`: its probes' last verdict and its card registry's last fetch. */
export interface A2aAgentStatus {
  readonly name: string;
  /** False when it has no `healthCheck` (or health is disabled): its status is then `unknown`. */
  readonly probed: boolean;
  readonly status: HealthStatus;
  /** The last probe's reason (`ok`, `http_503`, `timeout`, …); null before the first. */
  readonly lastReason: string | null;
  readonly lastProbeAt: string | null;
  readonly consecutiveFailures: number;
  /** The card: `inline`, or what its registry last fetched (`fetchedAt` of the good card served) and the last failure since. */
  readonly card: { readonly source: "inline" } | { readonly source: "fetched"; readonly fetchedAt: string | null; readonly lastFailure: { readonly at: string; readonly reasons: readonly string[] } | null; readonly error?: string };
}

/** What {@link a2aAgentStatuses} reads an agent's card registry through. */
export type CardStateReader = (agent: string) => Promise<{ readonly card: { readonly fetchedAt: number } | undefined; readonly lastFailure: { readonly at: number; readonly reasons: readonly string[] } | undefined }>;

/**
 * The configured agents with their monitors' verdicts and their registries' last fetches, read from
 * the objects themselves (not an isolate's cache), so an operator sees what the next requests will
 * act on. An agent whose probes have not started yet (they start with its first use) or whose
 * monitor cannot be read is `unknown`.
 */
export async function a2aAgentStatuses(agents: readonly A2aAgentConfig[], healthEnabled: boolean, monitors: HealthClient, cards: CardStateReader): Promise<A2aAgentStatus[]> {
  const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());
  return await Promise.all(
    agents.map(async (a): Promise<A2aAgentStatus> => {
      const card = await cardStatus(a, cards, iso);
      const base = { name: a.name, lastReason: null, lastProbeAt: null, consecutiveFailures: 0, card } as const;
      if (!healthEnabled || a2aProbeTarget(a) === undefined) return { ...base, probed: false, status: "unknown" };
      try {
        const v = await monitors.state(a2aHealthId(a.name));
        if (!v.watching) return { ...base, probed: true, status: "unknown" };
        return { ...base, probed: true, status: v.status, lastReason: v.lastReason ?? null, lastProbeAt: iso(v.lastProbeAt), consecutiveFailures: v.consecutiveFailures };
      } catch {
        return { ...base, probed: true, status: "unknown", lastReason: "monitor unreachable" };
      }
    }),
  );
}

async function cardStatus(a: A2aAgentConfig, cards: CardStateReader, iso: (ms: number | undefined) => string | null): Promise<A2aAgentStatus["card"]> {
  if (typeof a.card !== "string") return { source: "inline" };
  try {
    const s = await cards(a.name);
    return { source: "fetched", fetchedAt: iso(s.card?.fetchedAt), lastFailure: s.lastFailure === undefined ? null : { at: iso(s.lastFailure.at)!, reasons: s.lastFailure.reasons } };
  } catch {
    return { source: "fetched", fetchedAt: null, lastFailure: null, error: "registry unreachable" };
  }
}
