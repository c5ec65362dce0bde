import { DurableObject } from "cloudflare:workers";
import { SnapshotController } from "../src/snapshot/controller.ts";
import type { ProposalResult, RollbackResult } from "../src/snapshot/controller.ts";
import type { SnapshotControllerClient, SnapshotHistory } from "../src/snapshot/controller-client.ts";
import type { ActiveSnapshot } from "../src/snapshot/pinned-snapshot.ts";
import { systemClock } from "../src/deps/clock.ts";
import { isolateConfig, snapshotContext } from "../src/worker/isolate-config.ts";
import { SqliteSnapshotStore } from "./sqlite-snapshot-store.ts";

/** Thrown over RPC when the bundled seed snapshot itself is invalid. */
export class SnapshotSeedError extends Error {
  override readonly name = "SnapshotSeedError";
}

/**
 * BackendSnapshotController: the single writer of the active BackendSnapshot (one instance, named
 * "global"). A thin RPC shell: all logic is in SnapshotController, tested without this class.
 */
export class BackendSnapshotController extends DurableObject<Env> implements SnapshotControllerClient {
  readonly #controller: SnapshotController;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#controller = new SnapshotController(new SqliteSnapshotStore(ctx.storage), systemClock);
  }

  async getActive(): Promise<ActiveSnapshot> {
    let active = this.#controller.active();
    if (!active) {
      const config = isolateConfig(this.env);
      const result = await this.#controller.propose(config.backendsSeed, snapshotContext(config), "seed");
      if (result.status === "rejected") {
        throw new SnapshotSeedError(`bundled backends.yaml was rejected: ${result.reasons.map((r) => `${r.path}: ${r.message}`).join("; ")}`);
      }
      active = this.#controller.active();
    }
    if (!active) throw new SnapshotSeedError("no active snapshot after seeding");
    return { revision: active.revision, digest: active.digest, snapshot: active.snapshot };
  }

  async propose(candidate: unknown, source: string): Promise<ProposalResult> {
    return this.#controller.propose(candidate, snapshotContext(isolateConfig(this.env)), source);
  }

  async rollback(revision: number | undefined, source: string): Promise<RollbackResult> {
    return this.#controller.rollback(revision, source);
  }

  async history(limit: number): Promise<SnapshotHistory> {
    return this.#controller.history(limit);
  }
}
