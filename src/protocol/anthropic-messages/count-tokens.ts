import { z } from "zod";
import { GatewayError } from "../../errors/gateway-error.ts";
import type { NeutralRequest } from "../neutral.ts";
import type { TokenCountCodec } from "../token-count.ts";
import { decodeAnthropicCountRequest } from "./decode-request.ts";
import { encodeAnthropicRequest } from "./encode-request.ts";

/**
 * The parameters Anthropic's count reads: a message's input (and what shapes it: thinking, the
 * output format, cache breakpoints, speed), never its output settings, which the count endpoint
 * refuses.
 */
const COUNTED = ["model", "messages", "system", "tools", "tool_choice", "thinking", "output_config", "cache_control", "speed"] as const;

/** Neutral request → the count body for the provider's model id: the message body, cut to what is counted. */
function encodeCountRequest(request: NeutralRequest, upstreamModel: string): Record<string, unknown> {
  const full = encodeAnthropicRequest({ ...request, stream: false }, upstreamModel, { streamUsage: false });
  const body: Record<string, unknown> = {};
  for (const k of COUNTED) if (full[k] !== undefined) body[k] = full[k];
  return body;
}

const countSchema = z.looseObject({ input_tokens: z.number().int().min(0) });

/** The provider's count. Throws GatewayError("upstream_protocol_error"). */
function decodeCountResponse(body: unknown): number {
  const parsed = countSchema.safeParse(body);
  if (!parsed.success) throw new GatewayError("upstream_protocol_error", "The provider returned a token count the gateway could not read.", { cause: parsed.error });
  return parsed.data.input_tokens;
}

/** Anthropic's token count (`POST /v1/messages/count_tokens`), as client and as backend protocol. */
export const anthropicTokenCount: TokenCountCodec = {
  upstreamPath: "/messages/count_tokens",
  decodeRequest: decodeAnthropicCountRequest,
  encodeResponse: (inputTokens) => ({ input_tokens: inputTokens }),
  encodeRequest: encodeCountRequest,
  decodeResponse: decodeCountResponse,
};
