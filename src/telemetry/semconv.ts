import type { BackendProtocolId } from "../protocol/codec.ts";

/**
 * The OpenTelemetry semantic conventions version Sluice's `gen_ai.*` metrics and span attributes
 * follow. The GenAI conventions are marked Development and change between versions (1.41.0 is the
 * last release of the main conventions repository that carries them), so the version is pinned
 * here, once, and said in docs/observability.md and in every OTLP export's schema URL.
 */
export const SEMCONV_VERSION = "1.41.0";
/** The schema URL OTLP exports carry. */
export const SEMCONV_SCHEMA_URL = `https://opentelemetry.io/schemas/${SEMCONV_VERSION}`;

/**
 * Histogram boundaries, in seconds or tokens. Where the conventions give `ExplicitBucketBoundaries`
 * they are used as given and then extended: a gateway sees streams of minutes (the request
 * deadline defaults to ten), and the conventions stop at 81.92 s (durations) and 10 s (first token).
 */
export const BUCKETS = {
  duration: [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92, 163.84, 327.68, 655.36],
  timeToFirstToken: [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80],
  timePerOutputToken: [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5],
  tokens: [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864],
  /** Sluice's own waits (admission queue): milliseconds to a minute. */
  wait: [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  /** The gateway's own time per request: from a tenth of a millisecond (the runtime floor) to a few seconds. */
  overhead: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
} as const;

/**
 * `gen_ai.provider.name` of a backend protocol (the conventions' well-known values; Workers AI has
 * none among them, so it is `_OTHER` and told apart by the backend label).
 */
export function providerName(protocol: BackendProtocolId | undefined): string {
  switch (protocol) {
    case "openai-chat":
    case "openai-responses":
      return "openai";
    case "anthropic-messages":
      return "anthropic";
    case "azure-openai":
      return "azure.ai.openai";
    case "bedrock-converse":
      return "aws.bedrock";
    case "gemini":
      // One codec serves the Gemini API and Vertex AI: the conventions' value for either.
      return "gcp.gen_ai";
    case "workers-ai":
    case undefined:
      return "_OTHER";
  }
}

/** `gen_ai.operation.name`: every protocol Sluice serves is a chat completion. */
export const OPERATION_CHAT = "chat";
/** `gen_ai.provider.name` of the gateway itself, on the server-side instruments. */
export const GATEWAY_PROVIDER = "sluice";
