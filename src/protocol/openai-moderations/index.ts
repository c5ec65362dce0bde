import { z } from "zod";
import { GatewayError } from "../../errors/gateway-error.ts";
import { isRecord } from "../fast-guard.ts";
import type { InputStamp } from "../input-wire.ts";
import { invalidRequestFromZod } from "../invalid-request.ts";
import type { ModerationVerdict, ModerationsCodec, NeutralModerationRequest, NeutralModerationResponse } from "../moderations.ts";
import { reportedPromptTokens, unreadableAnswer } from "../openai-input-wire.ts";

/**
 * OpenAI's moderations wire (`POST /v1/moderations`), both directions: what clients send the
 * gateway and what OpenAI-compatible moderation servers answer. A backend of an OpenAI protocol
 * with the `moderations` capability serves it at `<baseUrl>/moderations`. Text only: OpenAI's
 * multi-modal parts (an image with its text) are refused, since nothing here could size or price
 * an image.
 */

const requestSchema = z.looseObject({
  // OpenAI picks a default model when none is named; here the model is the entrypoint, so it is required.
  model: z.string().min(1),
  input: z.union([z.string(), z.array(z.string()).min(1)], { error: (iss) => (iss.code === "invalid_union" ? "expected a string or a non-empty array of strings" : undefined) }),
});

function decodeRequest(body: unknown): NeutralModerationRequest {
  if (isRecord(body) && Array.isArray(body.input) && body.input.some((part) => typeof part === "object" && part !== null)) {
    throw new GatewayError("invalid_request", "Only text is moderated here: 'input' must be a string or an array of strings, without image parts.", { param: "input" });
  }
  const parsed = requestSchema.safeParse(body, { reportInput: true });
  if (!parsed.success) throw invalidRequestFromZod(parsed.error);
  const { model, input } = parsed.data;
  return { model, inputs: typeof input === "string" ? [input] : input };
}

/** Every category was judged on text: the gateway sends classifiers nothing else. */
function textOnly(categories: Readonly<Record<string, boolean>>): Record<string, string[]> {
  return Object.fromEntries(Object.keys(categories).map((c) => [c, ["text"]]));
}

function encodeResponse(response: NeutralModerationResponse, _request: NeutralModerationRequest, stamp: InputStamp): unknown {
  return {
    id: `modr-${stamp.id}`,
    model: stamp.model,
    results: response.results.map((r) => ({
      flagged: r.flagged,
      categories: r.categories,
      category_scores: r.categoryScores,
      category_applied_input_types: r.appliedInputTypes ?? textOnly(r.categories),
    })),
  };
}

function encodeRequest(request: NeutralModerationRequest, upstreamModel: string): unknown {
  return { model: upstreamModel, input: request.inputs.length === 1 ? request.inputs[0] : request.inputs };
}

const unreadable = (why: string) => unreadableAnswer("moderations", why);

/** A JSON object whose every value passes `is`, copied (own keys only); undefined otherwise. */
function recordOf<T>(v: unknown, is: (x: unknown) => x is T): Record<string, T> | undefined {
  if (!isRecord(v)) return undefined;
  const entries = Object.entries(v);
  return entries.every(([, x]) => is(x)) ? (Object.fromEntries(entries) as Record<string, T>) : undefined;
}

const isBoolean = (x: unknown): x is boolean => typeof x === "boolean";
const isScore = (x: unknown): x is number => typeof x === "number" && Number.isFinite(x);
const isTypes = (x: unknown): x is string[] => Array.isArray(x) && x.every((t) => typeof t === "string");

function verdict(item: unknown, i: number): ModerationVerdict {
  if (!isRecord(item)) throw unreadable(`result ${i} is not an object`);
  if (typeof item.flagged !== "boolean") throw unreadable(`result ${i} has no boolean 'flagged'`);
  const categories = recordOf(item.categories, isBoolean);
  if (categories === undefined) throw unreadable(`result ${i}: 'categories' is not an object of booleans`);
  const categoryScores = recordOf(item.category_scores, isScore);
  if (categoryScores === undefined) throw unreadable(`result ${i}: 'category_scores' is not an object of numbers`);
  // Optional, and informative only: a malformed one is left out rather than failing the answer.
  const appliedInputTypes = recordOf(item.category_applied_input_types, isTypes);
  return { flagged: item.flagged, categories, categoryScores, ...(appliedInputTypes !== undefined ? { appliedInputTypes } : {}) };
}

function decodeResponse(body: unknown, expected: number): NeutralModerationResponse {
  if (!isRecord(body) || !Array.isArray(body.results)) throw unreadable("no results array");
  if (body.results.length !== expected) throw unreadable(`${body.results.length} results for ${expected} inputs`);
  // OpenAI reports no usage for moderations; a self-hosted classifier may.
  return { results: body.results.map(verdict), inputTokens: reportedPromptTokens(body) };
}

/** The OpenAI moderations wire, shared by every OpenAI-protocol backend. */
export const openAiModerationsCodec: ModerationsCodec = {
  upstreamPath: "/moderations",
  decodeRequest,
  encodeResponse,
  encodeRequest,
  decodeResponse,
};
