import { CodecRegistry } from "./codec.ts";
import { openAiChatCodec } from "./openai-chat/index.ts";

/** The codecs this build serves, for clients and backends alike. */
export const builtinCodecs = new CodecRegistry([openAiChatCodec]);
