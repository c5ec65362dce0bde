/** FNV-1a 32-bit offset basis: the initial state of a fresh hash. */
export const FNV1A32_OFFSET_BASIS = 0x811c9dc5;

const FNV1A32_PRIME = 0x01000193;

/**
 * FNV-1a (32-bit) over the UTF-8 encoding of `input`, returned as an unsigned 32-bit integer.
 *
 * Synchronous and allocation-free on purpose: affinity hashing runs once per candidate per
 * request, and `crypto.subtle` is both async and far slower than needed for load spreading
 * (this is not a security boundary: affinity keys are trusted, see SelectionContext).
 * Encoding to UTF-8 inline (rather than hashing UTF-16 code units) keeps results identical
 * to the reference FNV-1a vectors and to any other implementation hashing the same bytes.
 * Lone surrogates are encoded as their 3-byte form so every string still hashes deterministically.
 *
 * @param seed - Continue from a previous state, so a shared prefix (the affinity key) is hashed
 *   once and then extended per backend id.
 */
export function fnv1a32(input: string, seed: number = FNV1A32_OFFSET_BASIS): number {
  let h = seed >>> 0;
  for (let i = 0; i < input.length; i++) {
    let cp = input.charCodeAt(i);
    if (cp >= 0xd800 && cp <= 0xdbff && i + 1 < input.length) {
      const lo = input.charCodeAt(i + 1);
      if (lo >= 0xdc00 && lo <= 0xdfff) {
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        i++;
      }
    }
    if (cp < 0x80) {
      h = Math.imul(h ^ cp, FNV1A32_PRIME);
    } else if (cp < 0x800) {
      h = Math.imul(h ^ (0xc0 | (cp >> 6)), FNV1A32_PRIME);
      h = Math.imul(h ^ (0x80 | (cp & 0x3f)), FNV1A32_PRIME);
    } else if (cp < 0x10000) {
      h = Math.imul(h ^ (0xe0 | (cp >> 12)), FNV1A32_PRIME);
      h = Math.imul(h ^ (0x80 | ((cp >> 6) & 0x3f)), FNV1A32_PRIME);
      h = Math.imul(h ^ (0x80 | (cp & 0x3f)), FNV1A32_PRIME);
    } else {
      h = Math.imul(h ^ (0xf0 | (cp >> 18)), FNV1A32_PRIME);
      h = Math.imul(h ^ (0x80 | ((cp >> 12) & 0x3f)), FNV1A32_PRIME);
      h = Math.imul(h ^ (0x80 | ((cp >> 6) & 0x3f)), FNV1A32_PRIME);
      h = Math.imul(h ^ (0x80 | (cp & 0x3f)), FNV1A32_PRIME);
    }
  }
  return h >>> 0;
}

/**
 * MurmurHash3's 32-bit finalizer (`fmix32`).
 *
 * FNV-1a alone avalanches poorly in its high bits for inputs that differ only in the last byte
 * ("session-1" vs "session-2", "b1" vs "b2"), and rendezvous hashing compares whole 32-bit
 * values, so every output bit has to depend on every input bit.
 */
export function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * Maps an unsigned 32-bit hash into the open interval (0, 1).
 *
 * The half-step offset keeps both ends excluded, which weighted rendezvous needs:
 * `ln(0)` is -Infinity and `ln(1)` is 0 (a division by zero in `-w / ln(h)`).
 */
export function toUnitInterval(h: number): number {
  return ((h >>> 0) + 0.5) / 4294967296;
}
