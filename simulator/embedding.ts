/**
 * The simulated embedding model: signed feature hashing of words and character 3-grams.
 *
 * Not a language model, on purpose: a test author must be able to predict from the texts alone
 * whether two of them land close. Two texts are close exactly when they share content words
 * (and, more weakly, spellings); nothing else moves a vector. See `docs/simulator.md`.
 */

import { fnv1a, withoutMarkers } from "./generate.ts";

export { withoutMarkers };

/** Length of a vector when the request does not ask for fewer `dimensions`. */
export const EMBEDDING_DIMENSIONS = 256;

/**
 * Weight of a word. A word's 3-grams share a total weight of 1 (each `1/√count`, so their
 * squares sum to 1), which makes the word itself 4 of every 5 parts of its energy: texts are
 * close by shared words first and by similar spellings second.
 */
export const WORD_WEIGHT = 2;

/**
 * Words left out so that unrelated questions ("how do I …") do not look alike. When a text
 * has nothing else, its stop words are used after all.
 */
export const STOP_WORDS: ReadonlySet<string> = new Set([
  "a", "an", "the", "and", "or", "but", "if", "then", "so", "of", "to", "in", "on", "at", "by",
  "for", "with", "from", "as", "into", "about", "is", "are", "was", "were", "be", "been", "am",
  "do", "does", "did", "have", "has", "had", "i", "me", "my", "we", "us", "our", "you", "your",
  "it", "its", "this", "that", "these", "those", "he", "she", "they", "them", "his", "her",
  "their", "what", "which", "who", "how", "can", "could", "would", "should", "will", "please",
]);


/** Lower-cased words: maximal runs of letters and digits (any script). */
export function words(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

/**
 * A word with one trailing `s` dropped (not from `ss`, nor from words under 4 letters), so a
 * plural and its singular are one feature: paraphrases differ in number far more than in stems.
 */
export function singular(word: string): string {
  return word.length >= 4 && word.endsWith("s") && !word.endsWith("ss") ? word.slice(0, -1) : word;
}

/** murmur3's finaliser: FNV-1a alone leaves its low bits, the bucket index, poorly mixed. */
function scramble(hash: number): number {
  let h = hash;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * Buckets per feature. One bucket per feature makes a rare collision of two words cost a whole
 * word's similarity; spread over four, collisions cost as much on average but never as much at
 * once, so unrelated texts stay reliably far.
 */
const SPREAD = 4;

/**
 * Adds one feature over {@link SPREAD} buckets with weight `weight / √SPREAD` each: bucket `k`
 * is `h_k` modulo the length and its sign is `h_k`'s top bit, `h_k` being FNV-1a of the feature
 * mixed with `k` and scrambled.
 */
function addFeature(vector: Float64Array, feature: string, weight: number): void {
  const base = fnv1a(feature);
  const share = weight / Math.sqrt(SPREAD);
  for (let k = 0; k < SPREAD; k++) {
    const h = scramble((base ^ Math.imul(k + 1, 0x9e3779b9)) >>> 0);
    const i = h % vector.length;
    vector[i] = (vector[i] ?? 0) + (h >= 0x80000000 ? -share : share);
  }
}

/**
 * The unit vector of `text` in `dimensions` (≥ 1) dimensions. Per occurrence of a content word
 * `w`: the feature `w:<w>` with weight {@link WORD_WEIGHT}, and each 3-gram of `<w>` (`<` and
 * `>` mark the word's ends) as `g:<3-gram>` with weight `1/√(length of w)`. A shorter vector
 * hashes the same features into fewer buckets; it is not a prefix of a longer one.
 */
export function embed(text: string, dimensions: number = EMBEDDING_DIMENSIONS): Float32Array {
  const vector = new Float64Array(dimensions);
  const all = words(withoutMarkers(text));
  const content = all.filter((w) => !STOP_WORDS.has(w));
  for (const w of (content.length > 0 ? content : all).map(singular)) {
    addFeature(vector, `w:${w}`, WORD_WEIGHT);
    const padded = `<${w}>`;
    const weight = 1 / Math.sqrt(w.length);
    for (let i = 0; i + 3 <= padded.length; i++) addFeature(vector, `g:${padded.slice(i, i + 3)}`, weight);
  }
  // Punctuation alone still gets a vector of its own rather than a zero one.
  if (all.length === 0) addFeature(vector, `t:${text}`, 1);
  let norm = 0;
  for (const x of vector) norm += x * x;
  norm = Math.sqrt(norm);
  const out = new Float32Array(dimensions);
  if (norm === 0) out[0] = 1;
  else for (let i = 0; i < dimensions; i++) out[i] = (vector[i] ?? 0) / norm;
  return out;
}

/** Cosine similarity of two vectors of one length (both unit vectors here, so their dot product). */
export function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] ?? 0;
    const y = b[i] ?? 0;
    dot += x * y;
    na += x * x;
    nb += y * y;
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb);
}

/** OpenAI's `encoding_format: "base64"`: the little-endian float32 array, base64-encoded. */
export function toBase64(vector: Float32Array): string {
  const bytes = Buffer.alloc(vector.length * 4);
  for (let i = 0; i < vector.length; i++) bytes.writeFloatLE(vector[i] ?? 0, i * 4);
  return bytes.toString("base64");
}

/** The inverse of {@link toBase64}. */
export function fromBase64(text: string): Float32Array {
  const bytes = Buffer.from(text, "base64");
  const out = new Float32Array(bytes.length >> 2);
  for (let i = 0; i < out.length; i++) out[i] = bytes.readFloatLE(i * 4);
  return out;
}
