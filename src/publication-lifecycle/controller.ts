import type { Clock } from "../deps/clock.ts";
import { canonicalDigest } from "../digest/canonical-digest.ts";
import type { ConfigIssue } from "../config/parse-file.ts";
import type { CandidateVerdict } from "./validate-candidate.ts";
import type { RevisionLog } from "../snapshot/revision-log.ts";
import { applyKeyOperation, listKeys, type KeyOperation, type KeyView } from "./key-operations.ts";

/** A verified publication revision as stored. Revisions are immutable once written. */
export interface StoredPublication {
  readonly revision: number;
  readonly digest: string;
  /** The publication's own `revision` label. */
  readonly label: string;
  /** The document as it was published (parsed YAML or JSON, before defaults): what `GET` shows and isolates compile. */
  readonly document: unknown;
  readonly createdAt: string;
  /** Who activated it first: `seed`, `admin`, ... */
  readonly source: string;
}

/** Metadata of a stored revision (history lists carry no documents). */
export type PublicationRevisionInfo = Omit<StoredPublication, "document">;

export type PublicationHistoryKind =
  | "seeded"
  | "activated"
  | "unchanged"
  | "rejected"
  | "rolled_back"
  | "canary_started"
  | "canary_percent"
  | "canary_promoted"
  | "canary_aborted"
  /** A key change reached the running canary too: its content is a new revision, its share and start unchanged. */
  | "canary_amended";

/** One line of the controller's audit history. */
export interface PublicationEvent {
  readonly at: string;
  readonly kind: PublicationHistoryKind;
  readonly source: string;
  readonly revision?: number | undefined;
  readonly digest?: string | undefined;
  /** Revision that was active before this event changed it. */
  readonly previous?: number | undefined;
  readonly issues?: readonly ConfigIssue[] | undefined;
  /** A canary event's share of callers, in percent. */
  readonly percent?: number | undefined;
  /** Why a canary ended other than by promote or abort: `rollback`. */
  readonly reason?: string | undefined;
}

/** The running canary: a stored revision that serves `percent` of callers (by key) beside the active one. */
export interface PublicationCanary {
  readonly revision: number;
  readonly digest: string;
  /** Share of callers, 1..99. */
  readonly percent: number;
  readonly startedAt: string;
}

/**
 * Synchronous storage the controller needs. `transaction` must run its callback atomically with no
 * other caller interleaved (a Durable Object's `transactionSync`).
 */
export interface PublicationStore extends RevisionLog<PublicationEvent> {
  getRevision(revision: number): StoredPublication | undefined;
  findByDigest(digest: string): StoredPublication | undefined;
  /** Stores a new revision and returns its number (one more than the highest ever used). */
  insertRevision(r: Omit<StoredPublication, "revision">): number;
  /** Newest first, metadata only. */
  revisions(limit: number): PublicationRevisionInfo[];
  /** Stripe count of every ledger root an activated revision used. */
  ledgerRoots(): ReadonlyMap<string, number>;
  addLedgerRoots(roots: ReadonlyMap<string, number>): void;
  /** Digest of the seed document last adopted (undefined before the first). */
  seedDigest(): string | undefined;
  setSeedDigest(digest: string): void;
  /** The running canary, if any; kept as durably as the active revision. */
  canary(): PublicationCanary | undefined;
  setCanary(canary: PublicationCanary | undefined): void;
}

/** The active revision's identity: what an isolate compares with what it has compiled. */
export interface PublicationHead {
  readonly revision: number;
  readonly digest: string;
  /** The running canary's identity and share, so an isolate learns it in the same call. */
  readonly canary?: Omit<PublicationCanary, "startedAt"> | undefined;
}

/** The active revision as an isolate compiles it. */
export interface ActivePublication extends PublicationHead {
  readonly label: string;
  readonly document: unknown;
}

export type PublishResult =
  | { readonly status: "activated" | "unchanged"; readonly revision: number; readonly digest: string; readonly previous?: number | undefined }
  /** The candidate serves `percent` of callers beside the active revision (`active`). */
  | { readonly status: "canary"; readonly revision: number; readonly digest: string; readonly percent: number; readonly active: number | undefined }
  | { readonly status: "rejected"; readonly issues: readonly ConfigIssue[] };

/** A key operation's outcome: the publish it made, with the key as it now stands. */
export type KeyAmendResult =
  | { readonly status: "activated" | "unchanged"; readonly revision: number; readonly digest: string; readonly previous?: number | undefined; readonly key: KeyView }
  | { readonly status: "rejected"; readonly issues: readonly ConfigIssue[] }
  | { readonly status: "not_found"; readonly message: string };

