import type { AttemptRecord } from "./attempt-record.ts";
import type { UpstreamMeter } from "./upstream-meter.ts";

/**
 * Where a request's time went, as far as it is known at `now`: when its answer's headers go out,
 * or when it ended. Milliseconds on the request's clock.
 */
export interface RequestTiming {
  /** From receipt to `now`. */
  readonly totalMs: number;
  /** Waiting for upstreams (see {@link UpstreamMeter}); undefined when no upstream call was made. */
  readonly upstreamMs: number | undefined;
  /** The gateway's own time: the total less the upstream wait. */
  readonly gatewayMs: number;
  /** The latest model attempt's wait for its provider's response headers, when it had them. */
  readonly firstByteMs: number | undefined;
}

/** The request's timing at `now`, from its receipt, its upstream meter and its attempts. */
export function requestTiming(receivedAt: number, upstream: UpstreamMeter, attempts: readonly Readonly<AttemptRecord>[], now: number): RequestTiming {
  const totalMs = Math.max(0, now - receivedAt);
  const upstreamMs = upstream.used ? Math.min(totalMs, upstream.waitedMs(now)) : undefined;
  let firstByteMs: number | undefined;
  for (let i = attempts.length - 1; i >= 0; i--) {
    const a = attempts[i]!;
    if (a.headersAt !== undefined && a.sentAt !== undefined) {
      firstByteMs = Math.max(0, a.headersAt - a.sentAt);
      break;
    }
  }
  return { totalMs, upstreamMs, gatewayMs: totalMs - (upstreamMs ?? 0), firstByteMs };
}
