import type { Clock } from "../deps/clock.ts";
import { normalizeSnapshot, type NormalizedSnapshot, type SnapshotContext, type SnapshotReason } from "./normalize.ts";
import type { ActiveSnapshot } from "./pinned-snapshot.ts";
import type { RevisionLog } from "./revision-log.ts";

/** A verified revision as stored. Revisions are immutable once written. */
export interface StoredRevision {
  readonly revision: number;
  readonly digest: string;
  readonly snapshot: NormalizedSnapshot;
  readonly createdAt: string;
  readonly source: string;
}

export type HistoryKind = "seeded" | "activated" | "unchanged" | "rejected" | "rolled_back";

/** One line of the controller's audit history. */
export interface HistoryEvent {
  readonly at: string;
  readonly kind: HistoryKind;
  readonly source: string;
  readonly revision?: number | undefined;
  readonly digest?: string | undefined;
  /** Revision that was active before this event changed it. */
  readonly previous?: number | undefined;
  readonly reasons?: readonly SnapshotReason[] | undefined;
}

/**
 * Synchronous storage the controller needs. `transaction` must run its callback atomically with no
 * other caller interleaved (a Durable Object's `transactionSync`), which is why nothing here is async.
 */
export interface SnapshotStore extends RevisionLog<HistoryEvent> {
  getRevision(revision: number): StoredRevision | undefined;
  findByDigest(digest: string): StoredRevision | undefined;
  /** Stores a new revision and returns its number (one more than the highest ever used). */
  insertRevision(r: Omit<StoredRevision, "revision">): number;
  /** Newest first, metadata only. */
  revisions(limit: number): Omit<StoredRevision, "snapshot">[];
}

export type ProposalResult =
  | { readonly status: "activated" | "unchanged"; readonly revision: number; readonly digest: string; readonly previous?: number | undefined }
  | { readonly status: "rejected"; readonly reasons: readonly SnapshotReason[] };

export type RollbackResult =
  | { readonly status: "activated"; readonly revision: number; readonly digest: string; readonly previous: number | undefined }
  | { readonly status: "not_found"; readonly message: string };

/** What a controller activates on first use: the bundled candidate and what it is checked against. */
export interface SnapshotSeed {
  readonly candidate: unknown;
  readonly context: SnapshotContext;
}

/** Thrown (over RPC too) when the bundled seed snapshot itself is invalid. */
export class SnapshotSeedError extends Error {
  override readonly name = "SnapshotSeedError";
}

/** Revisions kept for rollback; the active and last-known-good revisions are always kept. */
const KEEP_REVISIONS = 50;

/**
 * BackendSnapshot controller logic: candidate → validate → normalize → digest → atomic activation,
 * with history and rollback. The Durable Object is a thin shell over this; tests drive it with an
 * in-memory store.
 */
export class SnapshotController {
  readonly #store: SnapshotStore;
  readonly #clock: Clock;

  constructor(store: SnapshotStore, clock: Clock) {
    this.#store = store;
    this.#clock = clock;
  }

  /** The active revision, or undefined before the first activation. */
  active(): StoredRevision | undefined {
    const rev = this.#store.activeRevision();
    return rev === undefined ? undefined : this.#store.getRevision(rev);
  }

  /**
   * The active revision as an isolate pins it. Before the first activation the seed is read
   * (only then) and proposed, as source "seed"; a seed that is rejected throws a
   * {@link SnapshotSeedError} listing every reason.
   */
  async activeOrSeed(seed: () => SnapshotSeed): Promise<ActiveSnapshot> {
    let active = this.active();
    if (!active) {
      const { candidate, context } = seed();
      const result = await this.propose(candidate, context, "seed");
      if (result.status === "rejected") {
        throw new SnapshotSeedError(`bundled backends.yaml was rejected: ${result.reasons.map((r) => `${r.path}: ${r.message}`).join("; ")}`);
      }
      active = this.active();
    }
    if (!active) throw new SnapshotSeedError("no active snapshot after seeding");
    return { revision: active.revision, digest: active.digest, snapshot: active.snapshot };
  }

  /**
   * Verifies a full-snapshot candidate and activates it atomically. An identical candidate (same
   * canonical digest as the active one) is a no-op; a rejected one leaves the active revision as it
   * was. Content identical to an older stored revision re-activates that revision's number.
   */
  async propose(candidate: unknown, ctx: SnapshotContext, source: string): Promise<ProposalResult> {
    const at = new Date(this.#clock.now()).toISOString();
    // Normalizing hashes (async), so it happens before the synchronous, atomic section.
    const result = await normalizeSnapshot(candidate, ctx);
    if (!result.ok) {
      this.#store.transaction(() => this.#store.appendEvent({ at, kind: "rejected", source, reasons: result.reasons }));
      return { status: "rejected", reasons: result.reasons };
    }
    return this.#store.transaction((): ProposalResult => {
      const previous = this.#store.activeRevision();
      const current = previous === undefined ? undefined : this.#store.getRevision(previous);
      if (current && current.digest === result.digest) {
        this.#store.appendEvent({ at, kind: "unchanged", source, revision: current.revision, digest: current.digest });
        return { status: "unchanged", revision: current.revision, digest: current.digest };
      }
      const existing = this.#store.findByDigest(result.digest);
      const revision =
        existing?.revision ?? this.#store.insertRevision({ digest: result.digest, snapshot: result.snapshot, createdAt: at, source });
      this.#store.setActive(revision);
      this.#store.appendEvent({
        at,
        kind: previous === undefined ? "seeded" : "activated",
        source,
        revision,
        digest: result.digest,
        previous,
      });
      this.#store.prune(KEEP_REVISIONS, previous === undefined ? [revision] : [revision, previous]);
      return { status: "activated", revision, digest: result.digest, previous };
    });
  }

  /**
   * Re-activates a stored, verified revision: the given one, or else the revision that was active
   * before the current one (last-known-good). It is not re-validated against the publication: it
   * was verified when first activated, and rollback must work when the new config is the problem.
   */
  rollback(target: number | undefined, source: string): RollbackResult {
    const at = new Date(this.#clock.now()).toISOString();
    return this.#store.transaction((): RollbackResult => {
      const current = this.#store.activeRevision();
      let revision = target;
      if (revision === undefined) {
        revision = this.#store
          .events(1000)
          .find((e) => (e.kind === "activated" || e.kind === "rolled_back") && e.revision === current)?.previous;
        if (revision === undefined) return { status: "not_found", message: "there is no previous revision to roll back to" };
      }
      const stored = this.#store.getRevision(revision);
      if (!stored) return { status: "not_found", message: `revision ${revision} is not stored` };
      if (revision !== current) {
        this.#store.setActive(revision);
        this.#store.appendEvent({ at, kind: "rolled_back", source, revision, digest: stored.digest, previous: current });
      }
      return { status: "activated", revision, digest: stored.digest, previous: current };
    });
  }

  /** Activation history, newest first, and the stored revisions. */
  history(limit = 50): { events: HistoryEvent[]; revisions: Omit<StoredRevision, "snapshot">[]; active: number | undefined } {
    return { events: this.#store.events(limit), revisions: this.#store.revisions(limit), active: this.#store.activeRevision() };
  }
}
