import { GatewayError } from "../errors/gateway-error.ts";
import { decodeUtf8Strict, discardBounded, readableNatively, readAnnounced, readBounded, type BoundedRead } from "../io/bounded-read.ts";

export interface RequestLimits {
  readonly maxBodyBytes: number;
  readonly maxHeaderCount: number;
  readonly maxHeaderBytes: number;
  readonly maxJsonDepth: number;
}

/** Rejects requests with too many or too large headers before any other work. */
export function checkHeaders(headers: Headers, limits: RequestLimits): void {
  let count = 0;
  let bytes = 0;
  for (const [name, value] of headers) {
    count++;
    bytes += name.length + value.length + 4;
  }
  if (count > limits.maxHeaderCount || bytes > limits.maxHeaderBytes) {
    throw new GatewayError("headers_too_large", "Request headers are too large.");
  }
}

/**
 * How much of a refused upload is read and dropped before answering: KJ's HTTP server (under
 * workerd) waits for at most 64 KiB of a body the Worker left unread before closing the
 * connection, and a client still writing then sees a reset instead of the answer. Nothing is
 * kept, so memory stays bounded; past this the stream is cancelled and the connection cut.
 */
export function discardAllowance(limits: Pick<RequestLimits, "maxBodyBytes">): number {
  return limits.maxBodyBytes * 16;
}

/**
 * Reads the body up to the byte limit, stopping as soon as it is exceeded (a lying or missing
 * content-length cannot make the gateway buffer more than the limit). Linear in the body size
 * however the client chunks it. A body stream that fails is the client's side failing (it left
 * mid-body or broke the framing): `client_closed`.
 */
export async function readBodyText(request: Request, limits: RequestLimits): Promise<string> {
  const tooLarge = () => new GatewayError("request_too_large", `The request body exceeds ${limits.maxBodyBytes} bytes.`);
  if (!request.body) return "";
  const declared = request.headers.get("content-length");
  const expectedBytes = declared === null ? undefined : Number(declared);
  if (expectedBytes !== undefined && expectedBytes > limits.maxBodyBytes) {
    await discardBounded(request.body, discardAllowance(limits));
    throw tooLarge();
  }
  let read: BoundedRead;
  try {
    // An ordinary request, bounded by its own framing: one native read of the request itself.
    read = readableNatively(expectedBytes, limits.maxBodyBytes)
      ? await readAnnounced(request, limits.maxBodyBytes)
      : await readBounded(request.body, { maxBytes: limits.maxBodyBytes, discardAfterOverflow: discardAllowance(limits), expectedBytes });
  } catch (err) {
    throw new GatewayError("client_closed", "The client closed the request while sending its body.", { cause: err });
  }
  if (read.overflowed) throw tooLarge();
  try {
    return decodeUtf8Strict(read.bytes);
  } catch {
    throw new GatewayError("invalid_json", "The request body is not valid UTF-8.");
  }
}

/** The schema's default body limit, for refusals made before the config is known. */
const DEFAULT_BODY_LIMITS = { maxBodyBytes: 4 * 1024 * 1024 } as const;

/**
 * Before answering a request refused without reading its body (bad key, content type, headers,
 * route, method): reads and drops the body within {@link discardAllowance}, so the client can
 * read the refusal instead of a reset. A no-op when the body was read (or is being read) already.
 */
export async function discardUnreadBody(request: Request, limits: Pick<RequestLimits, "maxBodyBytes"> = DEFAULT_BODY_LIMITS): Promise<void> {
  const body = request.body;
  if (body === null || request.bodyUsed || body.locked) return;
  await discardBounded(body, discardAllowance(limits));
}

/**
 * Nesting depth of JSON text, counted outside strings. Checked before JSON.parse so a hostile body
 * cannot make any later walk of the value recurse without bound.
 */
export function jsonDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92 /* \ */) i++;
      else if (c === 34 /* " */) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 123 /* { */ || c === 91 /* [ */) {
      if (++depth > max) max = depth;
    } else if (c === 125 /* } */ || c === 93 /* ] */) depth--;
  }
  return max;
}

/**
 * Content type, body size, depth and syntax checks; returns the parsed JSON value. `a2a` also
 * takes `application/a2a+json`, the media type A2A 1.0 agents post push notifications with.
 */
export async function readJsonBody(request: Request, limits: RequestLimits, a2a = false): Promise<unknown> {
  const type = request.headers.get("content-type") ?? "";
  if (!(a2a ? /^application\/(a2a\+)?json\s*(;|$)/i : /^application\/json\s*(;|$)/i).test(type)) {
    throw new GatewayError("unsupported_media_type", "Send the request body as JSON with 'Content-Type: application/json'.");
  }
  const text = await readBodyText(request, limits);
  if (jsonDepth(text) > limits.maxJsonDepth) {
    throw new GatewayError("json_too_deep", `The request body nests deeper than ${limits.maxJsonDepth} levels.`);
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new GatewayError("invalid_json", "We could not parse the JSON body of your request.");
  }
}