/** What a publish is for: activate, start or re-weight a canary, or apply a key change on top of known revisions. */
type PublishPlan =
  | { readonly kind: "publish" }
  | { readonly kind: "canary"; readonly percent: number }
  /** Activates only if the active revision and the canary are still `base` and `canaryBase`; the canary takes `canaryCandidate`. */
  | { readonly kind: "amend"; readonly base: number; readonly canaryBase: number | undefined; readonly canaryCandidate: unknown };

/** Options of {@link PublicationController.publish}. */
export interface PublishOptions {
  /** Start (or re-weight) a canary serving this share of callers, 1..99, instead of activating. */
  readonly canary?: number | undefined;
}

/** What promote and abort answer: the canary's revision, or that none runs. */
export type CanaryResult =
  | { readonly status: "promoted"; readonly revision: number; readonly digest: string; readonly previous: number | undefined }
  | { readonly status: "aborted"; readonly revision: number; readonly digest: string }
  | { readonly status: "not_found"; readonly message: string };

export type PublicationRollbackResult =
  | {
      readonly status: "activated";
      readonly revision: number;
      readonly digest: string;
      readonly previous: number | undefined;
      /** The canary this rollback ended, when one ran. */
      readonly abortedCanary?: number | undefined;
    }
  | { readonly status: "not_found"; readonly message: string };

/** Publication history as the admin API shows it. */
export interface PublicationHistory {
  readonly active: number | undefined;
  readonly lastKnownGood: number | undefined;
  readonly canary: PublicationCanary | undefined;
  readonly events: readonly PublicationEvent[];
  readonly revisions: readonly PublicationRevisionInfo[];
}

/** Checks a candidate against everything but itself; given the ledger roots activated so far. */
export type CandidateCheck = (candidate: unknown, ledgerRoots: ReadonlyMap<string, number>) => Promise<CandidateVerdict>;

/** Thrown (over RPC too) when the bundled seed publication itself is rejected. */
export class PublicationSeedError extends Error {
  override readonly name = "PublicationSeedError";
}

/** Revisions kept for rollback; the active and last-known-good revisions are always kept. */
const KEEP_REVISIONS = 50;

/**
 * Publication lifecycle logic: candidate → validate → digest → atomic activation, with history,
 * last-known-good and rollback — the BackendSnapshot controller's model, for the semantic
 * publication. The Durable Object is a thin shell over this; tests drive it with an in-memory store.
 */
export class PublicationController {
  readonly #store: PublicationStore;
  readonly #clock: Clock;
  /** The seed adopted by this instance of the controller (once per start of its object). */
  #seeded: Promise<void> | undefined;

  constructor(store: PublicationStore, clock: Clock) {
    this.#store = store;
    this.#clock = clock;
  }

