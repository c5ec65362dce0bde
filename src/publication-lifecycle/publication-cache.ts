import type { Clock } from "../deps/clock.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { ActivePublication, PublicationHead } from "./controller.ts";
import type { PublicationControllerClient } from "./controller-client.ts";
import { canaryBucket } from "./canary-bucket.ts";

/** Options of {@link PublicationCache}. */
export interface PublicationCacheOptions {
  readonly clock: Clock;
  /** How long a revision serves before the controller is asked again: the bound on propagation. */
  readonly ttlMs: number;
  /** Compiled revisions kept: the active one, and the ones requests still in flight may hold. */
  readonly keep?: number;
  /** A refresh that failed while a known revision keeps serving (for logs and metrics). */
  readonly onRefreshFailure?: (err: unknown) => void;
}

/**
 * An isolate's view of the active publication, with bounded staleness. A request takes the value
 * {@link current} gives it and keeps it for its whole life; that value is built (compiled) once per
 * revision per isolate and reused by every request of that revision. At most once per `ttlMs` the
 * controller is asked for the active revision's number and digest only; the document is fetched
 * and built only when the revision is one this isolate has not built. An unreachable controller
 * leaves the last-known revision serving; with none, requests fail with publication_unavailable.
 *
 * While a canary runs, the canary's revision is built too, and a request whose routing key falls
 * in the canary's share (see {@link canaryBucket}) gets it; one without a key gets the stable one.
 */
export class PublicationCache<T> {
  readonly #client: Pick<PublicationControllerClient, "getActive" | "head" | "get">;
  readonly #build: (active: ActivePublication) => T | Promise<T>;
  readonly #o: Required<PublicationCacheOptions>;
  /** Built revisions, oldest first. */
  readonly #built = new Map<number, { readonly digest: string; readonly value: T }>();
  #current: { readonly revision: number; readonly value: T } | undefined;
  #canary: CanaryView<T> | undefined;
  #fetchedAt = Number.NEGATIVE_INFINITY;
  #inflight: Promise<T> | undefined;

  constructor(client: Pick<PublicationControllerClient, "getActive" | "head" | "get">, build: (active: ActivePublication) => T | Promise<T>, options: PublicationCacheOptions) {
    this.#client = client;
    this.#build = build;
    this.#o = { keep: 4, onRefreshFailure: () => {}, ...options };
  }

  /**
   * What a new request pins: the active revision as this isolate last saw it (refreshed when
   * stale), or the canary's when one runs and the request's routing key falls in its share. The
   * key is asked for only while a canary runs, so the path without one costs nothing more.
   */
  current(routingKey?: () => string | undefined): Promise<T> {
    if (this.#current && this.#o.clock.now() - this.#fetchedAt < this.#o.ttlMs) return Promise.resolve(this.#canary === undefined ? this.#current.value : this.#pick(this.#current.value, routingKey));
    return routingKey === undefined ? this.#refresh() : this.#refresh().then((stable) => (this.#canary === undefined ? stable : this.#pick(stable, routingKey)));
  }

  #pick(stable: T, routingKey: (() => string | undefined) | undefined): T {
    const canary = this.#canary!;
    const key = routingKey?.();
    return key !== undefined && canaryBucket(key) < canary.percent ? canary.value : stable;
  }

  /** The next {@link current} asks the controller (after this isolate published or rolled back). */
  invalidate(): void {
    this.#fetchedAt = Number.NEGATIVE_INFINITY;
  }

  /** The revision this isolate serves now, without refreshing (status pages). */
  peek(): { readonly revision: number; readonly value: T } | undefined {
    return this.#current;
  }

  /** The canary this isolate serves beside the stable revision, without refreshing (status pages, metrics). */
  peekCanary(): CanaryView<T> | undefined {
    return this.#canary;
  }

  /** Revisions built in this isolate (metrics, tests). */
  builtRevisions(): number[] {
    return [...this.#built.keys()];
  }

  #refresh(): Promise<T> {
    this.#inflight ??= this.#load()
      .then((value) => {
        this.#fetchedAt = this.#o.clock.now();
        return value;
      })
      .catch((err: unknown) => {
        if (this.#current) {
          this.#o.onRefreshFailure(err);
          // Back off for one TTL rather than asking a failing controller on every request.
          this.#fetchedAt = this.#o.clock.now();
          return this.#current.value;
        }
        throw new GatewayError("publication_unavailable", "The gateway has no publication yet. Try again shortly.", { cause: err, retryAfterSeconds: 1 });
      })
      .finally(() => {
        this.#inflight = undefined;
      });
    return this.#inflight;
  }

  async #load(): Promise<T> {
    // The first load also seeds the controller; later ones ask only for the head.
    const head = this.#current === undefined ? await this.#client.getActive() : await this.#client.head();
    const known = this.#built.get(head.revision);
    const stable =
      known && known.digest === head.digest
        ? { revision: head.revision, value: known.value }
        : await this.#builtOf("document" in head ? (head as ActivePublication) : ((await this.#client.get(head.revision)) ?? (await this.#client.getActive())));
    this.#canary = await this.#canaryOf(head.canary);
    this.#current = stable;
    return stable.value;
  }

  /** The canary's view, built once per revision as the stable one is; none when none runs (or it cannot be built: logged, stable serves all). */
  async #canaryOf(c: PublicationHead["canary"]): Promise<CanaryView<T> | undefined> {
    if (c === undefined) return undefined;
    try {
      const known = this.#built.get(c.revision);
      if (known && known.digest === c.digest) return { revision: c.revision, percent: c.percent, value: known.value };
      const doc = await this.#client.get(c.revision);
      if (!doc) throw new Error(`canary revision ${c.revision} is not stored`);
      return { ...(await this.#builtOf(doc)), percent: c.percent };
    } catch (err) {
      this.#o.onRefreshFailure(err);
      return undefined;
    }
  }

  async #builtOf(p: ActivePublication): Promise<{ readonly revision: number; readonly value: T }> {
    const value = await this.#build(p);
    this.#built.delete(p.revision);
    this.#built.set(p.revision, { digest: p.digest, value });
    while (this.#built.size > this.#o.keep) this.#built.delete(this.#built.keys().next().value!);
    return { revision: p.revision, value };
  }
}

/** A canary as an isolate serves it: its revision's built value and its share of routing keys. */
export interface CanaryView<T> {
  readonly revision: number;
  /** Share of routing keys, 1..99. */
  readonly percent: number;
  readonly value: T;
}
