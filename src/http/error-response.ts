import type { GatewayError } from "../errors/gateway-error.ts";
import { toOpenAiErrorBody } from "../errors/openai-envelope.ts";
import type { ProtocolId } from "../protocol/codec.ts";

/** Renders an error in the envelope of the protocol the client speaks. */
export function errorResponse(err: GatewayError, protocol: ProtocolId, headers: Record<string, string> = {}): Response {
  const h = new Headers(headers);
  h.set("content-type", "application/json");
  if (err.retryAfterSeconds !== undefined) h.set("retry-after", String(err.retryAfterSeconds));
  let body: unknown;
  switch (protocol) {
    case "openai-chat":
    case "openai-responses":
    case "anthropic-messages":
      // Only OpenAI's envelope exists yet; the protocol issue adds Anthropic's here.
      body = toOpenAiErrorBody(err);
      break;
  }
  return new Response(JSON.stringify(body), { status: err.status, headers: h });
}
