import { loadConfig } from "../../../src/config/load-config.ts";
import type { CandidateCheck, PublicationCanary, PublicationEvent, PublicationRevisionInfo, PublicationStore, StoredPublication } from "../../../src/publication-lifecycle/controller.ts";
import { validateCandidate } from "../../../src/publication-lifecycle/validate-candidate.ts";
import { compilePublication } from "../../../src/publication/compile-publication.ts";
import { normalizeSnapshot } from "../../../src/snapshot/normalize.ts";
import { pinSnapshot } from "../../../src/snapshot/pinned-snapshot.ts";
import { bundled, bundledTexts } from "./fixtures.ts";

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

/**
 * The candidate check the publication controller runs, over the bundled config and the bundled
 * backends as the active snapshot (revision 7): what controller tests publish against.
 */
export async function bundledPublicationCheck(): Promise<CandidateCheck> {
  const config = loadConfig(bundledTexts);
  const normalized = await normalizeSnapshot(bundled("backends"), {
    supportedProtocols: new Set(["openai-chat"]),
    logprobsProtocols: new Set(["openai-chat"]),
    requirements: compilePublication(config.publication).poolRequirements,
    egress: { allow: ["127.0.0.1"] },
  });
  if (!normalized.ok) throw new Error("the bundled snapshot must normalize");
  const snapshot = pinSnapshot({ revision: 7, digest: normalized.digest, snapshot: normalized.snapshot });
  return (candidate, ledgerRoots) => validateCandidate(candidate, { gateway: config.gateway, snapshot, ledgerRoots });
}
