/**
 * What the client asked of the cache, from its request headers:
 * - `x-sluice-cache: bypass` — neither served from nor stored in the cache;
 * - `Cache-Control: no-store` — not stored (a stored answer may still serve it);
 * - `Cache-Control: no-cache` — not served from the cache (its answer may be stored).
 * A header can only make the cache do less, never serve across a partition.
 */
export interface CacheDirectives {
  readonly lookup: boolean;
  readonly store: boolean;
}

/** The directives of a request's headers (see {@link CacheDirectives}). */
export function cacheDirectives(headers: Headers): CacheDirectives {
  const bypass = (headers.get("x-sluice-cache") ?? "").trim().toLowerCase() === "bypass";
  const control = (headers.get("cache-control") ?? "")
    .toLowerCase()
    .split(",")
    .map((d) => d.trim().split("=")[0]);
  return { lookup: !bypass && !control.includes("no-cache"), store: !bypass && !control.includes("no-store") };
}

/** Why an answer was not stored; recorded so an operator can see why a prompt keeps missing. */
export type NotStoredReason =
  | "directive"
  | "temperature"
  | "tool_calls"
  | "refusal"
  | "error"
  | "incomplete"
  | "unknown_usage"
  | "too_large";

/** The facts about a finished request that decide whether its answer may be stored. */
export interface StoreCandidate {
  readonly directives: CacheDirectives;
  /** The request's sampling temperature, undefined when it did not set one. */
  readonly temperature?: number | undefined;
  /** Above this temperature an answer is one sample of many, not the answer: not stored. */
  readonly maxTemperature: number;
  /** The upstream answered successfully (2xx, decoded). */
  readonly succeeded: boolean;
  /** The answer calls tools: replaying it would repeat side effects the client acts on. */
  readonly toolCalls: boolean;
  /** The model refused (a refusal field, or a `content_filter` finish). */
  readonly refusal: boolean;
  /** The answer ended normally (`stop` or `length`), not cut, timed out or abandoned. */
  readonly complete: boolean;
  /** The attempt's usage is known (reported or counted), not `unknown`. */
  readonly usageKnown: boolean;
  readonly bytes: number;
  readonly maxBytes: number;
}

/** `undefined` when the answer may be stored, else the first reason it may not. */
export function notStoredReason(c: StoreCandidate): NotStoredReason | undefined {
  if (!c.directives.store) return "directive";
  if (c.temperature !== undefined && c.temperature > c.maxTemperature) return "temperature";
  if (!c.succeeded) return "error";
  if (c.toolCalls) return "tool_calls";
  if (c.refusal) return "refusal";
  if (!c.complete) return "incomplete";
  if (!c.usageKnown) return "unknown_usage";
  if (c.bytes > c.maxBytes) return "too_large";
  return undefined;
}
