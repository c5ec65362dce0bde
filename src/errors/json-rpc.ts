import type { ErrorCode, GatewayError } from "./gateway-error.ts";

/**
 * JSON-RPC error codes for MCP and A2A: the protocol's own where one exists (JSON-RPC 2.0's, and MCP
 * 2026-07-28's -32020 HeaderMismatch, -32021 MissingRequiredClientCapability, -32022
 * UnsupportedProtocolVersion; A2A's -32001 TaskNotFound, -32002 TaskNotCancelable, -32009 VersionNotSupported and -32004 UnsupportedOperation), and -32000 (the server-defined range) for every gateway refusal,
 * whose Sluice code then rides in `error.data.code`. One exhaustive switch, as for the HTTP
 * envelopes: a new code without a JSON-RPC code does not compile.
 */
export function jsonRpcCode(code: ErrorCode): number {
  switch (code) {
    case "invalid_json":
      return -32700;
    case "mcp_invalid_message":
    case "unsupported_media_type":
    case "not_acceptable":
    case "origin_not_allowed":
    case "request_too_large":
    case "headers_too_large":
    case "json_too_deep":
    case "method_not_allowed":
      return -32600;
    case "mcp_method_not_found":
    case "agent_method_not_found":
      return -32601;
    case "invalid_request":
      return -32602;
    case "internal_error":
      return -32603;
    case "mcp_header_mismatch":
      return -32020;
    case "agent_call_not_bridgeable":
      // A2A's UnsupportedOperationError, the same code in 0.3 and 1.0.
      return -32004;
    case "mcp_missing_capability":
      return -32021;
    case "mcp_unsupported_version":
      return -32022;
    case "agent_version_not_supported":
      // A2A's VersionNotSupportedError: `data.supported` names the versions the caller may use.
      return -32009;
    case "agent_operation_unsupported":
      // A2A's UnsupportedOperationError.
      return -32004;
    case "agent_task_not_found":
      // A2A's TaskNotFoundError, the same code in 0.3 and 1.0.
      return -32001;
    case "agent_task_not_cancelable":
      // A2A's TaskNotCancelableError, the same code in 0.3 and 1.0.
      return -32002;
    case "approval_required":
    case "mcp_url_elicitation_required":
      // URLElicitationRequiredError (MCP 2025-11-25): `data.elicitations` names the approval's page,
      // or the pages a server sends its user to.
      return -32042;
    case "missing_api_key":
    case "invalid_api_key":
    case "admin_unauthorized":
    case "model_not_found":
    case "model_not_allowed":
    case "tool_not_allowed":
    case "approval_refused":
    case "task_not_yours":
    case "attribution_required":
    case "content_blocked":
    case "invalid_token":
    case "insufficient_scope":
    case "jwks_unavailable":
    case "not_found":
    case "agent_not_found":
    case "agent_card_unavailable":
    case "no_backend_available":
    case "gateway_overloaded":
    case "gateway_draining":
    case "attempt_budget_exhausted":
    case "attempt_budget_unavailable":
    case "budget_exceeded":
    case "token_limit_exceeded":
    case "request_rate_exceeded":
    case "balance_exhausted":
    case "budget_unavailable":
    case "signal_unavailable":
    case "looper_bound_exceeded":
    case "agent_not_routable":
    case "deadline_exceeded":
    case "client_closed":
    case "upstream_error":
    case "upstream_unreachable":
    case "upstream_auth_failed":
    case "upstream_rate_limited":
    case "upstream_overloaded":
    case "upstream_protocol_error":
    case "upstream_stream_cut":
    case "upstream_timeout":
    case "snapshot_unavailable":
    case "publication_unavailable":
    case "config_invalid":
    case "snapshot_rejected":
    case "publication_rejected":
    case "revision_not_found":
      return -32000;
  }
}

/** A JSON-RPC error response body; `id` is null when the request's id could not be read. */
export interface JsonRpcErrorBody {
  readonly jsonrpc: "2.0";
  readonly id: string | number | null;
  readonly error: { readonly code: number; readonly message: string; readonly data: { readonly code: ErrorCode; readonly retryable: boolean; readonly details?: readonly unknown[]; readonly [field: string]: unknown } };
}

/** The JSON-RPC envelope of an error (MCP, A2A); the Sluice code is always in `error.data.code`. */
export function toJsonRpcErrorBody(err: GatewayError, id: string | number | null): JsonRpcErrorBody {
  // MCP's and A2A's own errors carry their specified data fields (UnsupportedProtocolVersion,
  // VersionNotSupported: `supported`, `requested`) at the top of `data`, where clients read them.
  const own = (err.code.startsWith("mcp_") || err.code === "agent_version_not_supported" || err.code === "approval_required") && err.details?.length === 1 && typeof err.details[0] === "object" && err.details[0] !== null ? (err.details[0] as Record<string, unknown>) : {};
  return {
    jsonrpc: "2.0",
    id,
    error: { code: jsonRpcCode(err.code), message: err.message, data: { ...own, code: err.code, retryable: err.retryable, ...(err.details !== undefined ? { details: err.details } : {}) } },
  };
}
