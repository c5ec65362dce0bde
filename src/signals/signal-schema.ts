import { z } from "zod";
import { PII_DETECTORS } from "./pii.ts";

const id = z.string().regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, "ids are 1-64 lower-case letters, digits, '.', '_' or '-'");
/** An entrypoint name, as `entrypoints[].name` spells it. */
const entrypointName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$/, "invalid entrypoint name");
/** Which text of a request a signal or plugin reads (docs/routing.md, `in`). */
export const scope = z.enum(["last_user", "user", "all"]);

/** A JavaScript regular expression's source, checked to compile. */
export const regexSource = z.string().refine(
  (source) => {
    try {
      new RegExp(source);
      return true;
    } catch {
      return false;
    }
  },
  { message: "not a valid regular expression" },
);

const common = {
  name: id,
  description: z.string().optional(),
};

/** Any of these words (case-insensitive) in the text: a whole word, or anywhere with `match: substring`. */
const keywordsSignal = z.strictObject({
  ...common,
  kind: z.literal("keywords"),
  words: z.array(z.string().min(1).max(256)).min(1).max(1000),
  match: z.enum(["word", "substring"]).default("word"),
  in: scope.default("last_user"),
});

/** A regular expression tested against the text. */
const regexSignal = z.strictObject({
  ...common,
  kind: z.literal("regex"),
  pattern: regexSource,
  flags: z.string().regex(/^[imsu]*$/, "flags are any of i, m, s, u").default(""),
  in: scope.default("last_user"),
});

/** The prompt's estimated tokens (the reservation's estimate). */
const contextSignal = z.strictObject({ ...common, kind: z.literal("context") });

/** What the request uses besides text: `images`, `tools`, `json_schema`. */
const modalitySignal = z.strictObject({ ...common, kind: z.literal("modality") });

/** The text's language (ISO 639-1), or not applicable when too short or unsure. */
const languageSignal = z.strictObject({ ...common, kind: z.literal("language"), in: scope.default("last_user") });

/** Who is calling: `tenant`, `key`, `team`, `project` (the team and project it is charged to). */
const principalSignal = z.strictObject({ ...common, kind: z.literal("principal") });

/** A trusted header's value (gateway.yaml `security.trustedHeaders`), or not applicable when absent. */
const headerSignal = z.strictObject({ ...common, kind: z.literal("header"), header: z.string().regex(/^[a-z0-9-]+$/, "a lower-case header name") });

/** Validated PII matches counted per detector, and in `total`; never the matched text. */
const piiSignal = z.strictObject({
  ...common,
  kind: z.literal("pii"),
  detectors: z.array(z.enum(PII_DETECTORS)).min(1).default([...PII_DETECTORS]),
  in: scope.default("all"),
});

/** A jailbreak rule as written in config: an id (reported when it fires) and a pattern. */
const jailbreakRule = z.strictObject({ id, pattern: regexSource });

/** The published jailbreak phrase set and the operator's own rules: `matched`, and the ids of the `rules` that fired. */
const jailbreakSignal = z.strictObject({
  ...common,
  kind: z.literal("jailbreak"),
  builtIn: z.boolean().default(true),
  rules: z.array(jailbreakRule).default([]),
  in: scope.default("user"),
});

/** A category of a similarity signal and the utterances that stand for it. */
const similarityCategory = z.strictObject({
  name: id,
  utterances: z.array(z.string().min(1).max(4000)).min(1).max(256),
});

/**
 * The nearest category by embedding: the text is embedded (once per request and model, shared by
 * every similarity signal) and compared with each category's utterances; the best category wins
 * when its score reaches `threshold` and leads the runner-up by `margin`.
 */
const similaritySignal = z.strictObject({
  ...common,
  kind: z.literal("similarity"),
  /** An embeddings entrypoint of this publication. */
  model: entrypointName,
  categories: z.array(similarityCategory).min(1).max(64),
  threshold: z.number().min(-1).max(1),
  margin: z.number().min(0).max(2).default(0),
  in: scope.default("last_user"),
  /** The text is cut to this many characters before it is embedded. */
  maxChars: z.number().int().min(16).max(32_768).default(4000),
});

/** An OpenAI-moderations-compatible classifier: `flagged`, and a score per category. */
const moderationSignal = z.strictObject({
  ...common,
  kind: z.literal("moderation"),
  /** A moderations entrypoint of this publication. */
  model: entrypointName,
  in: scope.default("last_user"),
  maxChars: z.number().int().min(16).max(32_768).default(8000),
});

/** A named signal of the publication (publication.yaml `signals:`); decisions refer to it by name. */
export const signalSchema = z.discriminatedUnion("kind", [
  keywordsSignal,
  regexSignal,
  contextSignal,
  modalitySignal,
  languageSignal,
  principalSignal,
  headerSignal,
  piiSignal,
  jailbreakSignal,
  similaritySignal,
  moderationSignal,
]);

export type SignalConfig = z.infer<typeof signalSchema>;
export type SignalKind = SignalConfig["kind"];
