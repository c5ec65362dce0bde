import { eld } from "eld/extrasmall";

/**
 * How much of a prompt is looked at. The detector reads only the first 1,000 characters it is
 * given; the window before code is removed is larger so that a prompt opening with a code block
 * still leaves prose to read, and bounded so that a prompt of a few hundred KB costs no more than
 * a short one.
 */
const WINDOW = 16_384;
const SAMPLE = 1_000;

/**
 * Fewer letters than this is "too short": a word or two, which the detector mostly calls
 * unreliable itself and often gets wrong ("Hello" scores as Italian). CJK scripts carry a word in
 * one or two characters, hence the lower bar for them.
 */
const MIN_LETTERS = 8;
const MIN_LETTERS_CJK = 4;

/** The least lead of the best language over the runner-up (on the detector's 0–1 score) to call it. */
const MIN_MARGIN = 0.01;

/** Fenced code blocks (an unclosed fence runs to the end) and inline code spans. */
const FENCED = /```[\s\S]*?(?:```|$)/g;
const INLINE = /`[^`\n]*`/g;
/** A token with a character that prose does not use, a dot inside a word, or a digit: code, paths, URLs, e-mail addresses, identifiers, numbers. */
const CODE_TOKEN = /[=(){}[\]<>;\\/_$|@#]|\w\.\w|\d/;
const LETTER = /\p{L}/gu;
const CJK = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/u;

/**
 * The prose of a prompt: its first {@link WINDOW} characters without code blocks, inline code
 * and code-like tokens. An identifier or a shell command is written the same in every language
 * and reads as English to an n-gram model (see docs/signals-language.md for what that cost on
 * a sample).
 */
export function proseOf(text: string): string {
  const window = text.length > WINDOW ? text.slice(0, WINDOW) : text;
  return window
    .replace(FENCED, " ")
    .replace(INLINE, " ")
    .replace(/\S+/g, (token) => (CODE_TOKEN.test(token) ? " " : token))
    .replace(/\s+/g, " ")
    .trim();
}

/**
 * The text's language as ISO 639-1 (e.g. "en"), or undefined when too short or unsure.
 *
 * Code, URLs, e-mail addresses and numbers are ignored (see {@link proseOf}); what is left must
 * have a few letters, and the detector must call its answer reliable (its best score clear of
 * the language's usual score and of the runner-up). `confidence` is the best language's score
 * on the detector's 0–1 scale, not a probability: compare it across prompts, not to a fixed
 * "percent sure". The detector knows 60 languages; others come back as a near neighbour or
 * undefined. Code is not a language, but code whose words are English keywords (`const x
 * return`) can still read as `en`.
 */
export function detectLanguage(text: string): { readonly language: string; readonly confidence: number } | undefined {
  const prose = proseOf(text);
  const sample = prose.length > SAMPLE ? prose.slice(0, SAMPLE) : prose;
  const letters = sample.match(LETTER)?.length ?? 0;
  if (letters < (CJK.test(sample) ? MIN_LETTERS_CJK : MIN_LETTERS)) return undefined;
  const result = eld.detect(sample);
  if (result.language === "" || !result.isReliable()) return undefined;
  const scores = result.getScores();
  const best = scores[result.language];
  if (best === undefined || !(best > 0)) return undefined;
  // eld's own reliability check means to refuse a near tie with the runner-up, but compares the
  // best score with the runner-up's language index instead of its score (eld 2.1.0), so the
  // tie check is done here.
  let runnerUp = 0;
  for (const [language, score] of Object.entries(scores)) if (language !== result.language && score > runnerUp) runnerUp = score;
  if (best - runnerUp < MIN_MARGIN) return undefined;
  return { language: result.language, confidence: best };
}
