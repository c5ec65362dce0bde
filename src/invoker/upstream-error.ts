import { GatewayError } from "../errors/gateway-error.ts";

/** Parses `retry-after` (seconds or HTTP date) into whole seconds, bounded to a sane range. */
export function retryAfterSeconds(header: string | null, now: number): number | undefined {
  if (header === null) return undefined;
  const secs = Number(header);
  if (Number.isFinite(secs)) return Math.min(3600, Math.max(0, Math.ceil(secs)));
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.min(3600, Math.max(0, Math.ceil((at - now) / 1000)));
}

/**
 * The wait a provider asked for, in seconds: `retry-after-ms` (Azure OpenAI and OpenAI send it,
 * finer than whole seconds) when present and valid, else `retry-after`. Bounded like it.
 */
export function retryAfterFromHeaders(headers: Headers, now: number): number | undefined {
  const ms = Number(headers.get("retry-after-ms") ?? Number.NaN);
  if (Number.isFinite(ms) && ms >= 0) return Math.min(3600, ms / 1000);
  return retryAfterSeconds(headers.get("retry-after"), now);
}

/**
 * Maps a provider's error status to the gateway's error. The provider's own message is kept as the
 * internal cause only: it can name provider model ids and accounts, which stay off public responses.
 */
export function errorFromUpstreamStatus(status: number, retryAfter: number | undefined, detail: string): GatewayError {
  const cause = { status, detail: detail.slice(0, 2000) };
  if (status === 429) {
    return new GatewayError("upstream_rate_limited", "The model provider is rate limiting requests. Retry later.", {
      // The client's `retry-after` is whole seconds; the provider may have said milliseconds.
      retryAfterSeconds: retryAfter === undefined ? 1 : Math.ceil(retryAfter),
      cause,
    });
  }
  if (status === 503 || status === 529) {
    return new GatewayError("upstream_overloaded", "The model provider is overloaded. Retry later.", {
      retryAfterSeconds: retryAfter === undefined ? undefined : Math.ceil(retryAfter),
      cause,
    });
  }
  if (status === 400 || status === 422) {
    return new GatewayError("invalid_request", "The model provider rejected the request as invalid.", { cause });
  }
  if (status === 413) return new GatewayError("request_too_large", "The request is too large for the model provider.", { cause });
  if (status === 401 || status === 403) return upstreamAuthFailed(cause);
  return new GatewayError("upstream_error", "The model provider failed to answer.", { cause });
}

/**
 * The provider refused the gateway's own credential (its key, token or signature): never the
 * caller's fault, and no retry with the same credential helps. One code for every protocol, so a
 * wrong key is not mistaken for an outage; the provider's answer stays in `cause` (logs only).
 */
export function upstreamAuthFailed(cause: unknown): GatewayError {
  return new GatewayError("upstream_auth_failed", "The model provider refused the gateway's credentials for this backend.", { cause });
}
