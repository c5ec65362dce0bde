import type { Clock } from "../deps/clock.ts";
import { GatewayError } from "../errors/gateway-error.ts";
import type { ActivePublication } from "./controller.ts";
import type { PublicationControllerClient } from "./controller-client.ts";

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
 */
export class PublicationCache<T> {
  readonly #client: Pick<PublicationControllerClient, "getActive" | "head" | "get">;
  readonly #build: (active: ActivePublication) => T | Promise<T>;
  readonly #o: Required<PublicationCacheOptions>;
  /** Built revisions, oldest first. */
  readonly #built = new Map<number, { readonly digest: string; readonly value: T }>();
  #current: { readonly revision: number; readonly value: T } | undefined;
  #fetchedAt = Number.NEGATIVE_INFINITY;
  #inflight: Promise<T> | undefined;

  constructor(client: Pick<PublicationControllerClient, "getActive" | "head" | "get">, build: (active: ActivePublication) => T | Promise<T>, options: PublicationCacheOptions) {
    this.#client = client;
    this.#build = build;
    this.#o = { keep: 4, onRefreshFailure: () => {}, ...options };
  }

  /** What a new request pins: the active revision as this isolate last saw it (refreshed when stale). */
  current(): Promise<T> {
    if (this.#current && this.#o.clock.now() - this.#fetchedAt < this.#o.ttlMs) return Promise.resolve(this.#current.value);
    return this.#refresh();
  }

  /** The next {@link current} asks the controller (after this isolate published or rolled back). */
  invalidate(): void {
    this.#fetchedAt = Number.NEGATIVE_INFINITY;
  }

  /** The revision this isolate serves now, without refreshing (status pages). */
  peek(): { readonly revision: number; readonly value: T } | undefined {
    return this.#current;
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
    if (known && known.digest === head.digest) return this.#serve(head.revision, known.value);
    const active = "document" in head ? (head as ActivePublication) : ((await this.#client.get(head.revision)) ?? (await this.#client.getActive()));
    const value = await this.#build(active);
    this.#built.delete(active.revision);
    this.#built.set(active.revision, { digest: active.digest, value });
    while (this.#built.size > this.#o.keep) this.#built.delete(this.#built.keys().next().value!);
    return this.#serve(active.revision, value);
  }

  #serve(revision: number, value: T): T {
    this.#current = { revision, value };
    return value;
  }
}
