import { DurableObject } from "cloudflare:workers";
import { systemClock } from "../src/deps/clock.ts";
import { CardRegistryService, globalCardFetch, type CardFetch, type CardRegistryView, type CardTarget } from "../src/a2a/card-registry-service.ts";
import type { CardRegistryRpc } from "../src/a2a/card-cache.ts";
import { isolateConfig } from "../src/worker/isolate-config.ts";
import { secretReader } from "../src/worker/secrets.ts";
import { SqliteAgentCardStore } from "./sqlite-agent-card-store.ts";

/**
 * AgentCardRegistry: one instance per A2A agent (`AGENT_CARD_REGISTRY.getByName(agent)`). A thin
 * shell over CardRegistryService (src/a2a/card-registry-service.ts), tested without this class:
 * the agent's card is fetched on this object's alarm every `refreshMs`, never on a request's path,
 * and the last good card stays when a fetch fails.
 */
export class AgentCardRegistry extends DurableObject<Env> implements CardRegistryRpc {
  readonly #registry: CardRegistryService;
  /** The fetch card requests use: the global fetch. Tests replace it on the instance (inside `runInDurableObject`). */
  cardFetch: CardFetch = globalCardFetch;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#registry = new CardRegistryService({
      store: new SqliteAgentCardStore(ctx.storage),
      alarm: ctx.storage,
      clock: systemClock,
      egress: () => isolateConfig(env).gateway.security.egress,
      secret: secretReader(env),
    });
  }

  async watch(target: CardTarget): Promise<CardRegistryView> {
    return this.#registry.watch(target);
  }

  async state(): Promise<CardRegistryView> {
    return this.#registry.state();
  }

  async unwatch(): Promise<void> {
    await this.#registry.unwatch();
  }

  override async alarm(): Promise<void> {
    await this.#registry.alarm(this.cardFetch);
  }
}
