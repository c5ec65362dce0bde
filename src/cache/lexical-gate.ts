/**
 * The lexical second gate of a semantic cache match. An embedding says two prompts are about the
 * same thing; it does not say they ask the same thing: "transfer $100 to Alice" and "transfer $100
 * to Bob" embed close, and "is Paris bigger than London" and "is London bigger than Paris" embed
 * nearly equal. So a semantic candidate is served only when the two prompts also agree word for
 * word on what carries meaning: the same content words (names, nouns, verbs), the same numbers, the
 * same negations, directions and pronouns, in the same order. Only fillers may differ: articles,
 * auxiliaries and modals, politeness, case, punctuation, plurals and contractions.
 *
 * This is strict on purpose: a miss costs one generation, a false hit serves a wrong answer. The
 * measured trade-off (false hits and misses on a labelled set) is in docs/cache.md.
 */

/**
 * Words that may differ between two prompts that ask the same thing. Negations, question words,
 * pronouns, conjunctions and directional prepositions are deliberately not here: each of them
 * turns a question into another one.
 */
const FILLERS: ReadonlySet<string> = new Set([
  "a", "an", "the", "of",
  "is", "are", "was", "were", "be", "been", "being", "am",
  "do", "does", "did",
  "can", "could", "would", "should", "will", "shall", "may", "might", "must",
  "you", "please", "kindly", "hi", "hello", "hey", "thanks", "thank", "just", "really", "actually", "basically",
]);

/** The words a negation is spelt with, mapped to one term so "never" and "not ever" still differ from none. */
const NEGATIONS: ReadonlySet<string> = new Set(["not", "no", "never", "none", "nothing", "nobody", "neither", "nor", "without"]);

/** A prompt's lexical signature: its meaning-bearing terms in order, first occurrences only. */
export interface LexicalSignature {
  readonly terms: readonly string[];
}

/**
 * Contractions spelled out, so "don't" and "do not" are one prompt; possessive `'s` dropped ("France's
 * capital" keeps `france`), other `'s` ("what's") read as "is", a filler.
 */
function expand(text: string): string {
  return text
    .toLowerCase()
    .replace(/[\u2018\u2019\u02bc]/g, "'")
    .replace(/\bcan't\b/g, "can not")
    .replace(/\bcannot\b/g, "can not")
    .replace(/\bwon't\b/g, "will not")
    .replace(/\bshan't\b/g, "shall not")
    .replace(/n't\b/g, " not")
    .replace(/'(re|ve|ll|d|m|s)\b/g, " ");
}

/** One trailing plural `s` dropped (not from `ss` nor from words under four letters): paraphrases differ in number. */
function singular(word: string): string {
  return word.length >= 4 && word.endsWith("s") && !word.endsWith("ss") ? word.slice(0, -1) : word;
}

/**
 * Numbers as values: "1,000", "1000" and "1000.00" are one term, and "$100" is `100` (the currency
 * sign is punctuation; a different currency word still differs).
 */
function numberTerm(raw: string): string {
  const plain = raw.replace(/[,_]/g, "");
  const n = Number(plain);
  return Number.isFinite(n) ? `#${n}` : `#${plain}`;
}

/** The signature of a prompt's text (see {@link LexicalSignature}). */
export function lexicalSignature(text: string): LexicalSignature {
  const tokens = expand(text).match(/\d[\d,_]*(?:\.\d+)?|[\p{L}\p{M}][\p{L}\p{M}\p{N}]*/gu) ?? [];
  const seen = new Set<string>();
  const terms: string[] = [];
  for (const token of tokens) {
    let term: string;
    if (/^\d/.test(token)) term = numberTerm(token);
    else if (NEGATIONS.has(token)) term = "¬";
    else if (FILLERS.has(token)) continue;
    else term = singular(token);
    // A repeated negation is a different question ("not … not"), so it counts each time.
    if (term === "¬") {
      terms.push(term);
      continue;
    }
    if (seen.has(term)) continue;
    seen.add(term);
    terms.push(term);
  }
  return { terms };
}

/** Whether two signatures agree: the same terms in the same order. */
export function lexicallyAgree(a: LexicalSignature, b: LexicalSignature): boolean {
  if (a.terms.length !== b.terms.length) return false;
  for (let i = 0; i < a.terms.length; i++) if (a.terms[i] !== b.terms[i]) return false;
  return true;
}
