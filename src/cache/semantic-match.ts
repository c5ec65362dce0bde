import { lexicallyAgree, type LexicalSignature } from "./lexical-gate.ts";

/**
 * The cosine a semantic match must reach unless the plugin sets its own `threshold`. The false
 * hits and misses it gives on the labelled set are measured in docs/cache.md.
 */
export const DEFAULT_SEMANTIC_THRESHOLD = 0.85;

/** A unit-length copy (a zero vector stays zero), so a stored vector's score is one dot product. */
export function unitVector(v: Float32Array): Float32Array {
  let n = 0;
  for (let i = 0; i < v.length; i++) n += v[i]! * v[i]!;
  const out = new Float32Array(v.length);
  if (n === 0) return out;
  const inv = 1 / Math.sqrt(n);
  for (let i = 0; i < v.length; i++) out[i] = v[i]! * inv;
  return out;
}

/** The cosine of two unit vectors of one length: their dot product. */
export function unitCosine(a: Float32Array, b: Float32Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!;
  return s;
}

/** One side of a semantic comparison: a prompt's unit vector and its lexical signature. */
export interface SemanticProbe {
  readonly unit: Float32Array;
  readonly signature: LexicalSignature;
}

/**
 * Whether a stored prompt may answer a new one: their vectors are comparable (one length), their
 * cosine reaches the threshold, and they pass the lexical second gate. The similarity is returned
 * either way (undefined when the vectors are not comparable).
 */
export function semanticMatch(query: SemanticProbe, stored: SemanticProbe, threshold: number): { similarity: number | undefined; accepted: boolean } {
  if (query.unit.length !== stored.unit.length) return { similarity: undefined, accepted: false };
  const similarity = unitCosine(query.unit, stored.unit);
  return { similarity, accepted: similarity >= threshold && lexicallyAgree(query.signature, stored.signature) };
}
