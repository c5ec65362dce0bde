import type { RequestTiming } from "../context/request-timing.ts";

/** The header's name (W3C Server Timing), lower-case as the adapter writes headers. */
export const SERVER_TIMING = "server-timing";

/** Milliseconds as the header carries them: at most two decimals, never negative. */
function ms(n: number): string {
  return String(Math.max(0, Math.round(n * 100) / 100));
}

/**
 * `Server-Timing` for a request's answer, as far as its timing is known when the headers go out:
 * `gw` the gateway's own time, `upstream` the time waiting for upstreams (only when one was
 * called), `ttfb` the latest provider attempt's wait for its response headers (when it had them).
 * docs/performance.md says how to read them.
 */
export function serverTiming(t: RequestTiming): string {
  let value = `gw;dur=${ms(t.gatewayMs)}`;
  if (t.upstreamMs !== undefined) value += `, upstream;dur=${ms(t.upstreamMs)}`;
  if (t.firstByteMs !== undefined) value += `, ttfb;dur=${ms(t.firstByteMs)}`;
  return value;
}

/** The headers of an answer with its `Server-Timing` added. */
export function timed(headers: Record<string, string>, t: RequestTiming): Record<string, string> {
  return { ...headers, [SERVER_TIMING]: serverTiming(t) };
}

/** `Server-Timing` for an answer the gateway gave with no upstream call and no request of the engine's (a refusal at the door). */
export function gatewayTiming(receivedAt: number, now: number): string {
  return serverTiming({ totalMs: now - receivedAt, upstreamMs: undefined, gatewayMs: now - receivedAt, firstByteMs: undefined });
}
