import type { ActivePublication, CanaryResult, KeyAmendResult, PublicationHead, PublicationHistory, PublicationRollbackResult, PublishOptions, PublishResult } from "./controller.ts";
import type { KeyOperation, KeyView } from "./key-operations.ts";

/**
 * The publication controller as callers see it. The Durable Object's RPC stub satisfies it; the
 * HTTP layer and the isolates' publication cache depend on this interface, not on the object.
 */
export interface PublicationControllerClient {
  /** The active revision with its document; the controller seeds itself from the bundled publication on first use. */
  getActive(): Promise<ActivePublication>;
  /** The active revision's number and digest, and the running canary's: what an isolate asks each refresh. */
  head(): Promise<PublicationHead>;
  /** A stored revision's document; undefined when it is not stored. */
  get(revision: number): Promise<ActivePublication | undefined>;
  /** Checks a candidate and activates it, or with `options.canary` starts (or re-weights) a canary of it. */
  publish(candidate: unknown, source: string, options?: PublishOptions): Promise<PublishResult>;
  /** The running canary becomes the active revision. */
  promoteCanary(source: string): Promise<CanaryResult>;
  /** The running canary ends; everyone is served the active revision. */
  abortCanary(source: string): Promise<CanaryResult>;
  rollback(revision: number | undefined, source: string): Promise<PublicationRollbackResult>;
  history(limit: number): Promise<PublicationHistory>;
  /** Applies a key change to the active revision and publishes the result (docs/publication.md, Keys). */
  amendKeys(op: KeyOperation, source: string): Promise<KeyAmendResult>;
  /** The active revision's keys, of one tenant when given. */
  keys(tenant?: string): Promise<KeyView[]>;
}
