import type { GatewayError } from "../errors/gateway-error.ts";
import { toAnthropicErrorBody, toOpenAiErrorBody } from "../errors/envelopes.ts";
import { toJsonRpcErrorBody } from "../errors/json-rpc.ts";
import { renderBearerChallenge } from "../errors/bearer-challenge.ts";
import type { ProtocolId } from "../protocol/codec.ts";

/**
 * Renders an error in the envelope of the protocol the client speaks: a model protocol's, or
 * JSON-RPC's for MCP (answering the request's id when it was read), with the code's HTTP status
 * unless the caller names another (an MCP server's in-band refusal is answered with 200).
 */
export function errorResponse(err: GatewayError, protocol: ProtocolId | "json-rpc", headers: Record<string, string> = {}, jsonRpcId: string | number | null = null, status: number = err.status): Response {
  const h = new Headers(headers);
  h.set("content-type", "application/json");
  if (err.retryAfterSeconds !== undefined) h.set("retry-after", String(err.retryAfterSeconds));
  // The stable code travels in a header too, so Anthropic clients (whose envelope has no code) can branch on it.
  h.set("x-sluice-error-code", err.code);
  if (err.challenge !== undefined) h.set("www-authenticate", renderBearerChallenge(err.challenge));
  let body: unknown;
  switch (protocol) {
    case "openai-chat":
    case "openai-responses":
      body = toOpenAiErrorBody(err);
      break;
    case "anthropic-messages":
      body = toAnthropicErrorBody(err);
      break;
    case "json-rpc":
      body = toJsonRpcErrorBody(err, jsonRpcId);
      break;
  }
  return new Response(JSON.stringify(body), { status, headers: h });
}