  #active(): StoredPublication | undefined {
    const rev = this.#store.activeRevision();
    return rev === undefined ? undefined : this.#store.getRevision(rev);
  }

  /**
   * The active revision, after this controller adopted its seed (see {@link adoptSeed}).
   * @throws PublicationSeedError when there is no active revision and the seed was rejected.
   */
  async activeOrSeed(seed: () => unknown, check: CandidateCheck): Promise<ActivePublication> {
    this.#seeded ??= this.adoptSeed(seed, check).finally(() => {
      // A failed adoption is tried again by the next call.
      if (this.#active() === undefined) this.#seeded = undefined;
    });
    await this.#seeded;
    const active = this.#active();
    if (!active) throw new PublicationSeedError("no active publication after seeding");
    return { revision: active.revision, digest: active.digest, label: active.label, document: active.document, canary: this.#canaryHead() };
  }

  #canaryHead(): PublicationHead["canary"] {
    const c = this.#store.canary();
    return c && { revision: c.revision, digest: c.digest, percent: c.percent };
  }

  /**
   * The bundled publication (the seed) is published, as source "seed", when it is not the one
   * this controller adopted last: on first use, and when a deploy or restart brings a changed
   * file. An unchanged seed leaves whatever was published at runtime active, so a restart keeps
   * the active revision. A rejected seed with no active revision throws a
   * {@link PublicationSeedError} naming every issue; with one, it stays active and the rejection is
   * in the history.
   */
  async adoptSeed(seed: () => unknown, check: CandidateCheck): Promise<void> {
    const document = seed();
    const digest = await canonicalDigest(document);
    if (this.#store.seedDigest() === digest && this.#active() !== undefined) return;
    const result = await this.publish(document, "seed", check);
    if (result.status === "rejected") {
      if (this.#active() === undefined) throw new PublicationSeedError(`bundled publication.yaml was rejected: ${result.issues.map((i) => `${i.path}: ${i.message}`).join("; ")}`);
      return;
    }
    this.#store.transaction(() => this.#store.setSeedDigest(digest));
  }

  /** The active revision's number and digest (seeding first if needed): cheap enough for every isolate's refresh. */
  async head(seed: () => unknown, check: CandidateCheck): Promise<PublicationHead> {
    const a = await this.activeOrSeed(seed, check);
    return { revision: a.revision, digest: a.digest, canary: a.canary };
  }

  /** A stored revision, as an isolate compiles it. */
  get(revision: number): ActivePublication | undefined {
    const r = this.#store.getRevision(revision);
    return r && { revision: r.revision, digest: r.digest, label: r.label, document: r.document };
  }

  /**
   * Checks a candidate and activates it atomically. The same content as the active revision is a
   * no-op; a rejected candidate leaves the active revision as it was and is recorded with every
   * issue; content identical to an older stored revision re-activates that revision's number.
   *
   * With `options.canary` (1..99) the candidate is checked the same way and stored, but not
   * activated: it becomes the canary, serving that share of callers until {@link promote} or
   * {@link abort}. The running canary's own content again only changes its share. While a canary
   * runs, any other publish is refused (one candidate at a time, so the canary's figures say what
   * they seem to).
   */
  async publish(candidate: unknown, source: string, check: CandidateCheck, seed?: () => unknown, options: PublishOptions = {}): Promise<PublishResult> {
    const percent = options.canary;
    if (percent !== undefined && !(Number.isInteger(percent) && percent >= 1 && percent <= 99)) throw new RangeError(`canary percent must be an integer 1..99, not ${percent}`);
    // The bundled publication is adopted first, so it is revision 1 even when the first thing that happens is a publish.
    if (seed !== undefined) await this.activeOrSeed(seed, check);
    const result = await this.#publish(candidate, source, check, percent === undefined ? { kind: "publish" } : { kind: "canary", percent });
    if (result.status === "conflict") throw new Error("unreachable: a publish without a base revision cannot conflict");
    return result;
  }

  /**
   * Applies a key operation to the active revision's document and publishes the result, checked as
   * any candidate is. Read, change and activate are one compare-and-set on the active revision: a
   * publish that lands between them makes this one start again from the new revision, so two
   * operators' key changes never overwrite each other.
   */
  async amendKeys(op: KeyOperation, source: string, check: CandidateCheck, seed: () => unknown): Promise<KeyAmendResult> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const base = await this.activeOrSeed(seed, check);
      const applied = applyKeyOperation(base.document, op);
      if (!applied.ok) {
        if (applied.notFound === true) return { status: "not_found", message: applied.issues.map((i) => i.message).join("; ") };
        this.#store.transaction(() => this.#store.appendEvent({ at: op.at, kind: "rejected", source, issues: applied.issues }));
        return { status: "rejected", issues: applied.issues };
      }
      // A running canary gets the same change: a revoked key must not keep working for the canary's share of callers.
      const canaryDoc = base.canary === undefined ? undefined : this.get(base.canary.revision)?.document;
      const onCanary = canaryDoc === undefined ? undefined : applyKeyOperation(canaryDoc, op);
      if (onCanary !== undefined && !onCanary.ok) {
        const issues = onCanary.issues.map((i) => ({ ...i, message: `in the running canary: ${i.message}` }));
        this.#store.transaction(() => this.#store.appendEvent({ at: op.at, kind: "rejected", source, issues }));
        return { status: "rejected", issues };
      }
      const plan: PublishPlan = { kind: "amend", base: base.revision, canaryBase: base.canary?.revision, canaryCandidate: onCanary?.document };
      const result = await this.#publish(applied.document, source, check, plan);
      if (result.status === "conflict") continue;
      if (result.status === "canary") throw new Error("unreachable: a key change never starts a canary");
      return result.status === "rejected" ? result : { ...result, key: applied.key };
    }
    const issues = [{ file: "publication.yaml", path: "tenants", message: "the publication kept changing while the key change was applied; try again" }];
    return { status: "rejected", issues };
  }

  /** The keys of the active revision (of one tenant when given), as they stand now. */
  async keys(seed: () => unknown, check: CandidateCheck, tenant?: string): Promise<KeyView[]> {
    const active = await this.activeOrSeed(seed, check);
    return listKeys(active.document, this.#clock.now(), tenant);
  }

  async #publish(candidate: unknown, source: string, check: CandidateCheck, plan: PublishPlan): Promise<PublishResult | { readonly status: "conflict" }> {
    const at = new Date(this.#clock.now()).toISOString();
    // Checking hashes and may ask the snapshot controller (async): it runs before the atomic section.
    const verdict = await check(candidate, this.#store.ledgerRoots());
    const reject = (issues: readonly ConfigIssue[]): PublishResult => {
      this.#store.transaction(() => this.#store.appendEvent({ at, kind: "rejected", source, issues }));
      return { status: "rejected", issues };
    };
    if (!verdict.ok) return reject(verdict.issues);
    const canaryVerdict = plan.kind === "amend" && plan.canaryCandidate !== undefined ? await check(plan.canaryCandidate, this.#store.ledgerRoots()) : undefined;
    if (canaryVerdict !== undefined && !canaryVerdict.ok) return reject(canaryVerdict.issues.map((i) => ({ ...i, message: `in the running canary: ${i.message}` })));
    const percent = plan.kind === "canary" ? plan.percent : undefined;
    return this.#store.transaction((): PublishResult | { readonly status: "conflict" } => {
      // Another publish may have recorded a root while this one was being checked.
      const known = this.#store.ledgerRoots();
      const moved = [...verdict.ledgerRoots].filter(([root, n]) => known.has(root) && known.get(root) !== n);
      if (moved.length > 0) {
        const issues = moved.map(([root, n]) => ({ file: "publication.yaml", path: "tenants", message: `ledger root "${root}" is split over ${known.get(root)} stripes, not ${n}; a running gateway cannot change that` }));
        this.#store.appendEvent({ at, kind: "rejected", source, issues });
        return { status: "rejected", issues };
      }
      const previous = this.#store.activeRevision();
      const running = this.#store.canary();
      if (plan.kind === "amend" && (previous !== plan.base || running?.revision !== plan.canaryBase)) return { status: "conflict" };
      const current = previous === undefined ? undefined : this.#store.getRevision(previous);
      if (plan.kind === "amend" && running !== undefined && canaryVerdict?.ok === true) {
        // The canary keeps its share and start; only its content takes the key change.
        const revision = this.#revisionOf(canaryVerdict, plan.canaryCandidate, at, source);
        if (revision !== running.revision) {
          this.#store.setCanary({ ...running, revision, digest: canaryVerdict.digest });
          this.#store.addLedgerRoots(canaryVerdict.ledgerRoots);
          this.#store.appendEvent({ at, kind: "canary_amended", source, revision, digest: canaryVerdict.digest, percent: running.percent, previous: running.revision });
        }
      } else if (running && !(percent !== undefined && running.digest === verdict.digest)) {
        const issues = [{ file: "publication.yaml", path: "", message: `a canary of revision ${running.revision} is running (${running.percent}%); promote or abort it first` }];
        this.#store.appendEvent({ at, kind: "rejected", source, issues });
        return { status: "rejected", issues };
      }
      if (percent !== undefined) return this.#startCanary(verdict, candidate, source, at, percent, previous, current);
      if (current && current.digest === verdict.digest) {
        this.#store.appendEvent({ at, kind: "unchanged", source, revision: current.revision, digest: current.digest });
        return { status: "unchanged", revision: current.revision, digest: current.digest };
      }
      const revision = this.#revisionOf(verdict, candidate, at, source);
      this.#store.setActive(revision);
      this.#store.addLedgerRoots(verdict.ledgerRoots);
      this.#store.appendEvent({ at, kind: previous === undefined ? "seeded" : "activated", source, revision, digest: verdict.digest, previous });
      this.#store.prune(KEEP_REVISIONS, previous === undefined ? [revision] : [revision, previous]);
      return { status: "activated", revision, digest: verdict.digest, previous };
    });
  }

  /** Inside a transaction: the number of a checked candidate's revision, stored now unless the same content already is. */
  #revisionOf(verdict: Extract<CandidateVerdict, { ok: true }>, document: unknown, at: string, source: string): number {
    return this.#store.findByDigest(verdict.digest)?.revision ?? this.#store.insertRevision({ digest: verdict.digest, label: verdict.publication.revision, document, createdAt: at, source });
  }

  /** Inside publish's transaction: a checked candidate becomes the canary, or the running canary's share changes. */
  #startCanary(
    verdict: Extract<CandidateVerdict, { ok: true }>,
    candidate: unknown,
    source: string,
    at: string,
    percent: number,
    active: number | undefined,
    current: StoredPublication | undefined,
  ): PublishResult {
    // A canary of what already serves everyone would measure nothing.
    if (current && current.digest === verdict.digest) {
      this.#store.appendEvent({ at, kind: "unchanged", source, revision: current.revision, digest: current.digest });
      return { status: "unchanged", revision: current.revision, digest: current.digest };
    }
    const running = this.#store.canary();
    if (running) {
      if (running.percent !== percent) {
        this.#store.setCanary({ ...running, percent });
        this.#store.appendEvent({ at, kind: "canary_percent", source, revision: running.revision, digest: running.digest, percent, previous: active });
      }
      return { status: "canary", revision: running.revision, digest: running.digest, percent, active };
    }
    const revision = this.#revisionOf(verdict, candidate, at, source);
    this.#store.setCanary({ revision, digest: verdict.digest, percent, startedAt: at });
    // Requests it serves use its ledger roots as much as the active revision's.
    this.#store.addLedgerRoots(verdict.ledgerRoots);
    this.#store.appendEvent({ at, kind: "canary_started", source, revision, digest: verdict.digest, percent, previous: active });
    return { status: "canary", revision, digest: verdict.digest, percent, active };
  }

  /**
   * The canary becomes the active revision, as a publish of it would make it (the revision it
   * replaces is the last-known-good), and stops being a canary.
   */
  promote(source: string): CanaryResult {
    const at = new Date(this.#clock.now()).toISOString();
    return this.#store.transaction((): CanaryResult => {
      const canary = this.#store.canary();
      if (!canary) return { status: "not_found", message: "no publication canary is running" };
      const previous = this.#store.activeRevision();
      this.#store.setActive(canary.revision);
      this.#store.setCanary(undefined);
      this.#store.appendEvent({ at, kind: "canary_promoted", source, revision: canary.revision, digest: canary.digest, percent: canary.percent, previous });
      this.#store.prune(KEEP_REVISIONS, previous === undefined ? [canary.revision] : [canary.revision, previous]);
      return { status: "promoted", revision: canary.revision, digest: canary.digest, previous };
    });
  }

  /** Ends the canary: every caller is served the active revision again. The canary's revision stays stored. */
  abort(source: string): CanaryResult {
    const at = new Date(this.#clock.now()).toISOString();
    return this.#store.transaction((): CanaryResult => {
      const canary = this.#store.canary();
      if (!canary) return { status: "not_found", message: "no publication canary is running" };
      this.#store.setCanary(undefined);
      this.#store.appendEvent({ at, kind: "canary_aborted", source, revision: canary.revision, digest: canary.digest, percent: canary.percent, previous: this.#store.activeRevision() });
      return { status: "aborted", revision: canary.revision, digest: canary.digest };
    });
  }

  /**
   * Re-activates a stored, verified revision: the given one, or else the last-known-good (the
   * revision active before the current one). It is not checked again: rollback must work when the
   * newest publication is the problem, and every stored revision passed when it was first activated.
   */
  rollback(target: number | undefined, source: string): PublicationRollbackResult {
    const at = new Date(this.#clock.now()).toISOString();
    return this.#store.transaction((): PublicationRollbackResult => {
      const current = this.#store.activeRevision();
      const revision = target ?? this.#lastKnownGood(current);
      if (revision === undefined) return { status: "not_found", message: "there is no previous publication revision to roll back to" };
      const stored = this.#store.getRevision(revision);
      if (!stored) return { status: "not_found", message: `publication revision ${revision} is not stored` };
      // A rollback is the emergency exit: a running canary ends with it, so every caller gets the rolled-back revision.
      const canary = this.#store.canary();
      if (canary) {
        this.#store.setCanary(undefined);
        this.#store.appendEvent({ at, kind: "canary_aborted", source, revision: canary.revision, digest: canary.digest, percent: canary.percent, previous: current, reason: "rollback" });
      }
      if (revision !== current) {
        this.#store.setActive(revision);
        this.#store.appendEvent({ at, kind: "rolled_back", source, revision, digest: stored.digest, previous: current });
      }
      return { status: "activated", revision, digest: stored.digest, previous: current, ...(canary ? { abortedCanary: canary.revision } : {}) };
    });
  }

  /** The revision that was active before `current` became active. */
  #lastKnownGood(current: number | undefined): number | undefined {
    return this.#store.events(1000).find((e) => (e.kind === "activated" || e.kind === "rolled_back" || e.kind === "canary_promoted") && e.revision === current)?.previous;
  }

  /** Activation history, newest first, the stored revisions, the active one and the last-known-good. */
  history(limit = 50): PublicationHistory {
    const active = this.#store.activeRevision();
    return { active, lastKnownGood: this.#lastKnownGood(active), canary: this.#store.canary(), events: this.#store.events(limit), revisions: this.#store.revisions(limit) };
  }
}
