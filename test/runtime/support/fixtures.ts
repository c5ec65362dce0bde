import backendsYaml from "../../../config/backends.yaml";
import gatewayYaml from "../../../config/gateway.yaml";
import publicationYaml from "../../../config/publication.yaml";
import { parse, stringify } from "yaml";
import type { ConfigTexts } from "../../../src/config/load-config.ts";
import type { HistoryEvent, SnapshotStore, StoredRevision } from "../../../src/snapshot/controller.ts";
import type { Clock } from "../../../src/deps/clock.ts";

/** The bundled default config texts. */
export const bundledTexts: ConfigTexts = { gateway: gatewayYaml, publication: publicationYaml, backends: backendsYaml };

/** Parsed copy of a bundled file, to edit in a test and stringify back. */
export function bundled(file: keyof ConfigTexts): Record<string, any> {
  return parse(bundledTexts[file]) as Record<string, any>;
}

/** Bundled texts with some files replaced by edited objects. */
export function textsWith(overrides: Partial<Record<keyof ConfigTexts, unknown>>): ConfigTexts {
  return {
    gateway: overrides.gateway === undefined ? bundledTexts.gateway : stringify(overrides.gateway),
    publication: overrides.publication === undefined ? bundledTexts.publication : stringify(overrides.publication),
    backends: overrides.backends === undefined ? bundledTexts.backends : stringify(overrides.backends),
  };
}

/** A settable clock. */
export class FakeClock implements Clock {
  t: number;
  constructor(t = 1_800_000_000_000) {
    this.t = t;
  }
  now(): number {
    return this.t;
  }
  advance(ms: number): void {
    this.t += ms;
  }
}

/** SnapshotStore in memory: the pure controller logic is tested on this, the DO on SQLite. */
export class MemorySnapshotStore implements SnapshotStore {
  revs = new Map<number, StoredRevision>();
  active: number | undefined;
  log: HistoryEvent[] = [];
  next = 1;
  transaction<T>(fn: () => T): T {
    // Roll back on throw, like transactionSync.
    const saved = { revs: new Map(this.revs), active: this.active, log: [...this.log], next: this.next };
    try {
      return fn();
    } catch (err) {
      Object.assign(this, saved);
      throw err;
    }
  }
  activeRevision() {
    return this.active;
  }
  getRevision(r: number) {
    return this.revs.get(r);
  }
  findByDigest(d: string) {
    return [...this.revs.values()].find((r) => r.digest === d);
  }
  insertRevision(r: Omit<StoredRevision, "revision">) {
    const revision = this.next++;
    this.revs.set(revision, { ...r, revision });
    return revision;
  }
  setActive(r: number) {
    this.active = r;
  }
  appendEvent(e: HistoryEvent) {
    this.log.push(e);
  }
  events(limit: number) {
    return [...this.log].reverse().slice(0, limit);
  }
  revisions(limit: number) {
    return [...this.revs.values()]
      .sort((a, b) => b.revision - a.revision)
      .slice(0, limit)
      .map(({ snapshot: _s, ...meta }) => meta);
  }
  prune(keep: number, protect: readonly number[]) {
    const sorted = [...this.revs.keys()].sort((a, b) => b - a);
    for (const r of sorted.slice(keep)) if (!protect.includes(r)) this.revs.delete(r);
  }
}
