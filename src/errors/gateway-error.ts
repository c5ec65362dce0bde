/**
 * Every failure Sluice reports has one of these codes. The code, not the message text, decides the
 * HTTP status, the protocol envelope and whether a retry could help. A list of values and not only
 * a type, so docs/errors.md can be checked against the complete set
 * (test/architecture/docs-errors.test.ts).
 */
export const ERROR_CODES = [
  "invalid_json",
  "invalid_request",
  "unsupported_media_type",
  "request_too_large",
  "headers_too_large",
  "json_too_deep",
  "missing_api_key",
  "invalid_api_key",
  "model_not_found",
  "model_not_allowed",
  "not_found",
  "method_not_allowed",
  "no_backend_available",
  "gateway_overloaded",
  "gateway_draining",
  "attempt_budget_exhausted",
  "attempt_budget_unavailable",
  "budget_exceeded",
  "token_limit_exceeded",
  "request_rate_exceeded",
  "balance_exhausted",
  "budget_unavailable",
  "deadline_exceeded",
  "client_closed",
  "upstream_error",
  "upstream_unreachable",
  "upstream_auth_failed",
  "upstream_rate_limited",
  "upstream_overloaded",
  "upstream_protocol_error",
  "upstream_stream_cut",
  "upstream_timeout",
  "snapshot_unavailable",
  "publication_unavailable",
  "config_invalid",
  "admin_unauthorized",
  "snapshot_rejected",
  "publication_rejected",
  "revision_not_found",
  "internal_error",
  "mcp_invalid_message",
  "mcp_header_mismatch",
  "mcp_missing_capability",
  "mcp_unsupported_version",
  "mcp_method_not_found",
  "mcp_url_elicitation_required",
  "origin_not_allowed",
  "not_acceptable",
  "tool_not_allowed",
  "invalid_token",
  "insufficient_scope",
  "jwks_unavailable",
  "approval_required",
  "approval_refused",
  "task_not_yours",
  "attribution_required",
  "content_blocked",
  "signal_unavailable",
  "looper_bound_exceeded",
  "agent_not_found",
  "agent_task_not_found",
  "agent_card_unavailable",
  "agent_not_routable",
  "agent_version_not_supported",
  "agent_method_not_found",
  "agent_operation_unsupported",
  "agent_call_not_bridgeable",
  "agent_task_not_cancelable",
] as const;

/** One of {@link ERROR_CODES}. */
export type ErrorCode = (typeof ERROR_CODES)[number];

/** Who caused the failure. */
export type ErrorSource = "client" | "upstream" | "internal";

interface CodeFacts {
  readonly status: number;
  readonly source: ErrorSource;
  /** Whether repeating the same request later could succeed (advisory for clients). */
  readonly retryable: boolean;
}

/**
 * One exhaustive table: adding a code without facts is a compile error.
 * 499 is the de-facto "client closed request" status; it never reaches a client that left.
 */
