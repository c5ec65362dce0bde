import { DurableObject } from "cloudflare:workers";
import { PublicationController as Controller } from "../src/publication-lifecycle/controller.ts";
import type { KeyOperation, KeyView } from "../src/publication-lifecycle/key-operations.ts";
import type { ActivePublication, CanaryResult, CandidateCheck, KeyAmendResult, PublicationHead, PublicationHistory, PublicationRollbackResult, PublishOptions, PublishResult } from "../src/publication-lifecycle/controller.ts";
import type { PublicationControllerClient } from "../src/publication-lifecycle/controller-client.ts";
import { systemClock } from "../src/deps/clock.ts";
import { publicationCheckOf, publicationSeedOf, type PublicationSeed } from "../src/worker/isolate-config.ts";
import { SqlitePublicationStore } from "./sqlite-publication-store.ts";

/**
 * PublicationController: the single writer of the active publication (one instance, named
 * "global"). A thin RPC shell over the publication lifecycle logic, which is tested without it;
 * candidates are checked against the bootstrap and the active BackendSnapshot, and the bundled
 * publication is the seed revision.
 */
export class PublicationController extends DurableObject<Env> implements PublicationControllerClient {
  readonly #controller: Controller;
  readonly #check: CandidateCheck;
  readonly #seed: PublicationSeed;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#controller = new Controller(new SqlitePublicationStore(ctx.storage), systemClock);
    this.#check = publicationCheckOf(env);
    this.#seed = publicationSeedOf(env);
  }

  async getActive(): Promise<ActivePublication> {
    return this.#controller.activeOrSeed(this.#seed, this.#check);
  }

  async head(): Promise<PublicationHead> {
    return this.#controller.head(this.#seed, this.#check);
  }

  async get(revision: number): Promise<ActivePublication | undefined> {
    return this.#controller.get(revision);
  }

  async publish(candidate: unknown, source: string, options?: PublishOptions): Promise<PublishResult> {
    return this.#controller.publish(candidate, source, this.#check, this.#seed, options);
  }

  async promoteCanary(source: string): Promise<CanaryResult> {
    return this.#controller.promote(source);
  }

  async abortCanary(source: string): Promise<CanaryResult> {
    return this.#controller.abort(source);
  }

  async rollback(revision: number | undefined, source: string): Promise<PublicationRollbackResult> {
    return this.#controller.rollback(revision, source);
  }

  async history(limit: number): Promise<PublicationHistory> {
    return this.#controller.history(limit);
  }

  async amendKeys(op: KeyOperation, source: string): Promise<KeyAmendResult> {
    return this.#controller.amendKeys(op, source, this.#check, this.#seed);
  }

  async keys(tenant?: string): Promise<KeyView[]> {
    return this.#controller.keys(this.#seed, this.#check, tenant);
  }
}
