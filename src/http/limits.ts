import { GatewayError } from "../errors/gateway-error.ts";

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
 * Reads the body up to the byte limit, stopping as soon as it is exceeded (a lying or missing
 * content-length cannot make the gateway buffer more than the limit).
 */
export async function readBodyText(request: Request, limits: RequestLimits): Promise<string> {
  const tooLarge = () => new GatewayError("request_too_large", `The request body exceeds ${limits.maxBodyBytes} bytes.`);
  if (!request.body) return "";
  const reader = request.body.getReader();
  const declared = request.headers.get("content-length");
  if (declared !== null && Number(declared) > limits.maxBodyBytes) {
    await discardRest(reader, limits.maxBodyBytes);
    throw tooLarge();
  }
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > limits.maxBodyBytes) {
      await discardRest(reader, limits.maxBodyBytes);
      throw tooLarge();
    }
    chunks.push(value);
  }
  const all = new Uint8Array(total);
  let offset = 0;
  for (const c of chunks) {
    all.set(c, offset);
    offset += c.byteLength;
  }
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(all);
  } catch {
    throw new GatewayError("invalid_json", "The request body is not valid UTF-8.");
  }
}

/**
 * Reads and drops the rest of an oversized body (up to a hard cap) before answering 413: a client
 * still writing when the connection closes sees a reset instead of the error that explains it.
 * Nothing is kept, so memory stays bounded; past the cap the connection is cut.
 */
async function discardRest(reader: ReadableStreamDefaultReader<Uint8Array>, maxBodyBytes: number): Promise<void> {
  const cap = maxBodyBytes * 16;
  let seen = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    seen += value.byteLength;
    if (seen > cap) {
      await reader.cancel().catch(() => {});
      return;
    }
  }
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

/** Content type, body size, depth and syntax checks; returns the parsed JSON value. */
export async function readJsonBody(request: Request, limits: RequestLimits): Promise<unknown> {
  const type = request.headers.get("content-type") ?? "";
  if (!/^application\/json\s*(;|$)/i.test(type)) {
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
