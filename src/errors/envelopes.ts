import type { ErrorCode, GatewayError } from "./gateway-error.ts";

/** The error `type` each protocol's clients and dashboards branch on. */
export interface ProtocolErrorTypes {
  readonly openai: string;
  readonly anthropic: string;
}

/** One exhaustive switch: every code's type in every protocol. Adding a code without one fails to compile. */
export function errorTypes(code: ErrorCode): ProtocolErrorTypes {
  switch (code) {
    case "invalid_json":
    case "invalid_request":
    case "unsupported_media_type":
    case "headers_too_large":
    case "json_too_deep":
    case "method_not_allowed":
    case "snapshot_rejected":
    case "publication_rejected":
    case "config_invalid":
    case "mcp_invalid_message":
    case "mcp_header_mismatch":
    case "mcp_missing_capability":
    case "mcp_unsupported_version":
    case "agent_version_not_supported":
    case "agent_operation_unsupported":
    case "not_acceptable":
    case "attribution_required":
    case "content_blocked":
    case "agent_call_not_bridgeable":
    case "agent_task_not_cancelable":
      return { openai: "invalid_request_error", anthropic: "invalid_request_error" };
    case "request_too_large":
      return { openai: "invalid_request_error", anthropic: "request_too_large" };
    case "model_not_found":
    case "not_found":
    case "revision_not_found":
    case "mcp_method_not_found":
    case "agent_method_not_found":
    case "agent_not_found":
    case "agent_task_not_found":
      return { openai: "invalid_request_error", anthropic: "not_found_error" };
    case "missing_api_key":
    case "invalid_api_key":
    case "admin_unauthorized":
    case "invalid_token":
      return { openai: "authentication_error", anthropic: "authentication_error" };
    case "model_not_allowed":
    case "origin_not_allowed":
    case "tool_not_allowed":
    case "insufficient_scope":
    case "approval_required":
    case "mcp_url_elicitation_required":
    case "approval_refused":
    case "task_not_yours":
      return { openai: "permission_error", anthropic: "permission_error" };
    case "upstream_rate_limited":
    case "attempt_budget_exhausted":
    case "token_limit_exceeded":
    case "request_rate_exceeded":
      return { openai: "rate_limit_error", anthropic: "rate_limit_error" };
    case "budget_exceeded":
      // OpenAI's own type for a spent quota; Anthropic has none for periods, so a rate limit.
      return { openai: "insufficient_quota", anthropic: "rate_limit_error" };
    case "balance_exhausted":
      return { openai: "insufficient_quota", anthropic: "billing_error" };
    case "upstream_overloaded":
    case "no_backend_available":
    case "snapshot_unavailable":
    case "publication_unavailable":
    case "gateway_overloaded":
    case "gateway_draining":
    case "attempt_budget_unavailable":
    case "budget_unavailable":
    case "signal_unavailable":
    case "jwks_unavailable":
    case "agent_card_unavailable":
    case "agent_not_routable":
      return { openai: "server_error", anthropic: "overloaded_error" };
    case "deadline_exceeded":
    case "upstream_timeout":
    case "client_closed":
    case "upstream_error":
    case "upstream_unreachable":
    case "upstream_auth_failed":
    case "upstream_protocol_error":
    case "upstream_stream_cut":
    case "internal_error":
    case "looper_bound_exceeded":
      return { openai: "server_error", anthropic: "api_error" };
  }
}

/** OpenAI's envelope: `{error:{message,type,param,code}}` (also used by the admin API). */
export interface OpenAiErrorBody {
  error: { message: string; type: string; param: string | null; code: string; details?: readonly unknown[] };
}

export function toOpenAiErrorBody(err: GatewayError): OpenAiErrorBody {
  const body: OpenAiErrorBody = {
    error: { message: err.message, type: errorTypes(err.code).openai, param: err.param ?? null, code: err.code },
  };
  if (err.details !== undefined) body.error.details = err.details;
  return body;
}

/** Anthropic's envelope: `{type:"error",error:{type,message}}`; the stable code rides in the message's place of honour too. */
export interface AnthropicErrorBody {
  type: "error";
  error: { type: string; message: string };
}

export function toAnthropicErrorBody(err: GatewayError): AnthropicErrorBody {
  return { type: "error", error: { type: errorTypes(err.code).anthropic, message: err.message } };
}
