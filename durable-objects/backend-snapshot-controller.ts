import { DurableObject } from "cloudflare:workers";
import { SnapshotController } from "../src/snapshot/controller.ts";
import type { ProposalResult, RollbackResult } from "../src/snapshot/controller.ts";
import type { SnapshotControllerClient, SnapshotHistory } from "../src/snapshot/controller-client.ts";
import type { ActiveSnapshot } from "../src/snapshot/pinned-snapshot.ts";
import { systemClock } from "../src/deps/clock.ts";
import { isolateConfig, publishedSnapshotContext, snapshotSeed } from "../src/worker/isolate-config.ts";
import { SqliteSnapshotStore } from "./sqlite-snapshot-store.ts";

/**
 * BackendSnapshotController: the single writer of the active BackendSnapshot (one instance, named
 * "global"). A thin RPC shell: all logic is in SnapshotController, tested without this class,
 * seeding from the bundled backends.yaml on first use included.
 */
export class BackendSnapshotController extends DurableObject<Env> implements SnapshotControllerClient {
  readonly #controller: SnapshotController;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#controller = new SnapshotController(new SqliteSnapshotStore(ctx.storage), systemClock);
  }

  async getActive(): Promise<ActiveSnapshot> {
    return this.#controller.activeOrSeed(() => snapshotSeed(isolateConfig(this.env), this.env));
  }

  async propose(candidate: unknown, source: string): Promise<ProposalResult> {
    return this.#controller.propose(candidate, await publishedSnapshotContext(this.env), source);
  }

  async rollback(revision: number | undefined, source: string): Promise<RollbackResult> {
    return this.#controller.rollback(revision, source);
  }

  async history(limit: number): Promise<SnapshotHistory> {
    return this.#controller.history(limit);
  }
}
