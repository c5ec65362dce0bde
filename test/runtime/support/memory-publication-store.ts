import type { PublicationCanary, PublicationEvent, PublicationRevisionInfo, PublicationStore, StoredPublication } from "../../../src/publication-lifecycle/controller.ts";

/** In-memory PublicationStore: the controller's logic without a Durable Object. */
export class MemoryPublicationStore implements PublicationStore {
  readonly revs = new Map<number, StoredPublication>();
  readonly log: PublicationEvent[] = [];
  readonly roots = new Map<string, number>();
  active: number | undefined;
  next = 1;

  transaction<T>(fn: () => T): T {
    return fn();
  }
  activeRevision(): number | undefined {
    return this.active;
  }
  getRevision(revision: number): StoredPublication | undefined {
    return this.revs.get(revision);
  }
  findByDigest(digest: string): StoredPublication | undefined {
    return [...this.revs.values()].find((r) => r.digest === digest);
  }
  insertRevision(r: Omit<StoredPublication, "revision">): number {
    const revision = this.next++;
    this.revs.set(revision, { ...r, revision });
    return revision;
  }
  setActive(revision: number): void {
    this.active = revision;
  }
  appendEvent(e: PublicationEvent): void {
    this.log.unshift(e);
  }
  events(limit: number): PublicationEvent[] {
    return this.log.slice(0, limit);
  }
  revisions(limit: number): PublicationRevisionInfo[] {
    return [...this.revs.values()]
      .sort((a, b) => b.revision - a.revision)
      .slice(0, limit)
      .map(({ document: _d, ...info }) => info);
  }
  prune(keep: number, protect: readonly number[]): void {
    const sorted = [...this.revs.keys()].sort((a, b) => b - a);
    for (const r of sorted.slice(keep)) if (!protect.includes(r)) this.revs.delete(r);
  }
  seed: string | undefined;
  seedDigest(): string | undefined {
    return this.seed;
  }
  setSeedDigest(digest: string): void {
    this.seed = digest;
  }
  running: PublicationCanary | undefined;
  canary(): PublicationCanary | undefined {
    return this.running;
  }
  setCanary(canary: PublicationCanary | undefined): void {
    this.running = canary;
  }
  ledgerRoots(): ReadonlyMap<string, number> {
    return new Map(this.roots);
  }
  addLedgerRoots(roots: ReadonlyMap<string, number>): void {
    for (const [root, n] of roots) if (!this.roots.has(root)) this.roots.set(root, n);
  }
}
