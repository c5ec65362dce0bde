/**
 * What an attempt proves about the backend having accepted (and possibly billed) the work. Retry
 * and fallback read only this, never error text.
 *
 * - `known_zero`: the backend provably did not accept the request: its protocol declares the
 *   status as a refusal before processing (e.g. a 429 rate-limit answer).
 * - `unknown`: it may have accepted it: a 5xx after acceptance, a timeout or a connection failure
 *   once the request may have been written, a cut stream. Never retried.
 * - `client_error`: the request itself was refused (4xx other than the declared ones).
 * - `success`.
 *
 * A connection failure without response headers is `unknown`: workerd's fetch reports a refused
 * connection and a reset after the body was written with the same error (no structured field
 * tells them apart), and treating a reset as known-zero would bill twice. Backends with
 * `connectCheck` open a TCP connection first: when THAT fails, nothing was sent — known-zero.
 */
export type EvidenceClass = "known_zero" | "unknown" | "client_error" | "success";

/** Why an attempt got its class, for records and tests. */
export type EvidenceReason =
  | "ok"
  | "rejected_before_processing"
  | "connect_failed"
  | "status_after_acceptance"
  | "status_client_error"
  | "network_error"
  | "timeout"
  | "client_cancelled"
  | "protocol_error"
  | "stream_cut"
  | "not_attempted";

export interface Evidence {
  readonly class: EvidenceClass;
  readonly reason: EvidenceReason;
  readonly status?: number | undefined;
  /** Seconds the backend asked to wait (`retry-after`), when it said. */
  readonly retryAfterSeconds?: number | undefined;
}

/**
 * Classifies a provider status. `rejectedBeforeProcessing` comes from the backend protocol's codec:
 * statuses that protocol documents as refusing work before doing any (conservative: only rate
 * limiting and overload answers a provider sends instead of starting work).
 */
export function evidenceFromStatus(status: number, rejectedBeforeProcessing: ReadonlySet<number>, retryAfterSeconds?: number): Evidence {
  if (status >= 200 && status < 300) return { class: "success", reason: "ok", status };
  if (rejectedBeforeProcessing.has(status)) return { class: "known_zero", reason: "rejected_before_processing", status, retryAfterSeconds };
  if (status >= 500) return { class: "unknown", reason: "status_after_acceptance", status, retryAfterSeconds };
  return { class: "client_error", reason: "status_client_error", status };
}
