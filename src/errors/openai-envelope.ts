import type { ErrorCode, GatewayError } from "./gateway-error.ts";

/** OpenAI's `error.type` for each code; the OpenAI SDKs branch on status, dashboards on type. */
function openAiType(code: ErrorCode): string {
  switch (code) {
    case "invalid_json":
    case "invalid_request":
    case "unsupported_media_type":
    case "request_too_large":
    case "headers_too_large":
    case "json_too_deep":
    case "model_not_found":
    case "not_found":
    case "method_not_allowed":
    case "snapshot_rejected":
    case "config_invalid":
    case "revision_not_found":
      return "invalid_request_error";
    case "missing_api_key":
    case "invalid_api_key":
    case "admin_unauthorized":
      return "authentication_error";
    case "model_not_allowed":
      return "permission_error";
    case "upstream_rate_limited":
      return "rate_limit_error";
    case "client_closed":
    case "no_backend_available":
    case "deadline_exceeded":
    case "upstream_error":
    case "upstream_unreachable":
    case "upstream_overloaded":
    case "upstream_protocol_error":
    case "upstream_stream_cut":
    case "snapshot_unavailable":
    case "internal_error":
      return "server_error";
  }
}

/** The OpenAI error envelope: `{error:{message,type,param,code}}`. */
export interface OpenAiErrorBody {
  error: { message: string; type: string; param: string | null; code: string; details?: readonly unknown[] };
}

/** Renders a GatewayError as OpenAI's envelope (used by the OpenAI-protocol routes and the admin API). */
export function toOpenAiErrorBody(err: GatewayError): OpenAiErrorBody {
  const body: OpenAiErrorBody = {
    error: { message: err.message, type: openAiType(err.code), param: err.param ?? null, code: err.code },
  };
  if (err.details !== undefined) body.error.details = err.details;
  return body;
}
