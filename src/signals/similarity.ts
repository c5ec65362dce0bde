import type { SignalModels } from "./signal-models.ts";
import type { SignalField } from "./signal-set.ts";

/** A similarity signal's categories as configured. */
export interface SimilarityCategories {
  readonly model: string;
  readonly categories: readonly { readonly name: string; readonly utterances: readonly string[] }[];
  readonly threshold: number;
  readonly margin: number;
}

/** Texts per embedding call when the utterances are embedded (well under any provider's batch bound). */
const INDEX_BATCH = 256;

/**
 * Unit-length copies of the vectors, so a score is one dot product. A zero vector stays zero
 * (it scores 0 against everything, as cosine does).
 */
function normalized(v: Float32Array): Float32Array {
  let n = 0;
  for (let i = 0; i < v.length; i++) n += v[i]! * v[i]!;
  if (n === 0) return v;
  const out = new Float32Array(v.length);
  const inv = 1 / Math.sqrt(n);
  for (let i = 0; i < v.length; i++) out[i] = v[i]! * inv;
  return out;
}

function dot(a: Float32Array, b: Float32Array): number {
  const n = Math.min(a.length, b.length);
  let s = 0;
  for (let i = 0; i < n; i++) s += a[i]! * b[i]!;
  return s;
}

/**
 * A similarity signal's utterances, embedded once per isolate and publication (the first request
 * that needs them pays for that embedding, as its own sub-request; a failure is not remembered, so
 * the next request tries again), and the scoring of a text against them.
 *
 * The utterance vectors are only comparable with the text's if the same model made both: an
 * embeddings model revision must be served by one model (docs/routing.md), and a new revision is
 * a new publication, which builds a new index.
 */
export class SimilarityIndex {
  readonly #config: SimilarityCategories;
  /** Per category, its utterances' unit vectors. */
  #index: Promise<readonly (readonly Float32Array[])[]> | undefined;

  constructor(config: SimilarityCategories) {
    this.#config = config;
  }

  /**
   * The category the text is nearest to: each category scores the best cosine of any of its
   * utterances; the best category is `category` when it reaches the threshold and leads the
   * runner-up by the margin, else `category` is "" (none). Scores are rounded to 4 decimals.
   */
  async classify(text: string, models: SignalModels, signal: AbortSignal): Promise<Readonly<Record<string, SignalField>>> {
    const [[vector], index] = await Promise.all([models.embed(this.#config.model, [text], signal), this.#utterances(models, signal)]);
    const v = normalized(vector!);
    const { categories, threshold, margin } = this.#config;
    const scores = index.map((vectors) => {
      let best = -1;
      for (const u of vectors) best = Math.max(best, dot(v, u));
      return best;
    });
    let first = 0;
    for (let i = 1; i < scores.length; i++) if (scores[i]! > scores[first]!) first = i;
    let second = -1;
    for (let i = 0; i < scores.length; i++) if (i !== first && (second < 0 || scores[i]! > scores[second]!)) second = i;
    const best = scores[first]!;
    const lead = second < 0 ? best + 1 : best - scores[second]!;
    const out: Record<string, SignalField> = {
      category: best >= threshold && lead >= margin ? categories[first]!.name : "",
      score: round(best),
      margin: round(lead),
    };
    categories.forEach((c, i) => (out[`scores.${c.name}`] = round(scores[i]!)));
    return out;
  }

  #utterances(models: SignalModels, signal: AbortSignal): Promise<readonly (readonly Float32Array[])[]> {
    this.#index ??= (async () => {
      const all = this.#config.categories.flatMap((c) => c.utterances);
      const vectors: Float32Array[] = [];
      for (let i = 0; i < all.length; i += INDEX_BATCH) vectors.push(...(await models.embed(this.#config.model, all.slice(i, i + INDEX_BATCH), signal)));
      let at = 0;
      return this.#config.categories.map((c) => c.utterances.map(() => normalized(vectors[at++]!)));
    })();
    const building = this.#index;
    building.catch(() => {
      if (this.#index === building) this.#index = undefined;
    });
    return building;
  }
}

const round = (x: number) => Math.round(x * 10_000) / 10_000;
