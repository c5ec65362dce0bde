import type { BreakerReport } from "../traffic/breaker.ts";
import type { AttemptRecord } from "../context/attempt-record.ts";

/**
 * What a finished attempt tells a backend's circuit breaker. Only the backend's own failures count:
 * a client's bad request, a client leaving, the caller's deadline or a missing credential in the
 * gateway's config say nothing about the backend's health and are neutral.
 */
export function breakerReport(a: Readonly<AttemptRecord>): BreakerReport {
  switch (a.outcome) {
    case "success":
      return "success";
    case "upstream_status":
      return a.status !== undefined && (a.status === 429 || a.status >= 500) ? "failure" : "neutral";
    case "timeout":
      return a.errorCode === "upstream_timeout" ? "failure" : "neutral";
    case "network_error":
    case "stream_cut":
    case "protocol_error":
      return "failure";
    case "connect_failed":
      // A connection the backend refused counts; a credential missing from the gateway's own
      // config (also never sent) says nothing about the backend.
      return a.errorCode === "upstream_unreachable" ? "failure" : "neutral";
    case "client_cancelled":
    case "in_progress":
    case "not_sent":
      return "neutral";
    case "gateway_error":
      // The gateway failed under the attempt: the backend may well have been fine.
      return "neutral";
  }
}
