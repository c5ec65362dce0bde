import { GatewayError, type ErrorCode } from "../errors/gateway-error.ts";
import { isRecord } from "../protocol/fast-guard.ts";

/**
 * An upstream server's JSON-RPC error as the gateway's own: the protocol's codes keep their
 * meaning for the client (bad params stay -32602, a missing client capability stays -32021), so
 * a client sees through the gateway what it would see direct; anything else is the server's
 * failure (`upstream_error`). The server's message is kept, bounded, behind its name.
 */
export function upstreamRefusal(server: string, error: { readonly code: number; readonly message: string; readonly data?: unknown }): UpstreamRefusal {
  const code = codeFor(error.code);
  const message = `MCP server ${server}: ${error.message.slice(0, 500) || `error ${error.code}`}`;
  // A server's -32042 is only useful with its URLs: they go on to the client (the only data carried).
  const elicitations = code === "mcp_url_elicitation_required" ? urlElicitations(error.data) : undefined;
  return new UpstreamRefusal(code, message, { cause: `upstream JSON-RPC error ${error.code}`, ...(elicitations ? { details: [{ elicitations }] } : {}) });
}

/** Longest elicitation list and field carried from a server's -32042. */
const MAX_ELICITATIONS = 8;
const MAX_FIELD = 2048;

/**
 * The URL elicitations of a server's URLElicitationRequiredError, each reduced to the fields the
 * specification gives it (`mode: "url"`, `elicitationId`, `url`, `message`), bounded; an entry
 * that is not one (another mode, no http(s) URL) is left out.
 */
function urlElicitations(data: unknown): { mode: "url"; elicitationId: string; url: string; message: string }[] | undefined {
  const list = isRecord(data) && Array.isArray(data.elicitations) ? data.elicitations : [];
  const out = [];
  for (const e of list.slice(0, MAX_ELICITATIONS)) {
    if (!isRecord(e) || e.mode !== "url" || typeof e.url !== "string" || typeof e.elicitationId !== "string") continue;
    if (e.url.length > MAX_FIELD || !/^https?:\/\//i.test(e.url)) continue;
    out.push({ mode: "url" as const, elicitationId: e.elicitationId.slice(0, MAX_FIELD), url: e.url, message: typeof e.message === "string" ? e.message.slice(0, MAX_FIELD) : "" });
  }
  return out.length > 0 ? out : undefined;
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
    // URLElicitationRequiredError: the server sends its user to a page (its own sign-in, say) first.
    case -32042:
      return "mcp_url_elicitation_required";
    default:
      return "upstream_error";
  }
}
