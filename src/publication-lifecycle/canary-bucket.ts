/**
 * A routing key's canary bucket in [0, 100): a request goes to the canary when its bucket is below
 * the canary's percent. The same key always lands in the same bucket, so a caller stays on one
 * revision for as long as the canary's share holds, and raising the share only moves callers
 * onto the canary, never off it. The hash only spreads keys over buckets (it protects nothing), so
 * a fast non-cryptographic one does: FNV-1a over the UTF-16 code units, then murmur3's finalizer
 * so keys that differ only in their last characters still spread over every bucket.
 */
export function canaryBucket(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return (h >>> 0) % 100;
}
