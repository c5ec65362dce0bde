import type { GatewayError } from "../errors/gateway-error.ts";
import { toAnthropicErrorBody, toOpenAiErrorBody } from "../errors/envelopes.ts";
import type { ProtocolId } from "../protocol/codec.ts";

/** Renders an error in the envelope of the protocol the client speaks. */
export function errorResponse(err: GatewayError, protocol: ProtocolId, headers: Record<string, string> = {}): Response {
  const h = new Headers(headers);
  h.set("content-type", "application/json");
  if (err.retryAfterSeconds !== undefined) h.set("retry-after", String(err.retryAfterSeconds));
  // The stable code travels in a header too, so Anthropic clients (whose envelope has no code) can branch on it.
  h.set("x-sluice-error-code", err.code);
  let body: unknown;
  switch (protocol) {
    case "openai-chat":
    case "openai-responses":
      body = toOpenAiErrorBody(err);
      break;
    case "anthropic-messages":
      body = toAnthropicErrorBody(err);
      break;
  }
  return new Response(JSON.stringify(body), { status: err.status, headers: h });
}
