import { GatewayError } from "../errors/gateway-error.ts";
import { upstreamAuthFailed } from "./upstream-error.ts";
import type { StatusFailure } from "./workers-ai-binding.ts";

/**
 * Bedrock names each error in the `x-amzn-errortype` header (`ThrottlingException`, or
 * `ThrottlingException:http://…`); its body is `{"message": …}`. The name, not the message text,
 * says what a non-2xx answer means.
 */
export function bedrockErrorType(header: string | null): string | undefined {
  if (header === null || header === "") return undefined;
  const colon = header.indexOf(":");
  return colon < 0 ? header : header.slice(0, colon);
}

/** Errors that mean the gateway's own AWS credentials were refused (never the caller's). */
const CREDENTIAL_ERRORS: ReadonlySet<string> = new Set([
  "AccessDeniedException",
  "UnrecognizedClientException",
  "InvalidSignatureException",
  "IncompleteSignatureException",
  "ExpiredTokenException",
  "MissingAuthenticationTokenException",
]);

/**
 * Bedrock errors whose meaning differs from their status's usual one, else undefined (the
 * status decides, as for every protocol: ThrottlingException and ModelNotReadyException are 429s
 * and ServiceUnavailableException a 503, all refusals before any work; ValidationException a 400).
 *
 * - A refused credential (403) is the gateway's configuration, never the caller's request:
 *   `upstream_auth_failed`, with the client-error evidence a 4xx has (no retry helps).
 * - ModelTimeoutException (408) and ModelErrorException (424) come after the model ran: unknown
 *   evidence, never retried; the first is a timeout for the breaker.
 */
export function bedrockStatusFailure(status: number, errorType: string | undefined, detail: string): StatusFailure | undefined {
  const cause = { status, errorType, detail: detail.slice(0, 2000) };
  if (errorType !== undefined && CREDENTIAL_ERRORS.has(errorType)) {
    return {
      error: upstreamAuthFailed(cause),
      evidence: { class: "client_error", reason: "status_client_error", status },
      outcome: "upstream_status",
    };
  }
  if (errorType === "ModelTimeoutException" || status === 408) {
    return {
      error: new GatewayError("upstream_timeout", "The model provider did not finish in time.", { cause }),
      evidence: { class: "unknown", reason: "status_after_acceptance", status },
      outcome: "timeout",
    };
  }
  if (errorType === "ModelErrorException" || status === 424) {
    return {
      error: new GatewayError("upstream_error", "The model failed while processing the request.", { cause }),
      evidence: { class: "unknown", reason: "status_after_acceptance", status },
      outcome: "upstream_status",
    };
  }
  return undefined;
}
