import { GatewayError, type ErrorCode } from "../errors/gateway-error.ts";

/**
 * An upstream server's JSON-RPC error as the gateway's own: the protocol's codes keep their
 * meaning for the client (bad params stay -32602, a missing client capability stays -32021), so
 * a client sees through the gateway what it would see direct; anything else is the server's
 * failure (`upstream_error`). The server's message is kept, bounded, behind its name.
 */
export function upstreamRefusal(server: string, error: { readonly code: number; readonly message: string }): UpstreamRefusal {
  return new UpstreamRefusal(codeFor(error.code), `MCP server ${server}: ${error.message.slice(0, 500) || `error ${error.code}`}`, { cause: `upstream JSON-RPC error ${error.code}` });
}

/**
 * A refusal the server answered in-band, as a JSON-RPC error to a request it accepted: the
 * gateway answers it in-band too (HTTP 200), as the server would have, where its own refusals
 * carry their HTTP status.
 */
export class UpstreamRefusal extends GatewayError {}

function codeFor(jsonRpcCode: number): ErrorCode {
  switch (jsonRpcCode) {
    case -32602:
      return "invalid_request";
    case -32601:
      return "mcp_method_not_found";
    case -32021:
      return "mcp_missing_capability";
    // MCP's "resource not found".
    case -32002:
      return "not_found";
    default:
      return "upstream_error";
  }
}
