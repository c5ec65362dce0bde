/**
 * OpenAI Moderations (`POST /v1/moderations`): request validation and the `results` shape,
 * one result per input. The scores come from `moderation.ts`.
 */

import { hashTexts, uniqueId } from "../generate.ts";
import { KnobError, knobRejection } from "../knobs.ts";
import { FLAG_THRESHOLD, MODERATION_CATEGORIES, moderate, moderationMarkers } from "../moderation.ts";
import type { ModerationCategory, ModerationScores } from "../moderation.ts";
import type { JsonCall, JsonEndpoint, Rejected } from "../wire-format.ts";
import { invalid, invalidValue, isObject, isResult, missing, wrongType } from "./openai-shared.ts";

const PATH = "/v1/moderations";

/** The model answered for when the request names none, as the API does. */
export const DEFAULT_MODERATION_MODEL = "omni-moderation-latest";

/** Categories the omni models also score images for; the rest are text-only. */
const IMAGE_CATEGORIES: ReadonlySet<ModerationCategory> = new Set(["self-harm", "self-harm/intent", "self-harm/instructions", "sexual", "violence", "violence/graphic"]);

/** One item to classify: its text, and whether it came with an image (omni multi-modal input). */
interface ModerationInput {
  readonly text: string;
  readonly image: boolean;
}

/**
 * `input` is a string, an array of strings (one result each) or an array of multi-modal parts
 * (`text`, `image_url`), which together are one item. Images are accepted and not looked at.
 */
function parseInputs(value: unknown): ModerationInput[] | Rejected {
  if (value === undefined || value === null) return missing("input");
  if (typeof value === "string") return [{ text: value, image: false }];
  if (!Array.isArray(value)) return wrongType("input", "a string or an array", value);
  if (value.length === 0) {
    return invalid("Invalid 'input': empty array. Expected an array with minimum length 1, but got an empty array instead.", "input", "empty_array");
  }
  if (value.every((v) => typeof v === "string")) return value.map((text: string) => ({ text, image: false }));
  const texts: string[] = [];
  let image = false;
  for (let i = 0; i < value.length; i++) {
    const part: unknown = value[i];
    if (!isObject(part)) return wrongType(`input[${i}]`, "a string or an object", part);
    if (part["type"] === "text" && typeof part["text"] === "string") texts.push(part["text"]);
    else if (part["type"] === "image_url" && isObject(part["image_url"]) && typeof part["image_url"]["url"] === "string") image = true;
    else if (part["type"] === "text" || part["type"] === "image_url") return missing(`input[${i}].${String(part["type"])}`);
    else return invalidValue(`input[${i}].type`, part["type"], ["text", "image_url"]);
  }
  return [{ text: texts.join("\n"), image }];
}

function result(input: ModerationInput, scores: ModerationScores): Record<string, unknown> {
  const categories: Record<string, boolean> = {};
  const applied: Record<string, string[]> = {};
  for (const category of MODERATION_CATEGORIES) {
    categories[category] = scores[category] >= FLAG_THRESHOLD;
    const types = input.text !== "" || !input.image ? ["text"] : [];
    if (input.image && IMAGE_CATEGORIES.has(category)) types.push("image");
    applied[category] = types;
  }
  return {
    flagged: Object.values(categories).some(Boolean),
    categories,
    category_scores: scores,
    category_applied_input_types: applied,
  };
}

function parse(body: unknown): { readonly ok: true; readonly call: JsonCall } | Rejected {
  if (!isObject(body)) return wrongType("body", "an object", body);
  const model = body["model"] ?? DEFAULT_MODERATION_MODEL;
  if (typeof model !== "string" || model === "") return wrongType("model", "a non-empty string", model);
  const inputs = parseInputs(body["input"]);
  if (isResult(inputs)) return inputs;
  let markers: ReturnType<typeof moderationMarkers>[];
  try {
    markers = inputs.map((input) => moderationMarkers(input.text));
  } catch (error) {
    if (!(error instanceof KnobError)) throw error;
    return { ok: false, error: { ...knobRejection(error), param: "input" } };
  }

  const call: JsonCall = {
    model,
    directiveText: inputs.map((input) => input.text).join("\n"),
    seed: hashTexts([PATH, ...inputs.map((input) => input.text)]),
    // Moderations report no usage, so `omit-usage` leaves nothing out.
    render: () =>
      JSON.stringify({
        id: `modr-${uniqueId()}`,
        model,
        results: inputs.map((input, i) => result(input, moderate(input.text, markers[i] ?? new Map()))),
      }),
  };
  return { ok: true, call };
}

/** `POST /v1/moderations`. */
export const openaiModerations: JsonEndpoint = { path: PATH, parse };
