/** What the isolate last saw of a backend's credential. */
export interface CredentialView {
  /** `credential_rejected`: the provider's last word on it was a refusal (401/403 or its protocol's equivalent). */
  readonly state: "credential_rejected" | "accepted";
  /** The provider's status of the last refusal. */
  readonly status?: number | undefined;
  /** When the state was last confirmed (epoch ms). */
  readonly at: number;
}

/**
 * Which backends' providers refused the gateway's own credential, as this isolate saw it in its
 * traffic: a refusal (`upstream_auth_failed`) marks the backend, the next answer the provider
 * accepted clears it. Kept per isolate, like the breaker's cached view, so `/admin/status` can say
 * "the key is wrong" where the breaker (which treats a refusal as no fault of the backend's health)
 * says nothing. Bounded: the least recently seen backends are dropped past `maxEntries`.
 */
export class CredentialWatch {
  readonly #views = new Map<string, CredentialView>();
  readonly #maxEntries: number;

  constructor(maxEntries = 1024) {
    this.#maxEntries = maxEntries;
  }

  /** The provider refused the backend's credential with `status`. */
  rejected(backendId: string, status: number | undefined, now: number): void {
    this.#set(backendId, { state: "credential_rejected", status, at: now });
  }

  /** The provider accepted the backend's credential (it answered 2xx). */
  accepted(backendId: string, now: number): void {
    const v = this.#views.get(backendId);
    // Most answers are this: only a change (or a first sighting) touches the map's order.
    if (v?.state === "accepted") return;
    this.#set(backendId, { state: "accepted", at: now });
  }

  /** The last view of a backend's credential; undefined when this isolate has not used it. */
  view(backendId: string): CredentialView | undefined {
    return this.#views.get(backendId);
  }

  #set(backendId: string, view: CredentialView): void {
    this.#views.delete(backendId);
    this.#views.set(backendId, view);
    if (this.#views.size > this.#maxEntries) this.#views.delete(this.#views.keys().next().value!);
  }
}
