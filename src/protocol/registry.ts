import { anthropicMessagesCodec } from "./anthropic-messages/index.ts";
import { CodecRegistry } from "./codec.ts";
import { openAiChatCodec } from "./openai-chat/index.ts";
import { openAiResponsesCodec } from "./openai-responses/index.ts";

/** The codecs this build serves, for clients and backends alike. */
export const builtinCodecs = new CodecRegistry([openAiChatCodec, openAiResponsesCodec, anthropicMessagesCodec]);
