import { anthropicMessagesCodec } from "./anthropic-messages/index.ts";
import { azureOpenAiCodec } from "./azure-openai/index.ts";
import { bedrockConverseCodec } from "./bedrock-converse/index.ts";
import { CodecRegistry } from "./codec.ts";
import { geminiCodec } from "./gemini/index.ts";
import { openAiChatCodec } from "./openai-chat/index.ts";
import { openAiResponsesCodec } from "./openai-responses/index.ts";
import { workersAiCodec } from "./workers-ai/index.ts";

/** The codecs this build serves: the wire protocols for clients and backends alike, and the protocols only backends speak (Workers AI, Azure OpenAI, Bedrock Converse, Gemini). */
export const builtinCodecs = new CodecRegistry([openAiChatCodec, openAiResponsesCodec, anthropicMessagesCodec], [workersAiCodec, azureOpenAiCodec, bedrockConverseCodec, geminiCodec]);
