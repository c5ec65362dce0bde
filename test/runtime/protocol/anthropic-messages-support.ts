import { describe, expect, it } from "vitest";
import { GatewayError } from "../../../src/errors/gateway-error.ts";
import { anthropicMessagesCodec } from "../../../src/protocol/anthropic-messages/index.ts";
import { REQUEST_FEATURES, requestFeatures } from "../../../src/protocol/features.ts";
import type { NeutralMessage, NeutralRequest } from "../../../src/protocol/neutral.ts";
import { openAiChatCodec } from "../../../src/protocol/openai-chat/index.ts";

export const codec = anthropicMessagesCodec;
export const decode = (body: unknown): NeutralRequest => codec.decodeRequest(body);
export const encode = (req: NeutralRequest, model = "claude-upstream-2025") => codec.encodeRequest(req, model, { streamUsage: true }) as Record<string, unknown>;

export const user = (content: unknown) => ({ role: "user", content });
export const assistant = (content: unknown) => ({ role: "assistant", content });
export const base = (extra: Record<string, unknown> = {}) => ({ model: "public-model", max_tokens: 1024, messages: [user("hi")], ...extra });

/** A minimal neutral request around `messages`. */
export const neutral = (messages: NeutralMessage[], extra: Partial<NeutralRequest> = {}): NeutralRequest => ({
  model: "public-model",
  messages,
  stream: false,
  streamUsage: false,
  ...extra,
});

/** Runs `fn`, expecting a GatewayError, and returns it. */
export function rejectOf(fn: () => unknown): GatewayError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(GatewayError);
    return err as GatewayError;
  }
  throw new Error("expected a GatewayError, nothing was thrown");
}

export function expectInvalid(body: unknown, param: string | undefined): GatewayError {
  const err = rejectOf(() => decode(body));
  expect(err.code).toBe("invalid_request");
  expect(err.status).toBe(400);
  expect(err.source).toBe("client");
  expect(err.param).toBe(param);
  return err;
}

/** Strips keys whose value is undefined, the way a JSON body would. */
export const json = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

export const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

