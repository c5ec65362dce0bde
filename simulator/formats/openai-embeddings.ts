/**
 * OpenAI Embeddings (`POST /v1/embeddings`): request validation with OpenAI's error messages
 * and the `list` of `embedding` objects, floats or base64. The vectors come from `embedding.ts`.
 */

import { EMBEDDING_DIMENSIONS, embed, toBase64 } from "../embedding.ts";
import { CHARS_PER_TOKEN, hashTexts } from "../generate.ts";
import type { JsonCall, JsonEndpoint, Rejected } from "../wire-format.ts";
import { invalid, invalidValue, isObject, isResult, missing, modelRequired, parseInteger, wrongType } from "./openai-shared.ts";

const PATH = "/v1/embeddings";

/** OpenAI's bound on inputs per request. */
export const MAX_EMBEDDING_INPUTS = 2048;

/** OpenAI's bound on one input, in tokens (counted as for every endpoint here, see `inputTokens`). */
export const MAX_EMBEDDING_INPUT_TOKENS = 8192;

/** One input as the recipe sees it: its text (a token array is its ids as words) and its token count. */
interface EmbeddingInput {
  readonly text: string;
  readonly tokens: number;
}

/** What OpenAI says about any input it cannot take: empty, of the wrong type, or mixed. */
const invalidInput = (): Rejected => invalid("'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.", null, null);

const isTokenId = (value: unknown): value is number => typeof value === "number" && Number.isInteger(value) && value >= 0;

/**
 * A text costs ⌈length / 4⌉ tokens, the estimate the generation endpoints use for prompt text;
 * a token array costs its length, exactly.
 */
function inputTokens(text: string): number {
  return Math.ceil(text.length / CHARS_PER_TOKEN);
}

function parseInputs(value: unknown): EmbeddingInput[] | Rejected {
  if (value === undefined || value === null) return missing("input");
  let inputs: EmbeddingInput[];
  if (typeof value === "string") inputs = [{ text: value, tokens: inputTokens(value) }];
  else if (!Array.isArray(value) || value.length === 0) return invalidInput();
  else if (value.length > MAX_EMBEDDING_INPUTS) {
    return invalid(
      `Invalid 'input': array too long. Expected an array with maximum length ${MAX_EMBEDDING_INPUTS}, but got an array with length ${value.length} instead.`,
      "input",
      "array_above_max_length",
    );
  } else if (value.every((v) => typeof v === "string")) inputs = value.map((text: string) => ({ text, tokens: inputTokens(text) }));
  else if (value.every(isTokenId)) inputs = [{ text: value.join(" "), tokens: value.length }];
  else if (value.every((v) => Array.isArray(v) && v.length > 0 && v.every(isTokenId))) {
    inputs = value.map((ids: number[]) => ({ text: ids.join(" "), tokens: ids.length }));
  } else return invalidInput();
  if (inputs.some((input) => input.text === "")) return invalidInput();
  if (inputs.some((input) => input.tokens > MAX_EMBEDDING_INPUT_TOKENS)) {
    return invalid(`Invalid 'input': maximum context length is ${MAX_EMBEDDING_INPUT_TOKENS} tokens.`, null, null);
  }
  return inputs;
}

function parse(body: unknown): { readonly ok: true; readonly call: JsonCall } | Rejected {
  if (!isObject(body)) return wrongType("body", "an object", body);
  const model = body["model"];
  if (typeof model !== "string" || model === "") return modelRequired();
  const inputs = parseInputs(body["input"]);
  if (isResult(inputs)) return inputs;
  const dimensions = parseInteger(body, "dimensions", 1);
  if (isResult(dimensions)) return dimensions;
  if (dimensions !== undefined && dimensions > EMBEDDING_DIMENSIONS) {
    return invalid(
      `Invalid 'dimensions': integer above maximum value. Expected a value <= ${EMBEDDING_DIMENSIONS}, but got ${dimensions} instead.`,
      "dimensions",
      "integer_above_max_value",
    );
  }
  const format = body["encoding_format"] ?? "float";
  if (format !== "float" && format !== "base64") return invalidValue("encoding_format", format, ["float", "base64"]);
  const user = body["user"];
  if (user !== undefined && user !== null && typeof user !== "string") return wrongType("user", "a string", user);

  const call: JsonCall = {
    model,
    directiveText: inputs.map((input) => input.text).join("\n"),
    seed: hashTexts([PATH, ...inputs.map((input) => input.text)]),
    render: (omitUsage) => {
      const data = inputs.map((input, index) => {
        const vector = embed(input.text, dimensions ?? EMBEDDING_DIMENSIONS);
        return { object: "embedding", index, embedding: format === "base64" ? toBase64(vector) : Array.from(vector) };
      });
      const promptTokens = inputs.reduce((sum, input) => sum + input.tokens, 0);
      const usage = omitUsage ? {} : { usage: { prompt_tokens: promptTokens, total_tokens: promptTokens } };
      return JSON.stringify({ object: "list", data, model, ...usage });
    },
  };
  return { ok: true, call };
}

/** `POST /v1/embeddings`. */
export const openaiEmbeddings: JsonEndpoint = { path: PATH, parse };
