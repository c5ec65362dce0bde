import { GatewayError } from "../errors/gateway-error.ts";
import { isRecord } from "./fast-guard.ts";

/**
 * What OpenAI's input-only wires (embeddings, moderations) share on the backend side: the usage
 * block some servers send, and the error for an answer that cannot be read.
 */

/** `usage.prompt_tokens` when the answer has a valid one; undefined (unknown, never zero) otherwise. */
export function reportedPromptTokens(body: Readonly<Record<string, unknown>>): number | undefined {
  const usage = isRecord(body.usage) ? body.usage : undefined;
  const tokens = usage?.prompt_tokens;
  return typeof tokens === "number" && Number.isInteger(tokens) && tokens >= 0 ? tokens : undefined;
}

/** The error for a provider answer of `what` (embeddings, moderations) the gateway cannot read; `why` stays internal. */
export function unreadableAnswer(what: string, why: string): GatewayError {
  return new GatewayError("upstream_protocol_error", `The ${what} provider returned an unreadable response.`, { cause: why });
}
