import type { GatewayError } from "../errors/gateway-error.ts";

/**
 * The log line of a request that ended in an error, if it gets one. A client that left (mid-body,
 * while queued, mid-attempt) is a cancellation, not a failure: it is logged apart from
 * `request_failed` so alerts on failures do not fire for clients that hang up. Client mistakes
 * (4xx) are the client's business and are not logged.
 */
export function logRequestError(requestId: string, err: GatewayError): void {
  if (err.code === "client_closed") {
    console.error(JSON.stringify({ kind: "request_cancelled", requestId, code: err.code }));
  } else if (err.source === "internal") {
    console.error(JSON.stringify({ kind: "request_failed", requestId, code: err.code, cause: String(err.cause) }));
  }
}
