import { anthropicMessagesCodec } from "../../../src/protocol/anthropic-messages/index.ts";
import { REQUEST_FEATURES, requestFeatures } from "../../../src/protocol/features.ts";
import type { NeutralMessage, NeutralRequest } from "../../../src/protocol/neutral.ts";
import { openAiChatCodec } from "../../../src/protocol/openai-chat/index.ts";
import { invalidRequestOf } from "./error-helpers.ts";

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

export { json, rejectOf } from "./error-helpers.ts";
export const expectInvalid = invalidRequestOf(decode);

export const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

