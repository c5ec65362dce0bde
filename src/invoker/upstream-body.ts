import { GatewayError } from "../errors/gateway-error.ts";
import { decodeUtf8Lenient, readableNatively, readBounded } from "../io/bounded-read.ts";

/**
 * Most of a provider's error body kept. It is only ever an internal cause (logs, never a client),
 * so a short prefix is all anyone needs; the rest is cancelled unread.
 */
export const MAX_UPSTREAM_ERROR_BYTES = 16 * 1024;

/** Bound on a buffered provider body, in bytes; a larger one is a provider fault, not something to buffer. */
export const MAX_UPSTREAM_JSON_BYTES = 32 * 1024 * 1024;

/**
 * A bounded prefix of a provider's error body, as text for the internal cause. Never rejects: an
 * error body that cannot be read leaves the cause without detail, and the status still decides.
 */
export async function readUpstreamErrorDetail(res: Response): Promise<string> {
  if (!res.body) return "";
  try {
    const { bytes, overflowed } = await readBounded(res.body, { maxBytes: MAX_UPSTREAM_ERROR_BYTES });
    // The prefix may end inside a character: lenient decoding, and a mark that it was cut.
    return overflowed ? `${decodeUtf8Lenient(bytes)}…` : decodeUtf8Lenient(bytes);
  } catch {
    return "";
  }
}

/**
 * A provider's buffered success body, read within {@link MAX_UPSTREAM_JSON_BYTES} bytes (bytes,
 * not UTF-16 units) and parsed. Larger — declared or actual — is `upstream_protocol_error`, and
 * the rest is cancelled. A stream failure or invalid JSON rejects with that error, for the caller
 * to classify by what else it knows (which signal fired).
 */
export async function readUpstreamJson(res: Response, maxBytes: number = MAX_UPSTREAM_JSON_BYTES): Promise<unknown> {
  const tooLarge = (seen: string) =>
    new GatewayError("upstream_protocol_error", "The model provider returned an unreadable response.", { cause: `provider body ${seen} exceeds ${maxBytes} bytes` });
  const declared = Number(res.headers.get("content-length") ?? "0");
  if (declared > maxBytes) {
    await res.body?.cancel().catch(() => {});
    throw tooLarge(`declared as ${declared} bytes`);
  }
  if (!res.body) throw new SyntaxError("the provider sent no body");
  // An ordinary answer, bounded by its own framing: one native read, decoded as leniently.
  if (declared > 0 && readableNatively(declared, maxBytes)) return JSON.parse(await res.text());
  const { bytes, overflowed } = await readBounded(res.body, { maxBytes, expectedBytes: declared > 0 ? declared : undefined });
  if (overflowed) throw tooLarge("read");
  // As lenient as `Response.text()` was: malformed bytes become U+FFFD, and JSON.parse decides.
  return JSON.parse(decodeUtf8Lenient(bytes));
}