function factsOf(code: ErrorCode): CodeFacts {
  switch (code) {
    case "invalid_json":
    case "invalid_request":
    case "json_too_deep":
    case "mcp_invalid_message":
    case "mcp_header_mismatch":
    case "mcp_missing_capability":
    case "mcp_unsupported_version":
    case "agent_version_not_supported":
    case "agent_operation_unsupported":
    case "attribution_required":
    case "content_blocked":
      return { status: 400, source: "client", retryable: false };
    case "origin_not_allowed":
    case "tool_not_allowed":
    case "task_not_yours":
      return { status: 403, source: "client", retryable: false };
    case "not_acceptable":
      return { status: 406, source: "client", retryable: false };
    case "unsupported_media_type":
      return { status: 415, source: "client", retryable: false };
    case "request_too_large":
      return { status: 413, source: "client", retryable: false };
    case "headers_too_large":
      return { status: 431, source: "client", retryable: false };
    case "missing_api_key":
    case "invalid_api_key":
    case "admin_unauthorized":
    case "invalid_token":
      return { status: 401, source: "client", retryable: false };
    case "insufficient_scope":
    case "approval_refused":
      return { status: 403, source: "client", retryable: false };
    case "approval_required":
      // The same call succeeds once a human approved it: retrying then is the point.
      return { status: 403, source: "client", retryable: true };
    case "mcp_url_elicitation_required":
      // The server's own: the same call succeeds once the user has been where its URLs lead.
      return { status: 403, source: "upstream", retryable: true };
    case "jwks_unavailable":
      // The issuer's keys could not be read: the token may be fine, and a later try may verify it.
      return { status: 503, source: "internal", retryable: true };
    case "model_not_allowed":
      return { status: 403, source: "client", retryable: false };
    case "attempt_budget_exhausted":
      // The caller's own budget for this call is spent: repeating the call cannot help.
      return { status: 429, source: "client", retryable: false };
    case "attempt_budget_unavailable":
    case "budget_unavailable":
    case "signal_unavailable":
      return { status: 503, source: "internal", retryable: true };
    case "budget_exceeded":
    case "token_limit_exceeded":
    case "request_rate_exceeded":
      // A windowed limit: the same request can pass once the period or window rolls over.
      return { status: 429, source: "client", retryable: true };
    case "balance_exhausted":
      // A prepaid balance only grows by a top-up: waiting does not help.
      return { status: 402, source: "client", retryable: false };
    case "model_not_found":
    case "not_found":
    case "revision_not_found":
    case "mcp_method_not_found":
    case "agent_method_not_found":
    case "agent_not_found":
    case "agent_task_not_found":
      return { status: 404, source: "client", retryable: false };
    case "agent_task_not_cancelable":
      // The task already ended (ran, rejected, expired, canceled): cancelling it again changes nothing.
      return { status: 409, source: "client", retryable: false };
    case "method_not_allowed":
      return { status: 405, source: "client", retryable: false };
    case "snapshot_rejected":
    case "publication_rejected":
    case "config_invalid":
      return { status: 422, source: "client", retryable: false };
    case "client_closed":
      return { status: 499, source: "client", retryable: false };
    case "no_backend_available":
    case "snapshot_unavailable":
    case "publication_unavailable":
    case "gateway_overloaded":
    case "gateway_draining":
      return { status: 503, source: "internal", retryable: true };
    case "deadline_exceeded":
      return { status: 504, source: "internal", retryable: true };
    case "upstream_timeout":
      return { status: 504, source: "upstream", retryable: true };
    case "upstream_rate_limited":
      return { status: 429, source: "upstream", retryable: true };
    case "upstream_overloaded":
      return { status: 503, source: "upstream", retryable: true };
    case "agent_card_unavailable":
      // No good card of the agent has been fetched yet: its registry keeps trying on its alarm.
      return { status: 503, source: "upstream", retryable: true };
    case "upstream_unreachable":
    case "upstream_error":
    case "upstream_protocol_error":
    case "upstream_stream_cut":
      return { status: 502, source: "upstream", retryable: true };
    case "upstream_auth_failed":
      // The provider refused the gateway's own credential: a 502 (the caller's request is fine),
      // and the same request fails the same way until an operator replaces the key.
      return { status: 502, source: "upstream", retryable: false };
    case "internal_error":
      return { status: 500, source: "internal", retryable: false };
    case "agent_not_routable":
      // The agent holding the caller's context (or every agent of its route) cannot serve now;
      // another agent would not resume the context, so the caller waits for this one.
      return { status: 503, source: "upstream", retryable: true };
    case "agent_call_not_bridgeable":
      // A call valid in the caller's A2A generation that the agent's generation cannot express:
      // the same call fails the same way until the agent speaks the caller's generation.
      return { status: 400, source: "client", retryable: false };
    case "looper_bound_exceeded":
      // The operator's bound on one algorithm run was reached: the same request would reach it again.
      return { status: 503, source: "internal", retryable: false };
  }
}

export interface GatewayErrorOptions {
  /** The request field at fault, when there is one (OpenAI's `param`). */
  readonly param?: string | undefined;
  /** Seconds a client should wait before retrying (sets `retry-after`). */
  readonly retryAfterSeconds?: number | undefined;
  /** Internal detail for logs only; never rendered to a client. */
  readonly cause?: unknown;
  /** Structured reasons (e.g. snapshot validation failures) safe to show the caller. */
  readonly details?: readonly unknown[] | undefined;
  /** The `WWW-Authenticate: Bearer` challenge an OAuth-protected endpoint answers with. */
  readonly challenge?: BearerChallenge | undefined;
}

/**
 * An RFC 6750 Bearer challenge with RFC 9728's `resource_metadata`. Every value is the
 * gateway's own text (configuration, fixed descriptions), never the caller's.
 */
export interface BearerChallenge {
  /** Absent when no credential was presented (RFC 6750 section 3.1). */
  readonly error?: "invalid_token" | "insufficient_scope" | undefined;
  readonly errorDescription?: string | undefined;
  /** Space-separated scopes the request needs. */
  readonly scope?: string | undefined;
  /** The protected resource metadata URL (RFC 9728 section 5.1). */
  readonly resourceMetadata?: string | undefined;
}

/**
 * The single error type of Sluice. `message` is public text: write it for the caller, never include
 * secrets, addresses or stack traces.
 */
export class GatewayError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly source: ErrorSource;
  readonly retryable: boolean;
  readonly param: string | undefined;
  readonly retryAfterSeconds: number | undefined;
  readonly details: readonly unknown[] | undefined;
  readonly challenge: BearerChallenge | undefined;

  constructor(code: ErrorCode, message: string, options: GatewayErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    const facts = factsOf(code);
    this.name = "GatewayError";
    this.code = code;
    this.status = facts.status;
    this.source = facts.source;
    this.retryable = facts.retryable;
    this.param = options.param;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.details = options.details;
    this.challenge = options.challenge;
  }
}

/** Who a code blames (the caller, the provider or the gateway), without building an error. */
export function errorSourceOf(code: ErrorCode): ErrorSource {
  return factsOf(code).source;
}

/** Wraps anything thrown into a GatewayError without exposing its text to clients. */
export function toGatewayError(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  return new GatewayError("internal_error", "The gateway failed to process the request.", { cause: err });
}
