/**
 * The simulated moderation model: scores per OpenAI category from a small trigger vocabulary,
 * and `[[mod:category=score]]` markers that set a score exactly. Nothing else moves a score, so
 * a test knows from its text alone whether a gateway will see it flagged.
 */

import { KnobError } from "./knobs.ts";
import { withoutMarkers, words } from "./embedding.ts";

/** OpenAI's categories, in the order its results list them. */
export const MODERATION_CATEGORIES = [
  "harassment",
  "harassment/threatening",
  "hate",
  "hate/threatening",
  "illicit",
  "illicit/violent",
  "self-harm",
  "self-harm/intent",
  "self-harm/instructions",
  "sexual",
  "sexual/minors",
  "violence",
  "violence/graphic",
] as const;

/** A moderation category. */
export type ModerationCategory = (typeof MODERATION_CATEGORIES)[number];

/** Scores per category, each in [0, 1]. */
export type ModerationScores = Readonly<Record<ModerationCategory, number>>;

/** A category is flagged at this score or above. */
export const FLAG_THRESHOLD = 0.5;

/** What one more trigger leaves of the distance to 1: scores go 0, 0.7, 0.91, 0.973, … */
export const MISS_FACTOR = 0.3;

/**
 * Triggers per category: whole words or phrases of whole words, matched against the text's
 * lower-cased words (markers removed), every occurrence counting once. Plain, recognisable
 * words rather than real abuse: they only have to be predictable.
 */
export const TRIGGER_WORDS: Readonly<Record<ModerationCategory, readonly string[]>> = {
  harassment: ["idiot", "moron", "loser", "pathetic", "worthless"],
  "harassment/threatening": ["i will hurt you", "watch your back", "you will regret this"],
  hate: ["bigot", "bigotry", "hateful", "supremacist"],
  "hate/threatening": ["exterminate", "ethnic cleansing", "genocide"],
  illicit: ["shoplift", "shoplifting", "launder", "laundering", "counterfeit", "smuggle", "smuggling"],
  "illicit/violent": ["bomb", "explosives", "ghost gun", "nerve agent"],
  "self-harm": ["self harm", "suicide", "overdose"],
  "self-harm/intent": ["kill myself", "end my life", "want to die"],
  "self-harm/instructions": ["suicide method", "lethal dose"],
  sexual: ["explicit", "porn", "nsfw", "nude", "erotic"],
  "sexual/minors": ["underage"],
  violence: ["kill", "kills", "killed", "killing", "murder", "stab", "shoot", "assault"],
  "violence/graphic": ["gore", "gory", "dismember", "mutilated", "bloodbath"],
};

/** The category a subcategory belongs to (`violence/graphic` → `violence`), if any. */
function parentOf(category: ModerationCategory): ModerationCategory | undefined {
  const slash = category.indexOf("/");
  return slash === -1 ? undefined : (category.slice(0, slash) as ModerationCategory);
}

/** Occurrences of `phrase` (words separated by single spaces) in ` w1 w2 … ` form. */
function occurrences(haystack: string, phrase: string): number {
  const needle = ` ${phrase} `;
  let count = 0;
  for (let at = haystack.indexOf(needle); at !== -1; at = haystack.indexOf(needle, at + needle.length - 1)) count++;
  return count;
}

const MARKER = /\[\[mod:([^\]]*)\]\]/g;

/**
 * Exact scores from `[[mod:category=score category=score]]` markers, later ones winning.
 * Throws {@link KnobError} for an unknown category or a score outside [0, 1], so that a typo
 * fails loudly as a bad `[[sim …]]` knob does.
 */
export function moderationMarkers(text: string): Map<ModerationCategory, number> {
  const out = new Map<ModerationCategory, number>();
  if (!text.includes("[[mod:")) return out;
  for (const match of text.matchAll(MARKER)) {
    for (const pair of (match[1] ?? "").trim().split(/\s+/)) {
      if (pair === "") continue;
      const eq = pair.indexOf("=");
      const name = pair.slice(0, Math.max(eq, 0));
      if (eq <= 0 || !(MODERATION_CATEGORIES as readonly string[]).includes(name)) {
        throw new KnobError(`moderation marker item '${pair}' is not category=score; categories: ${MODERATION_CATEGORIES.join(", ")}`);
      }
      const raw = pair.slice(eq + 1);
      const score = Number(raw);
      if (!/^\d*\.?\d+$/.test(raw) || !(score >= 0 && score <= 1)) {
        throw new KnobError(`moderation marker score for '${name}' must be a number from 0 to 1, got '${raw}'`);
      }
      out.set(name as ModerationCategory, score);
    }
  }
  return out;
}

/**
 * Scores of `text`: per category `1 − 0.3^hits` over its triggers; a subcategory's score is
 * also a floor for its category (a threat is harassment too); then `markers` replace scores
 * exactly, without that propagation.
 */
export function moderate(text: string, markers: ReadonlyMap<ModerationCategory, number>): ModerationScores {
  const haystack = ` ${words(withoutMarkers(text)).join(" ")} `;
  const scores = {} as Record<ModerationCategory, number>;
  for (const category of MODERATION_CATEGORIES) {
    let hits = 0;
    for (const phrase of TRIGGER_WORDS[category]) hits += occurrences(haystack, phrase);
    scores[category] = 1 - MISS_FACTOR ** hits;
  }
  for (const category of MODERATION_CATEGORIES) {
    const parent = parentOf(category);
    if (parent !== undefined) scores[parent] = Math.max(scores[parent], scores[category]);
  }
  for (const [category, score] of markers) scores[category] = score;
  return scores;
}
