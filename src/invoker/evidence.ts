import type { Evidence } from "../context/attempt-record.ts";

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
