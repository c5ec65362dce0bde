import type { Clock } from "../deps/clock.ts";
import { emptyCachedView, nonNegative, RemoteViewCache, type CachedView, type Schedule } from "../traffic/remote-view-cache.ts";
import { readAgentCard, type AgentCardView } from "../protocol/a2a/agent-card.ts";
import type { A2aAgentConfig } from "../config/a2a-agents-schema.ts";
import { cardTargetKey, type CardRegistryView, type CardTarget } from "./card-registry-service.ts";

/** All agents' card registries, keyed by agent name: what {@link AgentCardCache} talks to. */
export interface CardRegistryClient {
  watch(agent: string, target: CardTarget): Promise<CardRegistryView>;
  state(agent: string): Promise<CardRegistryView>;
}

/** The RPC an AgentCardRegistry object serves (one object per agent). */
export interface CardRegistryRpc {
  watch(target: CardTarget): Promise<CardRegistryView>;
  state(): Promise<CardRegistryView>;
  unwatch(): Promise<void>;
}

/**
 * A {@link CardRegistryClient} over per-agent RPC objects; `objectFor` is called on every call
 * (a stub is bound to the request that made it).
 */
export function cardRegistryClient(objectFor: (agent: string) => CardRegistryRpc): CardRegistryClient {
  return {
    watch: async (agent, target) => await objectFor(agent).watch(target),
    state: async (agent) => await objectFor(agent).state(),
  };
}

/** Where one configured agent's card comes from. */
export type AgentCardSource = { readonly kind: "inline"; readonly view: AgentCardView } | { readonly kind: "fetched"; readonly target: CardTarget };

/**
 * The card sources of the configured agents, by name. An inline card was validated when the
 * config loaded; one that fails here would have failed the start.
 */
export function agentCardSources(agents: readonly A2aAgentConfig[]): Map<string, AgentCardSource> {
  const out = new Map<string, AgentCardSource>();
  for (const a of agents) {
    if (typeof a.card === "string") {
      const credential = a.credential?.onCardFetch === true ? { secret: a.credential.secret, scheme: a.credential.scheme } : undefined;
      out.set(a.name, { kind: "fetched", target: { agent: a.name, url: a.card, refreshMs: a.refreshMs, ...(credential ? { credential } : {}) } });
      continue;
    }
    const reading = readAgentCard(a.card);
    if (!reading.ok) throw new RangeError(`a2a.agents "${a.name}": invalid inline card: ${reading.reasons.join("; ")}`);
    out.set(a.name, { kind: "inline", view: reading.view });
  }
  return out;
}

export interface AgentCardCacheOptions {
  /** How long a registry's answer is served before it is asked again in the background, in ms. Default 5000. */
  readonly ttlMs?: number;
  /** A background call still unsettled after this long no longer blocks a new one, in ms. Default 5000. */
  readonly refreshTimeoutMs?: number;
  readonly onError?: (err: unknown, agent: string, operation: "watch" | "state") => void;
}

interface Entry extends CachedView<CardRegistryView> {
  /** Key of the target the registry confirmed watching for this isolate. */
  watchedKey: string | undefined;
}

/**
 * An isolate's view of the agents' card registries. A card is never fetched from an agent here:
 * the registry fetches it on its alarm. The first read of an agent in an isolate waits for one
 * call to its registry (which then watches the agent's card, so it is fetched from then on);
 * later reads answer from a view at most `ttlMs` old and refresh it in the background. A failed
 * registry call keeps the card already seen: it is the last good one either way.
 */
export class AgentCardCache {
  readonly #client: CardRegistryClient;
  readonly #sources: ReadonlyMap<string, AgentCardSource>;
  readonly #views: RemoteViewCache<CardRegistryView, Entry, "watch">;

  constructor(client: CardRegistryClient, sources: ReadonlyMap<string, AgentCardSource>, clock: Clock, options: AgentCardCacheOptions = {}) {
    this.#client = client;
    this.#sources = sources;
    this.#views = new RemoteViewCache<CardRegistryView, Entry, "watch">(clock, {
      create: () => ({ ...emptyCachedView<CardRegistryView>(), watchedKey: undefined }),
      fetch: (agent) => client.state(agent),
      ttlMs: nonNegative("ttlMs", options.ttlMs ?? 5000),
      refreshTimeoutMs: nonNegative("refreshTimeoutMs", options.refreshTimeoutMs ?? 5000),
      onError: options.onError,
      keepAfterFailure: () => true,
      // A registry that no longer watches (storage lost) gets the target again on the next read.
      onApplied: (entry, view) => {
        if (!view.watching) entry.watchedKey = undefined;
      },
    });
  }

  /** Whether `agent` is configured. */
  has(agent: string): boolean {
    return this.#sources.has(agent);
  }

  /** The configured agents' names. */
  agents(): string[] {
    return [...this.#sources.keys()];
  }

  /**
   * The agent's last good card; undefined when the agent is not configured or no good card has
   * been fetched yet. Never throws: a registry that cannot be reached reads as no card.
   */
  async card(agent: string, schedule: Schedule): Promise<AgentCardView | undefined> {
    const source = this.#sources.get(agent);
    if (source === undefined) return undefined;
    if (source.kind === "inline") return source.view;
    const entry = this.#views.read(agent, schedule);
    const key = cardTargetKey(source.target);
    try {
      if (entry.watchedKey !== key) {
        const seq = this.#views.nextSeq();
        const view = await this.#client.watch(agent, source.target);
        entry.watchedKey = key;
        this.#views.apply(entry, seq, view);
      } else if (entry.view === undefined) {
        const seq = this.#views.nextSeq();
        this.#views.apply(entry, seq, await this.#client.state(agent));
      }
    } catch (err) {
      this.#views.error(err, agent, entry.watchedKey !== key ? "watch" : "state");
    }
    return entry.view?.card?.view;
  }

  /** What the registry last said of the agent's card, as cached (admin pages; starts no I/O). */
  cached(agent: string): CardRegistryView | undefined {
    return this.#views.cachedViews((v) => v).find(([name]) => name === agent)?.[1];
  }
}
