/**
 * The part of a revision controller's store that does not depend on what a revision holds: the
 * active revision, a bounded history of events, pruning, and one transaction around a controller's
 * read-check-write. The BackendSnapshot's store and the publication's extend it with their own
 * revisions.
 */
export interface RevisionLog<E> {
  transaction<T>(fn: () => T): T;
  activeRevision(): number | undefined;
  setActive(revision: number): void;
  appendEvent(e: E): void;
  /** Newest first. */
  events(limit: number): E[];
  /** Deletes the oldest stored revisions beyond `keep`, never the ones listed in `protect`. */
  prune(keep: number, protect: readonly number[]): void;
}
