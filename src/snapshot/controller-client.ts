import type { HistoryEvent, ProposalResult, RollbackResult, StoredRevision } from "./controller.ts";
import type { ActiveSnapshot } from "./pinned-snapshot.ts";

/** Snapshot history as the admin API shows it. */
export interface SnapshotHistory {
  readonly active: number | undefined;
  readonly events: readonly HistoryEvent[];
  readonly revisions: readonly Omit<StoredRevision, "snapshot">[];
}

/**
 * The BackendSnapshot controller as callers see it. The Durable Object's RPC stub satisfies it; the
 * HTTP layer depends on this interface, not on the Durable Object.
 */
export interface SnapshotControllerClient {
  /** The active revision; the controller seeds itself from its bundled config on first use. */
  getActive(): Promise<ActiveSnapshot>;
  propose(candidate: unknown, source: string): Promise<ProposalResult>;
  rollback(revision: number | undefined, source: string): Promise<RollbackResult>;
  history(limit: number): Promise<SnapshotHistory>;
}
